#include "platform/gpu/gpu_name.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"

namespace kagent {
namespace {

std::string known_list() { return fmt::format("{}", fmt::join(known_gpu_names(), ", ")); }

std::string id_label(const std::string& vendor) { return vendor == "rocm" ? "HIP id" : "GPU"; }

}  // namespace

std::string validate_gpu_name(const std::string& configured) {
  if (auto key = resolve_gpu_name(configured)) return *key;
  throw user_error(
      fmt::format("gpu_name '{}' is not in the GPU specs database; known names: {}", configured, known_list()));
}

gpu_name_choice reconcile_gpu_name(const std::string& configured, const gpu_selection& sel) {
  // The first selected device that resolves decides; a mixed node lists one model per vendor, and
  // a run uses one vendor.
  const gpu_device* dev = nullptr;
  for (const auto& d : sel.devices)
    if (!d.spec_key.empty()) {
      dev = &d;
      break;
    }
  const gpu_device* unknown = sel.devices.empty() || sel.devices.front().name.empty() ? nullptr : &sel.devices.front();

  if (dev) {
    if (configured.empty())
      return {dev->spec_key, fmt::format("gpu_name derived from the selected device ({} {}: {})", id_label(sel.vendor),
                                         dev->id, dev->spec_key)};
    auto cfg = resolve_gpu_name(configured);
    if (cfg && *cfg == dev->spec_key) return {dev->spec_key, ""};
    return {dev->spec_key, fmt::format("gpu_name '{}' from the config does not match the selected device ({} {}: {}); "
                                       "using {}",
                                       configured, id_label(sel.vendor), dev->id,
                                       dev->name.empty() ? dev->spec_key : dev->name, dev->spec_key)};
  }
  if (!configured.empty()) {
    auto key = validate_gpu_name(configured);
    if (unknown)
      return {key, fmt::format("selected device '{}' is not in the GPU specs database; using configured gpu_name {}",
                               unknown->name, key)};
    return {key, ""};
  }
  if (unknown)
    throw user_error(fmt::format("selected device '{}' is not in the GPU specs database and no gpu_name is configured; "
                                 "set gpu_name to one of: {}",
                                 unknown->name, known_list()));
  if (!sel.vendor.empty())
    throw user_error(fmt::format("no gpu_name is configured and the selected devices were not detected (explicit "
                                 "gpu_ids); set gpu_name to one of: {}",
                                 known_list()));
  return {"", ""};
}

}  // namespace kagent
