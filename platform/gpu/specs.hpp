#pragma once
// The GPU specs database (SPEC §9): peak numbers that a roofline divides by and that prompts quote.
// Read-only; lookups return copies. Owned by the GPU platform layer; the profiling layer only reads.
#include <optional>
#include <string>
#include <vector>

namespace kagent {

struct gpu_specs {
  std::string name;                 ///< database key, e.g. "AMD Instinct MI300X", "NVIDIA H200"
  std::string vendor;               ///< "nvidia" or "amd"
  std::string architecture;         ///< "Hopper", "CDNA3", ...
  std::string gfx_target;           ///< AMD only: "gfx942"; empty on NVIDIA
  double peak_fp32_tflops = 0;
  double peak_fp16_tflops = 0;      ///< dense
  double peak_bf16_tflops = 0;      ///< dense
  double peak_memory_bw_gbps = 0;
  int sm_count = 0;                 ///< CUs on AMD (alias cu_count)
  int max_threads_per_sm = 0;       ///< per CU on AMD
  double l1_cache_kb = 0;           ///< per SM/CU
  double l2_cache_mb = 0;           ///< package total
  double memory_gb = 0;
  std::string memory_type;
  std::string form_factor;
  double tdp_w = 0;
  int wavefront_size = 32;          ///< 64 on AMD Instinct

  /// "CU" on AMD (CDNA), "SM" on NVIDIA — what prompts call a compute unit (SPEC §14 A.45).
  std::string compute_unit_label() const { return vendor == "amd" ? "CU" : "SM"; }
};

/// Exact-key lookup; nullopt when unknown.
std::optional<gpu_specs> find_gpu_specs(const std::string& name);

/// Every key, in database order (used in "unknown GPU" errors).
std::vector<std::string> known_gpu_names();

/// Resolves a product name, a torch/amd-smi marketing name, or a gfx ISA name (+ optional PCI chip id
/// like "0x74a1" and CU count for tie-breaks) to a database key (SPEC §9.4). nullopt when nothing fits.
std::optional<std::string> resolve_gpu_name(const std::string& name_or_isa,
                                            const std::string& chip_id = "",
                                            int compute_units = 0);

} // namespace kagent
