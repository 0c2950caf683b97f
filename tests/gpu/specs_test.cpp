// The specs database (SPEC §9, §14 A.44-A.51): rows, conventions and name / ISA / chip-id resolution.
#include <gtest/gtest.h>

#include <algorithm>

#include "platform/gpu/specs.hpp"

using namespace kagent;

namespace {
gpu_specs row(const std::string& key) {
  auto s = find_gpu_specs(key);
  EXPECT_TRUE(s.has_value()) << key;
  return s.value_or(gpu_specs{});
}
std::string resolved(const std::string& name, const std::string& chip = "", int cus = 0) {
  return resolve_gpu_name(name, chip, cus).value_or("<none>");
}
}  // namespace

TEST(GpuSpecs, EveryNvidiaRowOfTheSpecIsPresent) {
  for (const char* key : {"NVIDIA A100 SXM4 40GB", "NVIDIA A100 SXM4 80GB", "NVIDIA A100 PCIe 40GB",
                          "NVIDIA A100 PCIe 80GB", "NVIDIA H100 SXM5 80GB", "NVIDIA H100 PCIe 80GB",
                          "NVIDIA H100 NVL 94GB", "NVIDIA RTX 4090", "NVIDIA RTX 5080", "NVIDIA H200"}) {
    auto s = row(key);
    EXPECT_EQ(s.vendor, "nvidia") << key;
    EXPECT_EQ(s.wavefront_size, 32) << key;
    EXPECT_TRUE(s.gfx_target.empty()) << key;
    EXPECT_EQ(s.compute_unit_label(), "SM");
  }
}

TEST(GpuSpecs, NvidiaRowValues) {
  auto a = row("NVIDIA A100 PCIe 80GB");
  EXPECT_EQ(a.architecture, "Ampere");
  EXPECT_DOUBLE_EQ(a.peak_memory_bw_gbps, 1935);
  EXPECT_DOUBLE_EQ(a.tdp_w, 300);
  EXPECT_DOUBLE_EQ(a.peak_fp16_tflops, 312);
  auto nvl = row("NVIDIA H100 NVL 94GB");
  EXPECT_DOUBLE_EQ(nvl.peak_memory_bw_gbps, 3900);
  EXPECT_DOUBLE_EQ(nvl.memory_gb, 94);
  auto rtx = row("NVIDIA RTX 4090");
  EXPECT_EQ(rtx.max_threads_per_sm, 1536);
  EXPECT_DOUBLE_EQ(rtx.l2_cache_mb, 72);
}

TEST(GpuSpecs, HopperTensorPeaksAreDenseNotSparse) {
  // §9.1: FP16/BF16 columns are dense. The datasheets' 1979/1513/1671 are with sparsity.
  EXPECT_DOUBLE_EQ(row("NVIDIA H100 SXM5 80GB").peak_fp16_tflops, 989.5);
  EXPECT_DOUBLE_EQ(row("NVIDIA H100 SXM5 80GB").peak_bf16_tflops, 989.5);
  EXPECT_DOUBLE_EQ(row("NVIDIA H100 PCIe 80GB").peak_fp16_tflops, 756.5);
  EXPECT_DOUBLE_EQ(row("NVIDIA H100 NVL 94GB").peak_bf16_tflops, 835.5);
}

TEST(GpuSpecs, H200Row) {
  auto h = row("NVIDIA H200");
  EXPECT_EQ(h.architecture, "Hopper");
  EXPECT_EQ(h.sm_count, 132);
  EXPECT_DOUBLE_EQ(h.peak_memory_bw_gbps, 4800);
  EXPECT_DOUBLE_EQ(h.memory_gb, 141);
  EXPECT_EQ(h.memory_type, "HBM3e");
  EXPECT_DOUBLE_EQ(h.l2_cache_mb, 50);
  EXPECT_DOUBLE_EQ(h.tdp_w, 700);
  EXPECT_DOUBLE_EQ(h.peak_fp32_tflops, 67);
  EXPECT_DOUBLE_EQ(h.peak_fp16_tflops, 989.5);
  EXPECT_DOUBLE_EQ(h.peak_bf16_tflops, 989.5);
}

TEST(GpuSpecs, EveryInstinctRowHasWave64And2048ThreadsPerCu) {
  for (const char* key : {"AMD Instinct MI300X", "AMD Instinct MI300A", "AMD Instinct MI350X", "AMD Instinct MI250X",
                          "AMD Instinct MI250", "AMD Instinct MI210", "AMD Instinct MI100"}) {
    auto s = row(key);
    EXPECT_EQ(s.vendor, "amd") << key;
    EXPECT_EQ(s.wavefront_size, 64) << key;
    EXPECT_EQ(s.max_threads_per_sm, 2048) << key;
    EXPECT_EQ(s.compute_unit_label(), "CU") << key;
    EXPECT_FALSE(s.gfx_target.empty()) << key;
  }
}

