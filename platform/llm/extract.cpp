#include "platform/llm/extract.hpp"
#include "platform/common/text.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <vector>

namespace kagent {

namespace {

struct fence {
  std::string lang;
  std::string body;
  bool closed = true;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Fences open with ``` (or ~~~) at the start of a line, optionally indented, with an info string.
std::vector<fence> find_fences(const std::string& text) {
  std::vector<fence> out;
  size_t pos = 0;
  bool inside = false;
  fence cur;
  std::string marker;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    std::string t = trim(line);
    if (!inside) {
      if (t.rfind("```", 0) == 0 || t.rfind("~~~", 0) == 0) {
        marker = t.substr(0, 3);
        inside = true;
        cur = {};
        std::string info = trim(t.substr(3));
        cur.lang = lower(info.substr(0, info.find_first_of(" \t{")));
      }
    } else if (t.rfind(marker, 0) == 0 && trim(t.substr(3)).empty()) {
      inside = false;
      out.push_back(cur);
    } else {
      cur.body += line;
      cur.body += '\n';
    }
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  if (inside) {
    cur.closed = false;
    out.push_back(cur);
  }
  return out;
}

bool defines_kernel_function(const std::string& code) {
  // `def kernel_function(` (or `async def`) at the start of a line, at any indentation.
  for (size_t p = code.find("def kernel_function"); p != std::string::npos; p = code.find("def kernel_function", p + 1)) {
    size_t after = p + 19;
    size_t ls = p == 0 ? 0 : code.rfind('\n', p - 1);
    ls = ls == std::string::npos || p == 0 ? 0 : ls + 1;
    std::string prefix = trim(code.substr(ls, p - ls));
    if ((prefix.empty() || prefix == "async") && after < code.size() && (code[after] == '(' || code[after] == ' '))
      return true;
  }
  return false;
}

const fence* pick(const std::vector<const fence*>& cands) {
  if (cands.empty()) return nullptr;
  for (auto* f : cands)
    if (defines_kernel_function(f->body)) return f;
  return *std::max_element(cands.begin(), cands.end(),
                           [](const fence* a, const fence* b) { return a->body.size() < b->body.size(); });
}

bool looks_like_python(const std::string& s) {
  return s.find("def ") != std::string::npos || s.find("import ") != std::string::npos;
}

// Unfenced code often follows a sentence of prose: start at the first line that opens Python code.
std::string strip_leading_prose(const std::string& reply) {
  size_t pos = 0;
  while (pos < reply.size()) {
    size_t eol = reply.find('\n', pos);
    std::string line = trim(reply.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos));
    for (const char* p : {"import ", "from ", "def ", "async def ", "class ", "@", "#"})
      if (line.rfind(p, 0) == 0) return reply.substr(pos);
    if (eol == std::string::npos) break;
    pos = eol + 1;
  }
  return reply;
}

// Length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), or 0 with `bad` set to the
// length of its maximal invalid subpart (at least 1).
size_t utf8_sequence(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;         // overlong
    else if (c == 0xED) hi = 0x9F;    // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;         // overlong
    else if (c == 0xF4) hi = 0x8F;    // past U+10FFFF
  } else {
    return 0;                         // 80..C1, F5..FF never start a sequence
  }
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) {
      bad = k;
      return 0;
    }
    const unsigned char x = b(i + k);
    const bool ok = k == 1 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
    if (!ok) {
      bad = k;
      return 0;
    }
  }
  return len;
}

}  // namespace

size_t first_invalid_utf8(std::string_view s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence(s, i, bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool is_valid_utf8(std::string_view s) { return first_invalid_utf8(s) == std::string_view::npos; }

std::string to_valid_utf8(std::string_view s, size_t* replaced) {
  size_t count = 0;
  std::string out;
  if (is_valid_utf8(s)) {
    out.assign(s);
  } else {
    out.reserve(s.size() + 16);
    size_t bad = 0;
    for (size_t i = 0; i < s.size();) {
      const size_t n = utf8_sequence(s, i, bad);
      if (n > 0) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++count;
        i += bad;
      }
    }
  }
  if (replaced) *replaced = count;
  return out;
}

code_extraction extract_kernel(const std::string& raw_reply, size_t min_chars, size_t max_code_bytes) {
  code_extraction r;
  // Normalised before anything else: the code that is saved must be the code the harness verifies.
  const std::string reply = to_valid_utf8(raw_reply, &r.replaced_bytes);
  if (trim(reply).empty()) {
    r.reason = "the reply was empty; answer with the complete kernel in one ```python code block";
    return r;
  }
  auto fences = find_fences(reply);
  std::vector<const fence*> py, generic;
  for (auto& f : fences) {
    if (f.lang == "python" || f.lang == "py" || f.lang == "python3") py.push_back(&f);
    else generic.push_back(&f);
  }
  const fence* chosen = pick(py);
  if (!chosen) chosen = pick(generic);
  if (chosen) {
    r.code = trim(chosen->body) + "\n";
    if (!chosen->closed && !defines_kernel_function(r.code)) {
      r.reason = "the reply ends inside an unterminated code block (cut off at max_tokens?); "
                 "send the complete kernel in one closed ```python block";
      return r;
    }
  } else if (looks_like_python(reply)) {
    r.code = trim(strip_leading_prose(reply)) + "\n";
  } else {
    r.reason = "the reply contains no code block; answer with the complete kernel in one ```python code block";
    return r;
  }
  std::string body = trim(r.code);
  if (body.empty()) {
    r.reason = "the code block in the reply is empty; send the complete kernel";
    return r;
  }
  if (body.size() < min_chars) {
    r.reason = "the code in the reply is too short (" + std::to_string(body.size()) + " characters, at least " +
               std::to_string(min_chars) + " expected); send the complete kernel, not a fragment";
    return r;
  }
  if (max_code_bytes > 0 && r.code.size() > max_code_bytes) {
    r.reason = "the code in the reply is too large (" + std::to_string(r.code.size()) + " bytes, at most " +
               std::to_string(max_code_bytes) + " allowed by max_kernel_bytes); send one compact kernel file";
    return r;
  }
  if (!defines_kernel_function(r.code)) {
    r.reason = "the code does not define kernel_function; the entry point must be `def kernel_function(...)`";
    return r;
  }
  r.ok = true;
  return r;
}

} // namespace kagent
