#include "platform/prompt/prompt.hpp"

#include <kainjow/mustache.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/prompt/format.hpp"
#include "platform/common/files.hpp"

namespace kagent {

namespace {

kainjow::mustache::data to_data(const nlohmann::json& j) {
  using kainjow::mustache::data;
  if (j.is_object()) {
    data d{data::type::object};
    for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), to_data(it.value()));
    return d;
  }
  if (j.is_array()) {
    data l{data::type::list};
    for (const auto& e : j) l.push_back(to_data(e));
    return l;
  }
  if (j.is_boolean()) return j.get<bool>() ? data{data::type::bool_true} : data{data::type::bool_false};
  if (j.is_null()) return data{data::type::bool_false};
  if (j.is_string()) {
    // An empty string is false, so {{#text}}...{{/text}} leaves out a section with nothing in it
    // (kainjow would otherwise treat every string as true).
    if (j.get_ref<const std::string&>().empty()) return data{data::type::bool_false};
    return data{j.get<std::string>()};
  }
  return data{j.dump()};
}

std::string trim_blank(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// Marks an intentionally blank template line, so kainjow's own line handling never drops it; removed
// from the output after rendering.
constexpr char k_blank_mark = '\x1e';

/// True when `line` (without its newline) holds only section, inverted, closing, comment or partial
/// tags and blanks: a "standalone" line in Mustache terms.
bool is_standalone_tag_line(const std::string& line, std::string& tags) {
  tags.clear();
  size_t i = 0;
  bool any = false;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (line.compare(i, 2, "{{") != 0 || i + 2 >= line.size()) return false;
    const char kind = line[i + 2];
    if (kind != '#' && kind != '^' && kind != '/' && kind != '!' && kind != '>') return false;
    const auto end = line.find("}}", i + 3);
    if (end == std::string::npos) return false;
    tags += line.substr(i, end + 2 - i);
    i = end + 2;
    any = true;
  }
  return any;
}

/// Applies the Mustache standalone-line rule before kainjow sees the template: a line holding only
/// section tags disappears (tags kept, blanks and newline dropped), so a section that renders nothing
/// leaves no blank line behind. Blank lines are marked so that they always survive.
std::string prepare_template(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 64);
  size_t pos = 0;
  std::string tags;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const bool has_nl = nl != std::string::npos;
    const std::string line = text.substr(pos, has_nl ? nl - pos : std::string::npos);
    pos = has_nl ? nl + 1 : text.size();
    if (is_standalone_tag_line(line, tags)) {
      out += tags;
      continue;
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) out.push_back(k_blank_mark);
    out += line;
    if (has_nl) out.push_back('\n');
  }
  return out;
}

} // namespace

std::string render_prompt(const std::string& name, const nlohmann::json& data,
                          const std::map<std::string, std::string>& overrides, const std::string& install_root) {
  std::string path;
  std::optional<std::string> text;
  if (auto it = overrides.find(name); it != overrides.end()) {
    path = it->second;
    text = read_file_if_present(path);
    if (!text) throw user_error("templates." + name + ": cannot read template file '" + path + "'");
  } else {
    path = install_root + "/templates/" + name + ".mustache";
    text = read_file_if_present(path);
    if (!text) throw run_error("built-in template missing: " + path);
  }
  kainjow::mustache::mustache tmpl{prepare_template(*text)};
  if (!tmpl.is_valid()) throw user_error(path + ": invalid mustache template: " + tmpl.error_message());
  // Prompts are plain text: no HTML escaping of code.
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  std::string out = tmpl.render(to_data(data));
  if (!tmpl.is_valid()) throw user_error(path + ": cannot render template: " + tmpl.error_message());
  std::erase(out, k_blank_mark);
  return out;
}

std::string platform_guidance(const std::string& target_platform, const std::map<std::string, std::string>& overrides,
                              const std::string& install_root) {
  const std::string fam = promptfmt::platform_family(target_platform);
  nlohmann::json d{{"platform", fam}, {"rocm", fam == "rocm"}, {"cpu", fam == "cpu"}, {"cuda", fam == "cuda"},
                   {"xpu", fam == "xpu"}};
  return trim_blank(render_prompt("platform_guidance", d, overrides, install_root));
}

std::string prompt_target_platform(const std::string& configured, const std::string& vendor, const std::string& verifier) {
  const std::string chosen = !vendor.empty() ? vendor : verifier;
  if (chosen == "rocm") return "rocm";
  if (chosen == "nvidia" && configured == "rocm") return "cuda";
  return configured;
}

std::string platform_guidance(const std::string& target_platform) {
  return platform_guidance(target_platform, {}, install_root());
}

std::string tail_text(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return "..." + s.substr(s.size() - n);
}

std::string head_text(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n) + "...";
}

std::string classify_error_type(const std::string& stderr_text, const std::string& stdout_text) {
  const std::string& chosen = trim_blank(stderr_text).empty() ? stdout_text : stderr_text;
  if (chosen.find("CompilationError") != std::string::npos || chosen.find("SyntaxError") != std::string::npos)
    return "compilation";
  return "runtime";
}

} // namespace kagent