// §14 A.47
TEST(GpuSpecs, Mi350xFollowsTheCdna4Whitepaper) {
  auto s = row("AMD Instinct MI350X");
  EXPECT_EQ(s.sm_count, 256);
  EXPECT_DOUBLE_EQ(s.peak_fp32_tflops, 144.2);
  EXPECT_DOUBLE_EQ(s.peak_fp16_tflops, 2300);
  EXPECT_DOUBLE_EQ(s.peak_bf16_tflops, 2300);
  EXPECT_EQ(s.gfx_target, "gfx950");
  EXPECT_EQ(s.architecture, "CDNA4");
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI300A").peak_memory_bw_gbps, 5300);
}

// §14 A.48
TEST(GpuSpecs, L2IsThePackageTotalNotInfinityCache) {
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI300X").l2_cache_mb, 32);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI350X").l2_cache_mb, 32);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI300A").l2_cache_mb, 24);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI250X").l2_cache_mb, 16);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI250").l2_cache_mb, 16);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI210").l2_cache_mb, 8);
  for (const auto& n : known_gpu_names()) EXPECT_LT(row(n).l2_cache_mb, 256) << n;
}

// §14 A.49
TEST(GpuSpecs, OneFp32ConventionPerGeneration) {
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI100").peak_fp32_tflops, 46.1);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI300X").peak_fp32_tflops, 163.4);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI250X").peak_fp32_tflops, 47.9);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI250").peak_fp32_tflops, 45.3);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI210").peak_fp32_tflops, 22.6);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI100").peak_fp16_tflops, 184.6);
  EXPECT_DOUBLE_EQ(row("AMD Instinct MI100").peak_bf16_tflops, 92.3);
}

TEST(GpuSpecs, AmdRowValues) {
  auto x = row("AMD Instinct MI300X");
  EXPECT_EQ(x.sm_count, 304);
  EXPECT_DOUBLE_EQ(x.peak_memory_bw_gbps, 5300);
  EXPECT_DOUBLE_EQ(x.memory_gb, 192);
  EXPECT_DOUBLE_EQ(x.tdp_w, 750);
  EXPECT_EQ(row("AMD Instinct MI300A").sm_count, 228);
  EXPECT_EQ(row("AMD Instinct MI250X").sm_count, 220);
  EXPECT_EQ(row("AMD Instinct MI250").sm_count, 208);
  EXPECT_EQ(row("AMD Instinct MI210").sm_count, 104);
  EXPECT_EQ(row("AMD Instinct MI100").sm_count, 120);
  EXPECT_EQ(row("AMD Instinct MI100").gfx_target, "gfx908");
  EXPECT_EQ(row("AMD Instinct MI210").gfx_target, "gfx90a");
}

TEST(GpuSpecs, LookupIsExactAndUnknownIsNullopt) {
  EXPECT_FALSE(find_gpu_specs("MI300X").has_value());
  EXPECT_FALSE(find_gpu_specs("amd instinct mi300x").has_value());
  EXPECT_FALSE(find_gpu_specs("").has_value());
}

TEST(GpuSpecs, KnownNamesAreUniqueAndInDatabaseOrder) {
  auto names = known_gpu_names();
  ASSERT_EQ(names.size(), 17u);
  EXPECT_EQ(names.front(), "NVIDIA A100 SXM4 40GB");
  EXPECT_EQ(names.back(), "AMD Instinct MI100");
  auto sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
}

// Appendix A: test_gfx_isa_names_map_onto_spec_database_keys
TEST(GpuSpecs, GfxIsaNamesMapOntoSpecDatabaseKeys) {
  EXPECT_EQ(resolved("gfx942"), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("gfx950"), "AMD Instinct MI350X");
  EXPECT_EQ(resolved("gfx90a"), "AMD Instinct MI250X");  // chip id unreadable: stays MI250X
  EXPECT_EQ(resolved("gfx908"), "AMD Instinct MI100");
  EXPECT_EQ(resolved("gfx90a:sramecc+:xnack-", "0x740f"), "AMD Instinct MI210");
  EXPECT_EQ(resolved("gfx1100"), "<none>");
  for (const char* isa : {"gfx942", "gfx950", "gfx90a", "gfx908"})
    EXPECT_TRUE(find_gpu_specs(resolved(isa)).has_value()) << isa;
}

// Appendix A: test_gfx90a_chip_id_separates_mi210_and_mi250
TEST(GpuSpecs, Gfx90aChipIdSeparatesMi210AndMi250) {
  EXPECT_EQ(resolved("gfx90a", "0x740f"), "AMD Instinct MI210");
  EXPECT_EQ(resolved("gfx90a", "0x740c", 208), "AMD Instinct MI250");
  EXPECT_EQ(resolved("gfx90a", "0x740c", 104), "AMD Instinct MI250");  // one GCD of an MI250
  EXPECT_EQ(resolved("gfx90a", "0x740c", 220), "AMD Instinct MI250X");
  EXPECT_EQ(resolved("gfx90a", "0x740c", 110), "AMD Instinct MI250X");  // one GCD of an MI250X
  EXPECT_EQ(resolved("gfx90a", "0x7408"), "AMD Instinct MI250X");
  EXPECT_EQ(resolved("gfx90a", "0x740F"), "AMD Instinct MI210");
  EXPECT_EQ(resolved("gfx90a", "N/A", 104), "AMD Instinct MI210");  // CU tie-break without an id
  EXPECT_EQ(resolved("gfx90a", "N/A", 208), "AMD Instinct MI250");
  EXPECT_EQ(resolved("gfx90a", "N/A"), "AMD Instinct MI250X");
}

