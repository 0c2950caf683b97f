#include "platform/profiling/roofline_factory.hpp"

#include "platform/common/errors.hpp"
#include "platform/nvidia/nvidia_roofline.hpp"
#include "platform/rocm/rocm_roofline.hpp"

namespace kagent {

std::unique_ptr<roofline_analyzer> make_roofline_analyzer(const std::string& vendor, const roofline_config& cfg,
                                                          const std::optional<gpu_specs>& specs) {
  if (vendor == "nvidia") return std::make_unique<nvidia_roofline_analyzer>(cfg);
  if (vendor == "rocm" || vendor == "amd") return std::make_unique<rocm_roofline_analyzer>(cfg, specs);
  throw user_error("roofline: unknown vendor '" + vendor + "' (expected nvidia or rocm)");
}

} // namespace kagent
