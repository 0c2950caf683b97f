#include "platform/gpu/pinning.hpp"

#include <stdexcept>
#include <vector>

namespace kagent {
namespace {

/// What a vendor's pin does to a copy of the parent environment.
struct pin_hook {
  std::vector<std::string> remove;                             ///< masks that must not reach the child
  std::string device_var;                                      ///< set to the device id
  std::vector<std::pair<std::string, std::string>> also_set;   ///< fixed companions
};

const pin_hook* hook_for(const std::string& vendor) {
  // CUDA numbers devices fastest-first unless told otherwise, while nvidia-smi (whose index we
  // detected) numbers them in PCI bus order (TOOL_FORMATS.md §3.1).
  static const pin_hook nvidia{{}, "CUDA_VISIBLE_DEVICES", {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}};
  // The HIP id is what HIP_VISIBLE_DEVICES means with no ROCR mask underneath it; ROCm PyTorch also
  // honours CUDA_VISIBLE_DEVICES, so that one is removed rather than emptied (§10.2 rule 3).
  static const pin_hook rocm{{"CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}, "HIP_VISIBLE_DEVICES", {}};
  if (vendor == "nvidia") return &nvidia;
  if (vendor == "rocm") return &rocm;
  return nullptr;
}

}  // namespace

env_map pin_environment(const env_map& parent, const std::string& vendor, int device_id) {
  const pin_hook* hook = hook_for(vendor);
  if (!hook) return parent;
  if (device_id < 0) throw std::invalid_argument("pin_environment: negative device id " + std::to_string(device_id));
  env_map env = parent;
  for (const auto& var : hook->remove) env.erase(var);
  for (const auto& [k, v] : hook->also_set) env[k] = v;
  env[hook->device_var] = std::to_string(device_id);
  return env;
}

}  // namespace kagent
