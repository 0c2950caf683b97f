#pragma once
// ROCm roofline (SPEC §6.2 with the reviewer's correction, §14 A.29-A.35): both SOL numbers are
// fractions of a peak from the GPU's spec row, never instruction-mix shares.
//
//   memory SOL  = 100 * (FETCH_SIZE + WRITE_SIZE) * 1024 B / duration / peak_memory_bw_gbps
//   compute SOL = 100 * max(vector, matrix), where
//     vector = SQ_INSTS_VALU * wavefront_size * 2 FLOP / duration / peak_fp32_tflops
//              (each VALU instruction counted as a full-wave FMA: an upper bound of vector FLOP/s)
//     matrix = 512 * (MOPS_F16 / peak_fp16 + MOPS_BF16 / peak_bf16 + MOPS_F32 / peak_fp32) / duration
//              (SQ_INSTS_VALU_MFMA_MOPS_* count units of 512 FLOP)
// Either SOL is absent, with a note, when a counter it needs was not collected.
#include <optional>

#include "platform/gpu/specs.hpp"
#include "platform/profile_core/roofline.hpp"

namespace kagent {

class rocm_roofline_analyzer : public roofline_analyzer {
public:
  /// `specs` is the spec row of the profiled GPU; without one no SOL can be derived.
  rocm_roofline_analyzer(const roofline_config& cfg, std::optional<gpu_specs> specs);
  std::string vendor() const override { return "rocm"; }
  roofline_result analyze(const metric_map& metrics) const override;
  const std::optional<gpu_specs>& specs() const { return specs_; }

private:
  std::optional<gpu_specs> specs_;
};

} // namespace kagent
