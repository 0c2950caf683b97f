#include "platform/search/tune.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace kagent::search {

namespace {

enum class tok { name, integer, op, newline };

struct token {
  tok kind;
  std::string text;
  size_t offset = 0;
  int depth = 0;  ///< brackets open before it: inside one, `NAME=1` is a keyword argument
};

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

/// Where the string literal that starts at `i` (its quote, after any prefix) ends.
size_t skip_string(const std::string& s, size_t i) {
  const char q = s[i];
  const bool triple = i + 2 < s.size() && s[i + 1] == q && s[i + 2] == q;
  i += triple ? 3 : 1;
  while (i < s.size()) {
    if (s[i] == '\\') {
      i += 2;
      continue;
    }
    if (triple) {
      if (s[i] == q && i + 2 < s.size() && s[i + 1] == q && s[i + 2] == q) return i + 3;
    } else if (s[i] == q) {
      return i + 1;
    } else if (s[i] == '\n') {
      return i;  // an unterminated one-line string ends with its line
    }
    ++i;
  }
  return s.size();
}

/// Python source as the few tokens the patterns below need: names, decimal integers, operators (the
/// two-character comparisons kept whole, so that `==` is never read as `=`) and line ends. Comments
/// and string literals are skipped.
std::vector<token> tokenize(const std::string& s) {
  std::vector<token> out;
  size_t i = 0;
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '\n') {
      if (depth == 0) out.push_back({tok::newline, "\n", i, 0});  // inside brackets a line goes on
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c)) || c == '\\') {
      ++i;
    } else if (c == '"' || c == '\'') {
      i = skip_string(s, i);
    } else if (name_start(c)) {
      size_t j = i;
      while (j < s.size() && name_char(s[j])) ++j;
      // A string prefix (r, b, f, rb, ...) directly before a quote is part of the string.
      if (j < s.size() && (s[j] == '"' || s[j] == '\'') && j - i <= 2) {
        i = skip_string(s, j);
        continue;
      }
      out.push_back({tok::name, s.substr(i, j - i), i, depth});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (name_char(s[j]) || s[j] == '.')) ++j;  // 0x10, 1e3, 2.0, 1_000 as one token
      const std::string t = s.substr(i, j - i);
      const bool decimal = std::all_of(t.begin(), t.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); });
      out.push_back({decimal ? tok::integer : tok::op, t, i, depth});
      i = j;
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "//", "**", "->", ":="};
      std::string t(1, c);
      for (const char* w : two)
        if (s.compare(i, 2, w) == 0) t = w;
      if (t == ")" || t == "]" || t == "}") depth = std::max(0, depth - 1);
      out.push_back({tok::op, t, i, depth});
      if (t == "(" || t == "[" || t == "{") ++depth;
      i += t.size();
    }
  }
  return out;
}

/// The usual values of a launch constant, by its name; empty for a name the sweep leaves alone.
std::vector<int> domain_of(const std::string& name) {
  static const std::regex block("^(BLOCK|TILE)(_?[A-Z0-9]+)*$");
  static const std::regex split("^SPLIT(_[A-Z0-9]+)*$");
  static const std::regex group("^GROUP_SIZE(_[A-Z0-9]+)*$");
  auto powers = [](int lo, int hi) {
    std::vector<int> v;
    for (int x = lo; x <= hi; x *= 2) v.push_back(x);
    return v;
  };
  if (name == "num_warps" || name == "NUM_WARPS") return {1, 2, 4, 8, 16};
  if (name == "num_stages" || name == "NUM_STAGES") return {1, 2, 3, 4, 5, 6};
  if (std::regex_match(name, block)) return powers(1, 8192);
  if (std::regex_match(name, split)) return powers(1, 1024);
  if (std::regex_match(name, group)) return powers(1, 64);
  return {};
}

bool ends_value(const std::vector<token>& t, size_t k) {
  return k >= t.size() || t[k].kind == tok::newline || t[k].text == "," || t[k].text == ")" || t[k].text == ";";
}

bool starts_statement(const std::vector<token>& t, size_t k) {  // k: index of the first token, or npos-like
  return k == static_cast<size_t>(-1) || t[k].kind == tok::newline || t[k].text == ";";
}

} // namespace

