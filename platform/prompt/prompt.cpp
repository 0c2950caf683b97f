#include "platform/prompt/prompt.hpp"

#include <kainjow/mustache.hpp>

#include <fstream>
#include <sstream>

#include "platform/common/errors.hpp"

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
  if (j.is_string()) return data{j.get<std::string>()};
  return data{j.dump()};
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace

std::string render_prompt(const std::string& name, const nlohmann::json& data,
                          const std::map<std::string, std::string>& overrides, const std::string& install_root) {
  std::string path;
  std::string text;
  if (auto it = overrides.find(name); it != overrides.end()) {
    path = it->second;
    text = read_file(path);
    if (text.empty()) throw user_error("templates." + name + ": cannot read template file " + path);
  } else {
    path = install_root + "/templates/" + name + ".mustache";
    text = read_file(path);
    if (text.empty()) throw run_error("built-in template missing: " + path);
  }
  kainjow::mustache::mustache tmpl{text};
  if (!tmpl.is_valid()) throw user_error(path + ": invalid mustache template: " + tmpl.error_message());
  // Prompts are plain text: no HTML escaping of code.
  tmpl.set_custom_escape([](const std::string& s) { return s; });
  return tmpl.render(to_data(data));
}

std::string platform_guidance(const std::string& target_platform) {
  if (target_platform != "rocm") return "";
  return "Target: AMD Instinct (ROCm, CDNA). These rules win over any general Triton advice:\n"
         "- Do not use tensor descriptors (tl.make_tensor_descriptor), TMA, or warp_specialize: ROCm Triton "
         "does not support them.\n"
         "- A wavefront has 64 lanes; choose BLOCK sizes and num_warps with that in mind.\n"
         "- Compute units are CUs, not SMs; size grids from the CU count given above.\n";
}

std::string tail_text(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  return "..." + s.substr(s.size() - n);
}

} // namespace kagent
