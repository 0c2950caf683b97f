#include "platform/llm/extract.hpp"

#include <algorithm>
#include <cctype>
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

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
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

}  // namespace

code_extraction extract_kernel(const std::string& reply, size_t min_chars) {
  code_extraction r;
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
  if (!defines_kernel_function(r.code)) {
    r.reason = "the code does not define kernel_function; the entry point must be `def kernel_function(...)`";
    return r;
  }
  r.ok = true;
  return r;
}

} // namespace kagent