// Appendix A: test_combined_mi250_name_uses_chip_id
TEST(GpuSpecs, CombinedMi250NameUsesChipId) {
  EXPECT_EQ(resolved("AMD Instinct MI250X / MI250", "0x7408"), "AMD Instinct MI250X");
  EXPECT_EQ(resolved("AMD Instinct MI250X / MI250", "0x740c", 208), "AMD Instinct MI250");
  EXPECT_EQ(resolved("AMD Instinct MI250X / MI250", "0x740c", 220), "AMD Instinct MI250X");
  EXPECT_EQ(resolved("AMD Instinct MI250X / MI250", "", 104), "AMD Instinct MI250");
  EXPECT_EQ(resolved("AMD Instinct MI250X / MI250"), "AMD Instinct MI250X");
}

// Appendix A: test_gfx942_chip_id_separates_mi300a_and_mi300x
TEST(GpuSpecs, Gfx942ChipIdSeparatesMi300aAndMi300x) {
  EXPECT_EQ(resolved("gfx942", "0x74a0"), "AMD Instinct MI300A");
  EXPECT_EQ(resolved("gfx942", "0x74a1"), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("gfx942", "", 228), "AMD Instinct MI300A");
  EXPECT_EQ(resolved("gfx942", "", 304), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("gfx942", "0x74a1", 228), "AMD Instinct MI300X");  // the id wins over the count
}

// §9.4 / §14 A.50: a product name selects the row, whatever the chip id says.
TEST(GpuSpecs, ProductNameSelectsTheRow) {
  EXPECT_EQ(resolved("AMD Instinct MI100", "0x738c", 120), "AMD Instinct MI100");
  EXPECT_EQ(resolved("AMD Instinct MI210"), "AMD Instinct MI210");
  EXPECT_EQ(resolved("AMD Instinct MI250", "0x7408"), "AMD Instinct MI250");
}

// §9.1 normalisation
TEST(GpuSpecs, AmdNamesAreNormalised) {
  EXPECT_EQ(resolved("AMD Instinct MI300X OAM"), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("AMD Instinct MI210 PCIe"), "AMD Instinct MI210");
  EXPECT_EQ(resolved("Instinct MI300A"), "AMD Instinct MI300A");
  EXPECT_EQ(resolved("Instinct MI350X SXM"), "AMD Instinct MI350X");
  EXPECT_EQ(resolved("AMD Instinct MI300X VF"), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("MI100"), "AMD Instinct MI100");
  EXPECT_EQ(resolved("  AMD Instinct MI300X  "), "AMD Instinct MI300X");
  EXPECT_EQ(resolved("AMD Instinct MI325X"), "<none>");
  EXPECT_EQ(resolved("AMD Instinct"), "<none>");
  EXPECT_EQ(resolved("N/A"), "<none>");
  EXPECT_EQ(resolved(""), "<none>");
}

TEST(GpuSpecs, NvidiaSmiNamesResolve) {
  EXPECT_EQ(resolved("NVIDIA H200"), "NVIDIA H200");
  EXPECT_EQ(resolved("NVIDIA H100 80GB HBM3"), "NVIDIA H100 SXM5 80GB");
  EXPECT_EQ(resolved("NVIDIA H100 PCIe"), "NVIDIA H100 PCIe 80GB");
  EXPECT_EQ(resolved("NVIDIA H100 NVL"), "NVIDIA H100 NVL 94GB");
  EXPECT_EQ(resolved("NVIDIA A100-SXM4-40GB"), "NVIDIA A100 SXM4 40GB");
  EXPECT_EQ(resolved("NVIDIA A100-SXM4-80GB"), "NVIDIA A100 SXM4 80GB");
  EXPECT_EQ(resolved("NVIDIA A100-PCIE-40GB"), "NVIDIA A100 PCIe 40GB");
  EXPECT_EQ(resolved("NVIDIA A100 80GB PCIe"), "NVIDIA A100 PCIe 80GB");
  EXPECT_EQ(resolved("NVIDIA GeForce RTX 4090"), "NVIDIA RTX 4090");
  EXPECT_EQ(resolved("NVIDIA GeForce RTX 5080"), "NVIDIA RTX 5080");
  EXPECT_EQ(resolved("NVIDIA H100 NVL 94GB"), "NVIDIA H100 NVL 94GB");
  // Different silicon or clocks: not silently mapped onto another row's peaks.
  EXPECT_EQ(resolved("NVIDIA H200 NVL"), "<none>");
  EXPECT_EQ(resolved("NVIDIA GeForce RTX 4090 D"), "<none>");
  EXPECT_EQ(resolved("Tesla M40"), "<none>");
}
