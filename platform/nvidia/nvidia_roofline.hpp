#pragma once
// NVIDIA roofline (SPEC §6.1, §14 B.82): compute SOL = sm__throughput, memory SOL =
// gpu__compute_memory_throughput (both pct_of_peak_sustained_elapsed, measured by ncu against the
// device's own peaks); tensor-core use from the metric ncu actually collected.
#include <memory>
#include <optional>

#include "platform/gpu/specs.hpp"
#include "platform/profile_core/roofline.hpp"

namespace kagent {

class nvidia_roofline_analyzer : public roofline_analyzer {
public:
  explicit nvidia_roofline_analyzer(const roofline_config& cfg);
  std::string vendor() const override { return "nvidia"; }
  roofline_result analyze(const metric_map& metrics) const override;
};

} // namespace kagent
