#include "platform/gpu/specs.hpp"
#include "platform/common/text.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace kagent {
namespace {

gpu_specs nvidia_row(std::string name, std::string arch, double fp32, double fp16, double bf16, double bw,
                     int sms, int threads, double l1, double l2, double mem, std::string type, std::string form,
                     double tdp) {
  gpu_specs s;
  s.name = std::move(name);
  s.vendor = "nvidia";
  s.architecture = std::move(arch);
  s.peak_fp32_tflops = fp32;
  s.peak_fp16_tflops = fp16;
  s.peak_bf16_tflops = bf16;
  s.peak_memory_bw_gbps = bw;
  s.sm_count = sms;
  s.max_threads_per_sm = threads;
  s.l1_cache_kb = l1;
  s.l2_cache_mb = l2;
  s.memory_gb = mem;
  s.memory_type = std::move(type);
  s.form_factor = std::move(form);
  s.tdp_w = tdp;
  s.wavefront_size = 32;
  return s;
}

// Every Instinct row has 64-wide wavefronts and 2048 threads per CU (SPEC §9.3).
gpu_specs amd_row(std::string name, std::string arch, std::string gfx, double fp32, double fp16, double bf16,
                  double bw, int cus, double l1, double l2, double mem, std::string type, std::string form,
                  double tdp) {
  gpu_specs s = nvidia_row(std::move(name), std::move(arch), fp32, fp16, bf16, bw, cus, 2048, l1, l2, mem,
                           std::move(type), std::move(form), tdp);
  s.vendor = "amd";
  s.gfx_target = std::move(gfx);
  s.wavefront_size = 64;
  return s;
}

// The database, in the order known_gpu_names() reports it.
//
// NVIDIA rows follow SPEC §9.2 [M] except the Hopper FP16/BF16 columns. §9.1 (and gpu_specs) define
// those columns as *dense* peaks, but [M]'s 1979 / 1513 / 1671 are NVIDIA's "with sparsity" datasheet
// figures (the H100 datasheet marks them with an asterisk: "With sparsity"; the Hopper whitepaper,
// table "NVIDIA H100 compared to A100", lists dense/sparse pairs 989.4/1978.9 for SXM5 and
// 756.5/1513 for PCIe). A roofline that divides by a sparse peak halves every compute SOL, so the
// dense values (datasheet / 2) are stored. The A100 312 is already dense (624 with sparsity).
// RTX 4090 / 5080 keep [M]'s values, which are the non-tensor (shader) FP16 rate equal to FP32.
//
// NVIDIA H200 (SXM 141GB) is not in [M]; values from the NVIDIA H200 Tensor Core GPU datasheet
// (nvidia.com/en-us/data-center/h200, "H200 SXM" column): FP32 67 TFLOPS, FP16/BF16 Tensor Core
// 1979 TFLOPS with sparsity -> 989.5 dense, 141 GB HBM3e at 4.8 TB/s, TDP up to 700 W. It is the
// GH100 die of the H100 SXM5 (132 SMs, 50 MB L2, 256 KB L1/shared per SM, 2048 threads per SM per
// the Hopper whitepaper), with a larger and faster memory stack.
//
// AMD rows follow SPEC §9.3 final [S] (§14 A.47-A.49): L2 is the package total (4 MB per XCD on
// CDNA3/4, 8 MB per GCD on CDNA2), never the 256 MB Infinity Cache; MI100 and MI300X use the matrix
// headline FP32, CDNA2 rows the vector FP32 (matrix headlines would be 95.7 / 90.5 / 45.3); MI100's
// vector FP32 is 23.1. MI250's board power is given by AMD as 500 W typical / 560 W peak; the peak is
// stored, like MI250X.
const std::vector<gpu_specs>& database() {
  static const std::vector<gpu_specs> rows = {
      nvidia_row("NVIDIA A100 SXM4 40GB", "Ampere", 19.5, 312, 312, 1555, 108, 2048, 192, 40, 40, "HBM2e",
                 "SXM4", 400),
      nvidia_row("NVIDIA A100 SXM4 80GB", "Ampere", 19.5, 312, 312, 2039, 108, 2048, 192, 40, 80, "HBM2e",
                 "SXM4", 400),
      nvidia_row("NVIDIA A100 PCIe 40GB", "Ampere", 19.5, 312, 312, 1555, 108, 2048, 192, 40, 40, "HBM2e",
                 "PCIe", 250),
      nvidia_row("NVIDIA A100 PCIe 80GB", "Ampere", 19.5, 312, 312, 1935, 108, 2048, 192, 40, 80, "HBM2e",
                 "PCIe", 300),
      nvidia_row("NVIDIA H100 SXM5 80GB", "Hopper", 67.0, 989.5, 989.5, 3350, 132, 2048, 256, 50, 80, "HBM3",
                 "SXM5", 700),
      nvidia_row("NVIDIA H100 PCIe 80GB", "Hopper", 51.0, 756.5, 756.5, 2000, 114, 2048, 256, 50, 80, "HBM2e",
                 "PCIe", 350),
      nvidia_row("NVIDIA H100 NVL 94GB", "Hopper", 60.0, 835.5, 835.5, 3900, 132, 2048, 256, 50, 94, "HBM3",
                 "PCIe", 400),
      nvidia_row("NVIDIA H200", "Hopper", 67.0, 989.5, 989.5, 4800, 132, 2048, 256, 50, 141, "HBM3e", "SXM5",
                 700),
      nvidia_row("NVIDIA RTX 4090", "Ada Lovelace", 82.58, 82.58, 82.58, 1008, 128, 1536, 128, 72, 24,
                 "GDDR6X", "PCIe", 450),
      nvidia_row("NVIDIA RTX 5080", "Blackwell", 56.28, 56.28, 56.28, 960, 84, 1536, 128, 64, 16, "GDDR7",
                 "PCIe", 360),
      amd_row("AMD Instinct MI300X", "CDNA3", "gfx942", 163.4, 1307.4, 1307.4, 5300, 304, 32, 32, 192, "HBM3",
              "OAM", 750),
      amd_row("AMD Instinct MI300A", "CDNA3", "gfx942", 122.6, 980.6, 980.6, 5300, 228, 32, 24, 128,
              "HBM3 (unified)", "OAM/APU", 550),
      amd_row("AMD Instinct MI350X", "CDNA4", "gfx950", 144.2, 2300, 2300, 8000, 256, 32, 32, 288, "HBM3E",
              "OAM", 1000),
      amd_row("AMD Instinct MI250X", "CDNA2", "gfx90a", 47.9, 383.0, 383.0, 3277, 220, 16, 16, 128, "HBM2e",
              "OAM", 560),
      amd_row("AMD Instinct MI250", "CDNA2", "gfx90a", 45.3, 362.1, 362.1, 3277, 208, 16, 16, 128, "HBM2e",
              "OAM", 560),
      amd_row("AMD Instinct MI210", "CDNA2", "gfx90a", 22.6, 181.0, 181.0, 1638, 104, 16, 8, 64, "HBM2e",
              "PCIe", 300),
      amd_row("AMD Instinct MI100", "CDNA", "gfx908", 46.1, 184.6, 92.3, 1229, 120, 16, 8, 32, "HBM2", "PCIe",
              300),
  };
  return rows;
}

constexpr const char* mi300x = "AMD Instinct MI300X";
constexpr const char* mi300a = "AMD Instinct MI300A";
constexpr const char* mi350x = "AMD Instinct MI350X";
constexpr const char* mi250x = "AMD Instinct MI250X";
constexpr const char* mi250 = "AMD Instinct MI250";
constexpr const char* mi210 = "AMD Instinct MI210";
constexpr const char* mi100 = "AMD Instinct MI100";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_ci(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == lower(suffix);
}

/// Case-insensitive exact key match (amd-smi and torch differ in case on some builds).
std::optional<std::string> exact_key(const std::string& name) {
  const auto want = lower(name);
  for (const auto& row : database())
    if (lower(row.name) == want) return row.name;
  return std::nullopt;
}

/// "0x74A1", "74a1", "0x000074a1" -> 0x74a1; -1 when unreadable ("N/A", "").
long parse_chip_id(const std::string& text) {
  auto t = lower(trim(text));
  if (t.rfind("0x", 0) == 0) t = t.substr(2);
  if (t.empty() || t.size() > 8) return -1;
  for (char c : t)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return -1;
  return std::stol(t, nullptr, 16);
}

/// gfx90a family (MI210, MI250, MI250X) by PCI chip id, CU count breaking ties. amd-smi may report
/// either a whole package or one GCD (an MI250X GCD has 110 CUs, an MI250 GCD 104), so both counts
/// are accepted. With no usable id or count the answer stays MI250X (SPEC §9.4).
std::string resolve_gfx90a(long chip, int cus) {
  if (chip == 0x740f) return mi210;
  if (chip == 0x7408) return mi250x;
  if (chip == 0x740c) {  // shared by MI250 and MI250X
    if (cus == 208 || cus == 104) return mi250;
    return mi250x;
  }
  if (cus == 104) return mi210;
  if (cus == 208) return mi250;
  return mi250x;
}

/// gfx942 family: MI300A (0x74a0) or MI300X (0x74a1, and the default), CU count as tie-break.
std::string resolve_gfx942(long chip, int cus) {
  if (chip == 0x74a0) return mi300a;
  if (chip == 0x74a1) return mi300x;
  if (cus == 228) return mi300a;
  return mi300x;
}

std::optional<std::string> resolve_isa(const std::string& name, long chip, int cus) {
  auto isa = lower(trim(name));
  // Target ids may carry feature flags: "gfx90a:sramecc+:xnack-".
  if (auto colon = isa.find(':'); colon != std::string::npos) isa = isa.substr(0, colon);
  if (isa == "gfx942") return resolve_gfx942(chip, cus);
  if (isa == "gfx950") return std::string(mi350x);
  if (isa == "gfx90a") return resolve_gfx90a(chip, cus);
  if (isa == "gfx908") return std::string(mi100);
  return std::nullopt;
}

std::vector<std::string> tokens_of(const std::string& name) {
  std::string t = upper(name);
  for (auto& c : t)
    if (c == '-' || c == '_' || c == '/' || c == ',') c = ' ';
  std::istringstream in(t);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool has(const std::vector<std::string>& toks, const std::string& t) {
  return std::find(toks.begin(), toks.end(), t) != toks.end();
}

/// NVIDIA product names as nvidia-smi / torch print them ("NVIDIA H100 80GB HBM3",
/// "NVIDIA A100-SXM4-40GB", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 4090", "NVIDIA H200").
/// Variants that are different silicon or clocks (H200 NVL, RTX 4090 D, laptop parts) are not
/// mapped onto a row with other peaks: those resolve to nothing and the user names a row.
std::optional<std::string> resolve_nvidia(const std::string& name) {
  auto toks = tokens_of(name);
  std::erase_if(toks, [](const std::string& t) { return t == "NVIDIA" || t == "TESLA" || t == "GEFORCE"; });
  if (toks.empty()) return std::nullopt;
  if (has(toks, "H200")) {
    if (has(toks, "NVL")) return std::nullopt;  // H200 NVL: 600 W PCIe part with lower clocks
    return std::string("NVIDIA H200");
  }
  if (has(toks, "H100")) {
    if (has(toks, "NVL")) return std::string("NVIDIA H100 NVL 94GB");
    if (has(toks, "PCIE")) return std::string("NVIDIA H100 PCIe 80GB");
    // "NVIDIA H100 80GB HBM3" is how nvidia-smi names the SXM5 part.
    return std::string("NVIDIA H100 SXM5 80GB");
  }
  if (has(toks, "A100")) {
    bool pcie = has(toks, "PCIE");
    bool big = has(toks, "80GB");
    if (pcie) return std::string(big ? "NVIDIA A100 PCIe 80GB" : "NVIDIA A100 PCIe 40GB");
    return std::string(big ? "NVIDIA A100 SXM4 80GB" : "NVIDIA A100 SXM4 40GB");
  }
  if (toks.size() == 2 && toks[0] == "RTX" && toks[1] == "4090") return std::string("NVIDIA RTX 4090");
  if (toks.size() == 2 && toks[0] == "RTX" && toks[1] == "5080") return std::string("NVIDIA RTX 5080");
  return std::nullopt;
}

/// The ROCm provider's normalisation (SPEC §9.1): strip a form-factor suffix, add "AMD ".
/// " VF" (SR-IOV virtual function, printed by amd-smi on cloud hosts) is the same silicon and is
/// stripped too; a bare "MI300X" gets the full "AMD Instinct " prefix.
std::string normalise_amd(std::string n) {
  for (bool again = true; again;) {
    again = false;
    for (const char* suffix : {" OAM", " PCIe", " SXM", " NVL", " VF"}) {
      if (ends_with_ci(n, suffix)) {
        n = trim(n.substr(0, n.size() - std::string(suffix).size()));
        again = true;
      }
    }
  }
  if (lower(n).rfind("mi", 0) == 0) n = "Instinct " + n;
  if (lower(n).rfind("amd ", 0) != 0) n = "AMD " + n;
  return n;
}

}  // namespace

std::optional<gpu_specs> find_gpu_specs(const std::string& name) {
  for (const auto& row : database())
    if (row.name == name) return row;
  return std::nullopt;
}

std::vector<std::string> known_gpu_names() {
  std::vector<std::string> names;
  for (const auto& row : database()) names.push_back(row.name);
  return names;
}

std::optional<std::string> resolve_gpu_name(const std::string& name_or_isa, const std::string& chip_id,
                                            int compute_units) {
  const std::string name = trim(name_or_isa);
  if (name.empty()) return std::nullopt;
  const long chip = parse_chip_id(chip_id);

  // The combined torch name for a gfx90a OAM part names two products; the chip id decides (§9.4).
  {
    auto toks = tokens_of(name);
    if (has(toks, "MI250X") && has(toks, "MI250")) return resolve_gfx90a(chip < 0 ? 0x740c : chip, compute_units);
  }
  if (auto key = exact_key(name)) return key;
  if (lower(name).rfind("gfx", 0) == 0) return resolve_isa(name, chip, compute_units);

  const auto low = lower(name);
  if (low.find("nvidia") != std::string::npos || low.find("tesla") != std::string::npos ||
      low.find("geforce") != std::string::npos || low.find("rtx") != std::string::npos ||
      low.rfind("h100", 0) == 0 || low.rfind("h200", 0) == 0 || low.rfind("a100", 0) == 0)
    return resolve_nvidia(name);

  if (auto key = exact_key(normalise_amd(name))) return key;
  return std::nullopt;
}

}  // namespace kagent
