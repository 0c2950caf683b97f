#include "platform/rocm/rocm_roofline.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kagent {

rocm_roofline_analyzer::rocm_roofline_analyzer(const roofline_config& cfg, std::optional<gpu_specs> specs)
    : roofline_analyzer(resolve_roofline_settings(cfg, rocm_roofline_defaults())), specs_(std::move(specs)) {}

roofline_result rocm_roofline_analyzer::analyze(const metric_map& m) const {
  roofline_result r;
  r.vendor = "rocm";
  auto get = [&](const char* k) -> std::optional<double> {
    auto it = m.find(k);
    return it == m.end() ? std::nullopt : std::optional<double>(it->second);
  };
  auto dur_ms = get("duration_ms");
  const bool have_duration = dur_ms && *dur_ms > 0;
  if (!have_duration) r.notes.push_back("no duration_ms: no SOL can be derived");
  if (!specs_) r.notes.push_back("no GPU spec row: no peak to divide by");

  // Memory: bytes moved through the memory controller over the measured dispatch.
  auto fetch = get("fetch_size_kb"), write = get("write_size_kb");
  if (fetch && write && have_duration) {
    double gbps = (*fetch + *write) * 1024.0 / (*dur_ms * 1e-3) / 1e9;
    r.details["achieved_bandwidth_gbps"] = round_to(gbps, 2);
    if (specs_ && specs_->peak_memory_bw_gbps > 0) {
      r.memory_sol_pct = round_to(100.0 * gbps / specs_->peak_memory_bw_gbps, 2);
      r.details["peak_memory_bw_gbps"] = specs_->peak_memory_bw_gbps;
      r.notes.push_back("memory SOL = (FETCH_SIZE + WRITE_SIZE) x 1024 B / duration / peak_memory_bw_gbps");
    }
  } else if (!fetch || !write) {
    r.notes.push_back("memory SOL unavailable: FETCH_SIZE and WRITE_SIZE were not both collected");
  }

  // Compute: only from SQ_INSTS_VALU (SPEC §14 A.12), plus the MFMA counters when collected.
  auto valu = get("sq_insts_valu");
  if (valu && have_duration && specs_) {
    const double s = *dur_ms * 1e-3;
    const double wave = specs_->wavefront_size > 0 ? specs_->wavefront_size : 64;
    std::optional<double> vector_frac, matrix_frac;
    double vector_flop = *valu * wave * 2.0;
    r.details["vector_tflops_upper_bound"] = round_to(vector_flop / s / 1e12, 3);
    if (specs_->peak_fp32_tflops > 0) vector_frac = vector_flop / s / (specs_->peak_fp32_tflops * 1e12);
    auto f16 = get("sq_insts_valu_mfma_mops_f16"), bf16 = get("sq_insts_valu_mfma_mops_bf16"),
         f32 = get("sq_insts_valu_mfma_mops_f32");
    if (f16 || bf16 || f32) {
      double frac = 0, flop = 0;
      auto add = [&](std::optional<double> mops, double peak_tflops) {
        if (!mops) return;
        flop += 512.0 * *mops;
        if (peak_tflops > 0) frac += 512.0 * *mops / s / (peak_tflops * 1e12);
      };
      add(f16, specs_->peak_fp16_tflops);
      add(bf16, specs_->peak_bf16_tflops);
      add(f32, specs_->peak_fp32_tflops);
      matrix_frac = frac;
      r.details["matrix_tflops"] = round_to(flop / s / 1e12, 3);
      r.uses_tensor_cores = flop > 0;
    } else {
      r.notes.push_back("MFMA counters not collected: compute SOL counts vector ALU work only");
    }
    double best = std::max(vector_frac.value_or(0), matrix_frac.value_or(0));
    if (vector_frac || matrix_frac) {
      r.compute_sol_pct = round_to(100.0 * best, 2);
      r.notes.push_back(
          "compute SOL = max(SQ_INSTS_VALU x wavefront x 2 FLOP, 512 x MFMA MOPS per dtype) / duration / spec "
          "peak TFLOPS; the VALU term is an upper bound");
    }
  } else if (!valu) {
    r.notes.push_back("compute SOL unavailable: SQ_INSTS_VALU was not collected");
  }

  // Supporting numbers under their real names: instruction mix is NOT a SOL (SPEC §14 A.34).
  for (const char* k : {"tcc_cache_hit_rate_pct", "inst_mix_valu_pct", "inst_mix_salu_pct", "inst_mix_vmem_pct",
                        "inst_mix_lds_pct"})
    if (auto v = get(k)) r.details[k] = *v;

  for (auto [name, v] : {std::pair{"compute", r.compute_sol_pct}, std::pair{"memory", r.memory_sol_pct}})
    if (v && *v > 100.0)
      r.warnings.push_back(fmt::format("{} SOL {:.1f}% exceeds the spec row's peak: the counters, the duration "
                                       "or the GPU name (spec row) do not match this device",
                                       name, *v));
  classify(r);
  if (!r.compute_sol_pct && !r.memory_sol_pct)
    r.warnings.push_back("Analysis failed - no SOL metrics in rocprof data");
  else if (r.efficiency_pct == 0)
    r.warnings.push_back("No compute or memory activity detected in rocprof counters");
  return r;
}

} // namespace kagent
