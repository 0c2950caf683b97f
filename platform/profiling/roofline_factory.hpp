#pragma once
// The roofline analyzer of a vendor: above both vendors' areas, so that neither depends on the other.
#include <memory>
#include <optional>
#include <string>

#include "platform/gpu/specs.hpp"
#include "platform/profile_core/roofline.hpp"

namespace kagent {

/// The analyzer for a vendor ("nvidia", or "rocm"/"amd"); `specs` is needed for ROCm's peaks.
/// Unknown vendor: user_error.
std::unique_ptr<roofline_analyzer> make_roofline_analyzer(const std::string& vendor, const roofline_config& cfg,
                                                          const std::optional<gpu_specs>& specs);

} // namespace kagent
