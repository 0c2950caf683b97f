#pragma once
// Listing the GPUs of this host with the vendor CLI tools (SPEC §10.1, §10.3, §9.4). Detection never
// initialises a GPU runtime in this process (§10.2 rule 13): it only runs nvidia-smi and amd-smi as
// children. The parsers are pure functions over the tools' text (TOOL_FORMATS.md §2, §3.1); the
// runners around them are thin.
#include <chrono>
#include <string>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent {

/// One device as a vendor tool lists it. No masks are applied here: amd-smi ignores the ROCm masks
/// and nvidia-smi ignores CUDA_VISIBLE_DEVICES, so a listing is always the whole host.
struct gpu_device {
  int id = -1;              ///< NVIDIA: nvidia-smi index. AMD: HIP id (HIP_ID of `amd-smi list -e`)
  std::string name;         ///< product name as the tool prints it (nvidia-smi name, amd-smi MARKET_NAME)
  std::string uuid;
  std::string chip_id;      ///< AMD: PCI DEVICE_ID ("0x74a1") of the same amd-smi record; empty on NVIDIA
  int compute_units = 0;    ///< AMD: NUM_COMPUTE_UNITS of the same record; 0 when unknown
  std::string gfx_target;   ///< AMD: TARGET_GRAPHICS_VERSION ("gfx942")
  int hsa_id = -1;          ///< AMD: HSA_ID (not what the masks mean; kept for messages)
  int smi_index = -1;       ///< amd-smi's own "GPU: N" index (may differ from the HIP id)
  std::string bdf;          ///< PCI address when the tool prints it
  double memory_mib = 0;    ///< NVIDIA: memory.total
  std::string spec_key;     ///< specs-database key resolved from the fields above; empty when unknown
};

using gpu_listing = std::vector<gpu_device>;

// ---- parsers (pure) -------------------------------------------------------------------------------

/// `nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits` output.
/// "No devices were found" is an empty listing. Throws run_error on a line it cannot read.
gpu_listing parse_nvidia_smi_query(const std::string& text);

/// One record of `amd-smi list -e` (text or `--json`, either JSON shape).
struct amd_smi_list_entry {
  int smi_index = -1;
  int hip_id = -1;
  int hsa_id = -1;
  std::string bdf;
  std::string uuid;
};

/// One record of `amd-smi static --asic` (text or `--json`, either JSON shape).
struct amd_smi_asic_entry {
  int smi_index = -1;
  std::string market_name;
  std::string device_id;     ///< "0x74a1"; "" when "N/A"
  int compute_units = 0;
  std::string gfx_target;
};

/// Text ("GPU: 0" blocks) or JSON (a list, or {"gpu_data": [...]}) is recognised from the text itself.
std::vector<amd_smi_list_entry> parse_amd_smi_list(const std::string& text);
std::vector<amd_smi_asic_entry> parse_amd_smi_asic(const std::string& text);

/// Joins the two amd-smi outputs on amd-smi's own GPU index, so the chip id and CU count of a HIP id
/// come from the very record that produced it (§9.4, §14 A.52). Keeps `list -e` print order (§14
/// A.54) and resolves each device's spec key. Throws run_error when a listed GPU has no HIP_ID.
gpu_listing merge_amd_smi(const std::vector<amd_smi_list_entry>& list,
                          const std::vector<amd_smi_asic_entry>& asic);

/// Specs key of a device: its product name first, then its gfx ISA, with chip id / CUs as tie-breaks.
std::string resolve_device_spec_key(const gpu_device& d);

// ---- running the tools ----------------------------------------------------------------------------

/// Where the tools are looked up and how they run. Tests point every path at temp dirs.
struct tool_locations {
  env_map env;                      ///< child environment; its PATH is searched first
  std::string python = "python3";   ///< interpreter as configured (unresolved), for the amd-smi search
  std::string rocm_dir = "/opt/rocm";
  std::chrono::milliseconds nvidia_smi_timeout{10000};
  std::chrono::milliseconds amd_smi_timeout{20000};  ///< amd-smi is a slow-starting Python CLI
  bool amd_smi_json = false;        ///< ask amd-smi for `--json` instead of its text output

  /// Defaults for this process: the given environment, `python`, and $ROCM_PATH (else /opt/rocm).
  static tool_locations from_env(const env_map& env, const std::string& python = "python3");
};

/// amd-smi search order (§10.3, §14 A.53): $PATH; beside the interpreter path as written (a venv's
/// python is usually a symlink whose target has no amd-smi); beside the resolved interpreter;
/// <rocm_dir>/bin. Empty when none is found.
std::string find_amd_smi(const tool_locations& where);

/// nvidia-smi on $PATH; empty when absent.
std::string find_nvidia_smi(const tool_locations& where);

/// Runs nvidia-smi. Tool absent: empty. Hang, crash, non-zero exit or unreadable output: run_error
/// naming the command and how it ended.
gpu_listing list_nvidia_gpus(const tool_locations& where);

/// Runs `amd-smi list -e` and `amd-smi static --asic` (with --json when asked). Same error rules.
gpu_listing list_amd_gpus(const tool_locations& where);

}  // namespace kagent
