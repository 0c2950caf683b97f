#include "platform/profile_core/kernel_profile.hpp"

namespace kagent {

void to_json(nlohmann::json& j, const kernel_profile& p) {
  j = nlohmann::json{{"metrics", p.metrics},
                     {"roofline", p.roofline ? nlohmann::json(*p.roofline) : nlohmann::json(nullptr)},
                     {"kernel_name", p.kernel_name},
                     {"platform", p.platform},
                     {"label", p.label}};
}

void from_json(const nlohmann::json& j, kernel_profile& p) {
  p = kernel_profile{};
  if (!j.is_object()) return;
  p.kernel_name = j.value("kernel_name", std::string{});
  p.platform = j.value("platform", std::string{});
  p.label = j.value("label", std::string{});
  if (j.contains("metrics") && !j.at("metrics").is_null()) p.metrics = metrics_from_json(j.at("metrics"));
  if (j.contains("roofline") && j.at("roofline").is_object()) p.roofline = j.at("roofline").get<roofline_result>();
}

} // namespace kagent