std::vector<tune_site> tune_sites(const std::string& code) {
  const auto t = tokenize(code);
  std::vector<tune_site> out;
  auto site = [&](const token& name, const token& lit) {
    if (domain_of(name.text).empty()) return;
    try {
      out.push_back({name.text, std::stoi(lit.text), lit.offset, lit.text.size()});
    } catch (...) {
      // A literal too long for an int is no launch constant.
    }
  };
  for (size_t k = 1; k + 1 < t.size(); ++k) {
    if (t[k].kind != tok::op || t[k].text != "=") continue;
    // A keyword argument: `f(..., NAME=128, ...)`.
    if (t[k].depth > 0) {
      if (k >= 2 && t[k - 1].kind == tok::name && (t[k - 2].text == "(" || t[k - 2].text == ",") &&
          t[k + 1].kind == tok::integer && ends_value(t, k + 2))
        site(t[k - 1], t[k + 1]);
      continue;
    }
    // An assignment statement: `A = 1` or `A, B, C = 16, 512, 64`, the value ending its line.
    std::vector<size_t> names;
    size_t j = k;
    while (j >= 1 && t[j - 1].kind == tok::name) {
      names.insert(names.begin(), j - 1);
      if (j >= 3 && t[j - 2].text == "," && t[j - 3].kind == tok::name)
        j -= 2;
      else {
        j -= 1;
        break;
      }
    }
    if (names.empty()) continue;
    const size_t first = names.front();
    if (!starts_statement(t, first == 0 ? static_cast<size_t>(-1) : first - 1)) continue;
    std::vector<size_t> values;
    size_t v = k + 1;
    while (v < t.size() && t[v].kind == tok::integer) {
      values.push_back(v);
      if (v + 2 < t.size() && t[v + 1].text == "," && t[v + 2].kind == tok::integer)
        v += 2;
      else {
        ++v;
        break;
      }
    }
    if (values.size() != names.size()) continue;
    if (!(v >= t.size() || t[v].kind == tok::newline || t[v].text == ";")) continue;
    for (size_t n = 0; n < names.size(); ++n) site(t[names[n]], t[values[n]]);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.offset < b.offset; });
  return out;
}

namespace {

/// The axes of `code` from its sites (tune_sites), so that each caller tokenizes the source once.
std::vector<tune_axis> axes_of(const std::string& code, const std::vector<tune_site>& sites) {
  if (code.find("autotune") != std::string::npos) return {};
  std::vector<tune_axis> axes;
  std::map<std::string, bool> consistent;
  for (const auto& s : sites) {
    auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.name == s.name; });
    if (it == axes.end()) {
      axes.push_back({s.name, s.value, domain_of(s.name)});
      consistent[s.name] = true;
    } else if (it->value != s.value) {
      consistent[s.name] = false;  // set to different values in different places: left alone
    }
  }
  std::erase_if(axes, [&](const auto& a) {
    return !consistent[a.name] || std::find(a.domain.begin(), a.domain.end(), a.value) == a.domain.end();
  });
  return axes;
}

std::string label_of(const std::vector<tune_axis>& axes, const std::map<std::string, int>& values) {
  std::string out;
  for (const auto& a : axes) {
    auto it = values.find(a.name);
    if (it == values.end() || it->second == a.value) continue;
    if (!out.empty()) out += "; ";
    out += fmt::format("{} {}->{}", a.name, a.value, it->second);
  }
  return out;
}

} // namespace

std::vector<tune_axis> tune_axes(const std::string& code) { return axes_of(code, tune_sites(code)); }

std::string tune_label(const std::string& code, const std::map<std::string, int>& values) {
  return label_of(tune_axes(code), values);
}

std::vector<tune_variant> tune_variants(const std::string& code, size_t max) {
  const auto axes = tune_axes(code);
  std::vector<tune_variant> out;
  auto index_of = [](const tune_axis& a) {
    return static_cast<int>(std::find(a.domain.begin(), a.domain.end(), a.value) - a.domain.begin());
  };
  // moves: (axis, steps) pairs applied together
  auto add = [&](const std::vector<std::pair<size_t, int>>& moves) {
    if (out.size() >= max) return;
    std::map<std::string, int> values;
    for (const auto& [ax, step] : moves) {
      const auto& a = axes[ax];
      const int i = index_of(a) + step;
      if (i < 0 || i >= static_cast<int>(a.domain.size())) return;
      values[a.name] = a.domain[static_cast<size_t>(i)];
    }
    out.push_back({values, label_of(axes, values)});
  };
  for (size_t a = 0; a < axes.size(); ++a)
    for (int s : {-1, 1}) add({{a, s}});
  for (size_t a = 0; a < axes.size(); ++a)
    for (size_t b = a + 1; b < axes.size(); ++b)
      for (int sa : {-1, 1})
        for (int sb : {-1, 1}) add({{a, sa}, {b, sb}});
  for (int d : {2, 3})
    for (size_t a = 0; a < axes.size(); ++a)
      for (int s : {-d, d}) add({{a, s}});
  return out;
}

std::optional<std::string> apply_tune(const std::string& code, const std::map<std::string, int>& values) {
  const auto sites = tune_sites(code);
  const auto axes = axes_of(code, sites);
  for (const auto& [name, v] : values) {
    auto it = std::find_if(axes.begin(), axes.end(), [&](const auto& a) { return a.name == name; });
    if (it == axes.end() || std::find(it->domain.begin(), it->domain.end(), v) == it->domain.end()) return std::nullopt;
  }
  std::string out = code;
  for (auto s = sites.rbegin(); s != sites.rend(); ++s)
    if (auto v = values.find(s->name); v != values.end()) out.replace(s->offset, s->length, std::to_string(v->second));
  return out;
}

/// How program.db names a variant's change, and back.
std::string variant_bottleneck(const std::string& label) { return "tune: " + label; }

std::optional<std::string> variant_label(const std::string& bottleneck) {
  if (bottleneck.rfind("tune: ", 0) != 0) return std::nullopt;
  return bottleneck.substr(6);
}

bool is_variant_id(const std::string& id) {
  static const std::regex re("r[0-9]+_t[0-9]+");
  return std::regex_match(id, re);
}

} // namespace kagent::search
