// Listing: the parsers over TOOL_FORMATS.md samples, the amd-smi search order (§10.3), and the tools
// run for real through tests/fakes (hangs, crashes, failures, call log).
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"
#include "platform/common/errors.hpp"
#include "platform/gpu/listing.hpp"
#include "platform/gpu/selection.hpp"

using namespace kagent;
using namespace kagent::test;

namespace {

const char* amd_list_sample = R"(GPU: 0
    BDF: 0000:83:00.0
    UUID: 9fff74b9-0000-1000-8044-4a2fb30adeb0
    KFD_ID: 43855
    NODE_ID: 9
    PARTITION_ID: 0
    RENDER: renderD185
    CARD: card57
    HSA_ID: 9
    HIP_ID: 7
    HIP_UUID: GPU-9f444a2fb30adeb0

)";

const char* amd_asic_sample = R"(GPU: 0
    ASIC:
        MARKET_NAME: AMD Instinct MI325X VF
        VENDOR_ID: 0x1002
        VENDOR_NAME: Advanced Micro Devices Inc. [AMD/ATI]
        SUBVENDOR_ID: 0x1002
        DEVICE_ID: 0x74b9
        SUBSYSTEM_ID: 0x74a5
        REV_ID: 0x00
        ASIC_SERIAL: 0x1234ABCD
        OAM_ID: 6
        NUM_COMPUTE_UNITS: 304
        TARGET_GRAPHICS_VERSION: gfx942

)";

/// Tool locations whose every search place is inside `root`, with the fixture and the call log set.
tool_locations where_in(const fs::path& root, const fs::path& bin, const std::string& fixture_file) {
  env_map env{{"PATH", bin.string()}, {"KAGENT_FAKE_GPU_FIXTURE", fixture_file},
              {"KAGENT_FAKE_GPU_LOG", (root / "calls.log").string()}};
  tool_locations w = tool_locations::from_env(env, (bin / "python3").string());
  w.rocm_dir = (root / "no-rocm").string();
  w.nvidia_smi_timeout = std::chrono::milliseconds(5000);
  w.amd_smi_timeout = std::chrono::milliseconds(5000);
  return w;
}

std::string run_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const run_error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

TEST(GpuListingParse, NvidiaSmiQueryWithAndWithoutUnits) {
  auto l = parse_nvidia_smi_query(
      "0, NVIDIA H100 80GB HBM3, GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, 81559 MiB\n"
      "1, NVIDIA GeForce GTX 1660 SUPER, GPU-43b14c17-aaaa-bbbb-cccc-dddddddddddd, 6144\n");
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].id, 0);
  EXPECT_EQ(l[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(l[0].uuid, "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
  EXPECT_DOUBLE_EQ(l[0].memory_mib, 81559);
  EXPECT_EQ(l[0].spec_key, "NVIDIA H100 SXM5 80GB");
  EXPECT_EQ(l[1].id, 1);
  EXPECT_DOUBLE_EQ(l[1].memory_mib, 6144);
  EXPECT_EQ(l[1].spec_key, "");  // not in the database
}

TEST(GpuListingParse, NvidiaSmiEdgeCases) {
  EXPECT_TRUE(parse_nvidia_smi_query("").empty());
  EXPECT_TRUE(parse_nvidia_smi_query("No devices were found\n").empty());
  auto l = parse_nvidia_smi_query("3, Weird, Name, GPU-1, [N/A]\n");
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].name, "Weird, Name");
  EXPECT_DOUBLE_EQ(l[0].memory_mib, 0);
  EXPECT_THROW(parse_nvidia_smi_query("index, name, uuid, memory.total [MiB]\n"), run_error);
  EXPECT_THROW(parse_nvidia_smi_query("garbage\n"), run_error);
}

TEST(GpuListingParse, AmdSmiListText) {
  auto l = parse_amd_smi_list(std::string("WARNING: banner line\n") + amd_list_sample);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].smi_index, 0);
  EXPECT_EQ(l[0].hip_id, 7);
  EXPECT_EQ(l[0].hsa_id, 9);
  EXPECT_EQ(l[0].bdf, "0000:83:00.0");
  EXPECT_EQ(l[0].uuid, "9fff74b9-0000-1000-8044-4a2fb30adeb0");
}

TEST(GpuListingParse, AmdSmiAsicText) {
  auto a = parse_amd_smi_asic(amd_asic_sample);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].smi_index, 0);
  EXPECT_EQ(a[0].market_name, "AMD Instinct MI325X VF");
  EXPECT_EQ(a[0].device_id, "0x74b9");
  EXPECT_EQ(a[0].compute_units, 304);
  EXPECT_EQ(a[0].gfx_target, "gfx942");
}

TEST(GpuListingParse, AmdSmiJsonBothShapes) {
  auto list = parse_amd_smi_list(
      R"([{"gpu": 0, "bdf": "0000:83:00.0", "uuid": "u0", "kfd_id": 43855, "node_id": 9, "partition_id": 0,
           "hsa_id": 9, "hip_id": 7}])");
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].hip_id, 7);
  EXPECT_EQ(list[0].bdf, "0000:83:00.0");
  const char* old_shape =
      R"([{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74A1",
           "num_compute_units": 304, "target_graphics_version": "gfx942"}}])";
  const char* new_shape =
      R"({"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1",
           "num_compute_units": "304", "target_graphics_version": "gfx942"}}]})";
  for (const char* text : {old_shape, new_shape}) {
    auto a = parse_amd_smi_asic(text);
    ASSERT_EQ(a.size(), 1u) << text;
    EXPECT_EQ(a[0].smi_index, 0);
    EXPECT_EQ(a[0].market_name, "AMD Instinct MI300X");
    EXPECT_EQ(a[0].device_id, "0x74a1");
    EXPECT_EQ(a[0].compute_units, 304);
    EXPECT_EQ(a[0].gfx_target, "gfx942");
  }
}

TEST(GpuListingParse, AmdSmiJsonOddValues) {
  auto a = parse_amd_smi_asic(
      R"([{"gpu": 1, "asic": {"market_name": "N/A", "device_id": 29857, "num_compute_units": {"value": 228, "unit": ""},
           "target_graphics_version": "gfx942"}}])");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].market_name, "");
  EXPECT_EQ(a[0].device_id, "0x74a1");
  EXPECT_EQ(a[0].compute_units, 228);
  EXPECT_THROW(parse_amd_smi_asic("[{\"gpu\": 0,"), run_error);
}

TEST(GpuListingParse, MergeResolvesThroughGfxWhenTheMarketNameIsUnknown) {
  auto l = merge_amd_smi(parse_amd_smi_list(amd_list_sample), parse_amd_smi_asic(amd_asic_sample));
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].id, 7);  // the HIP id, not amd-smi's index 0 or the HSA id 9
  EXPECT_EQ(l[0].hsa_id, 9);
  EXPECT_EQ(l[0].name, "AMD Instinct MI325X VF");
  EXPECT_EQ(l[0].chip_id, "0x74b9");
  EXPECT_EQ(l[0].spec_key, "AMD Instinct MI300X");  // gfx942, chip not MI300A, 304 CUs
}

// Appendix A: test_amd_smi_asic_follows_hip_id
TEST(GpuListingParse, AmdSmiAsicFollowsHipId) {
  // amd-smi GPU 0 is HIP id 1 (an MI250 GCD), GPU 1 is HIP id 0 (an MI210).
  std::vector<amd_smi_list_entry> list{{0, 1, 3, "", ""}, {1, 0, 2, "", ""}};
  std::vector<amd_smi_asic_entry> asic{{0, "AMD Instinct MI250X / MI250", "0x740c", 104, "gfx90a"},
                                       {1, "AMD Instinct MI210", "0x740f", 104, "gfx90a"}};
  auto l = merge_amd_smi(list, asic);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].id, 1);
  EXPECT_EQ(l[0].chip_id, "0x740c");
  EXPECT_EQ(l[0].spec_key, "AMD Instinct MI250");
  EXPECT_EQ(l[1].id, 0);
  EXPECT_EQ(l[1].chip_id, "0x740f");
  EXPECT_EQ(l[1].spec_key, "AMD Instinct MI210");
}

// Appendix A: test_chip_lookup_uses_the_listing_that_produced_the_hip_id
TEST(GpuListingParse, ChipLookupUsesTheListingThatProducedTheHipId) {
  // The ASIC records come in another order than the list; the join is by amd-smi's own index.
  std::vector<amd_smi_list_entry> list{{0, 0, 2, "", ""}, {1, 1, 3, "", ""}};
  std::vector<amd_smi_asic_entry> asic{{1, "", "0x74a0", 228, "gfx942"}, {0, "", "0x74a1", 304, "gfx942"}};
  auto l = merge_amd_smi(list, asic);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].spec_key, "AMD Instinct MI300X");
  EXPECT_EQ(l[1].spec_key, "AMD Instinct MI300A");
  EXPECT_EQ(l[1].compute_units, 228);
}

TEST(GpuListingParse, ListingWithoutHipIdIsAnError) {
  auto msg = run_error_of([] { merge_amd_smi({{0, -1, 2, "", ""}}, {}); });
  EXPECT_NE(msg.find("HIP_ID"), std::string::npos) << msg;
}

// §10.3 / Appendix A: test_find_amd_smi_beside_python_before_resolved_path
TEST(GpuAmdSmiLocation, BesidePythonBeforeResolvedPath) {
  temp_dir t;
  auto base = t.path / "base" / "bin";
  auto venv = t.path / "venv" / "bin";
  write_file(base / "python3.12", "#!/bin/sh\n", true);
  write_file(base / "amd-smi", "#!/bin/sh\n", true);
  fs::create_directories(venv);
  fs::create_symlink(base / "python3.12", venv / "python");
  tool_locations w;
  w.env = {{"PATH", (t.path / "empty").string()}};
  w.python = (venv / "python").string();
  w.rocm_dir = (t.path / "rocm").string();
  EXPECT_EQ(find_amd_smi(w), (base / "amd-smi").string());  // only beside the resolved one
  write_file(venv / "amd-smi", "#!/bin/sh\n", true);
  EXPECT_EQ(find_amd_smi(w), (venv / "amd-smi").string());  // beside the unresolved path wins
  write_file(t.path / "onpath" / "amd-smi", "#!/bin/sh\n", true);
  w.env["PATH"] = (t.path / "onpath").string();
  EXPECT_EQ(find_amd_smi(w), (t.path / "onpath" / "amd-smi").string());  // $PATH first
}

TEST(GpuAmdSmiLocation, BarePythonNameIsLookedUpOnPathAndItsTargetSearched) {
  temp_dir t;
  // PATH has python3 (a symlink into base/bin) but no amd-smi; base/bin has amd-smi.
  write_file(t.path / "base" / "bin" / "python3.12", "#!/bin/sh\n", true);
  write_file(t.path / "base" / "bin" / "amd-smi", "#!/bin/sh\n", true);
  fs::create_directories(t.path / "p");
  fs::create_symlink(t.path / "base" / "bin" / "python3.12", t.path / "p" / "python3");
  tool_locations w;
  w.env = {{"PATH", (t.path / "p").string()}};
  w.python = "python3";
  w.rocm_dir = (t.path / "rocm").string();
  EXPECT_EQ(fs::canonical(find_amd_smi(w)), fs::canonical(t.path / "base" / "bin" / "amd-smi"));
}

// Appendix A: test_find_amd_smi_uses_opt_rocm_bin
TEST(GpuAmdSmiLocation, UsesRocmBin) {
  temp_dir t;
  tool_locations w;
  w.env = {{"PATH", (t.path / "empty").string()}};
  w.python = (t.path / "nopython").string();
  w.rocm_dir = (t.path / "opt" / "rocm").string();
  EXPECT_EQ(find_amd_smi(w), "");
  write_file(t.path / "opt" / "rocm" / "bin" / "amd-smi", "#!/bin/sh\n", true);
  EXPECT_EQ(find_amd_smi(w), (t.path / "opt" / "rocm" / "bin" / "amd-smi").string());
  write_file(t.path / "opt" / "rocm" / "bin" / "other", "x", false);
  EXPECT_EQ(tool_locations::from_env({{"ROCM_PATH", "/x/rocm"}}).rocm_dir, "/x/rocm");
  EXPECT_EQ(tool_locations::from_env({}).rocm_dir, "/opt/rocm");
}

TEST(GpuListingTools, MissingToolsListNothing) {
  temp_dir t;
  auto bin = make_bin(t.path, {});
  auto w = where_in(t.path, bin, fixture("mixed_node.json").string());
  EXPECT_TRUE(list_nvidia_gpus(w).empty());
  EXPECT_TRUE(list_amd_gpus(w).empty());
}

TEST(GpuListingTools, NvidiaSmiFake) {
  temp_dir t;
  auto bin = make_bin(t.path, {"nvidia-smi"});
  auto l = list_nvidia_gpus(where_in(t.path, bin, fixture("mixed_node.json").string()));
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[1].id, 1);
  EXPECT_EQ(l[1].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(l[1].spec_key, "NVIDIA H100 SXM5 80GB");
  EXPECT_DOUBLE_EQ(l[1].memory_mib, 81559);
  auto log = read_file(t.path / "calls.log");
  EXPECT_EQ(log, "nvidia-smi --query-gpu=index,name,uuid,memory.total --format=csv,noheader,nounits\n");
}

TEST(GpuListingTools, AmdSmiFakeTextAndJson) {
  for (bool as_json : {false, true}) {
    temp_dir t;
    auto bin = make_bin(t.path, {"amd-smi"});
    auto w = where_in(t.path, bin, fixture("gfx90a_node.json").string());
    w.amd_smi_json = as_json;
    auto l = list_amd_gpus(w);
    ASSERT_EQ(l.size(), 3u);
    EXPECT_EQ(l[0].id, 1);
    EXPECT_EQ(l[0].spec_key, "AMD Instinct MI250");  // combined name, 0x740c, 104 CUs (one GCD)
    EXPECT_EQ(l[1].id, 0);
    EXPECT_EQ(l[1].spec_key, "AMD Instinct MI210");
    EXPECT_EQ(l[2].id, 2);
    EXPECT_EQ(l[2].name, "");  // MARKET_NAME N/A: resolved through gfx90a + chip id
    EXPECT_EQ(l[2].spec_key, "AMD Instinct MI250X");
    auto log = read_file(t.path / "calls.log");
    EXPECT_EQ(log, as_json ? "amd-smi list -e --json\namd-smi static --asic --json\n"
                           : "amd-smi list -e\namd-smi static --asic\n");
  }
}

TEST(GpuListingTools, AmdSmiNewJsonShape) {
  temp_dir t;
  auto fx = t.path / "fx.json";
  write_file(fx, R"({"amd": {"json_shape": "gpu_data", "gpus": [
      {"gpu": 0, "hip_id": 0, "market_name": "AMD Instinct MI300A", "device_id": "0x74a0", "num_compute_units": 228,
       "gfx": "gfx942"}]}})");
  auto bin = make_bin(t.path, {"amd-smi"});
  auto w = where_in(t.path, bin, fx.string());
  w.amd_smi_json = true;
  auto l = list_amd_gpus(w);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].spec_key, "AMD Instinct MI300A");
}

TEST(GpuListingTools, AmdSmiIgnoresTheMasksLikeTheRealTool) {
  temp_dir t;
  auto bin = make_bin(t.path, {"amd-smi"});
  auto w = where_in(t.path, bin, fixture("mi100_m40.json").string());
  w.env["HIP_VISIBLE_DEVICES"] = "9";
  w.env["ROCR_VISIBLE_DEVICES"] = "9";
  auto l = list_amd_gpus(w);
  ASSERT_EQ(l.size(), 1u);  // still listed: the masks are ours to apply
  EXPECT_EQ(l[0].id, 0);
  EXPECT_EQ(l[0].hsa_id, 2);
  EXPECT_EQ(l[0].chip_id, "0x738c");
  EXPECT_EQ(l[0].compute_units, 120);
  EXPECT_EQ(l[0].spec_key, "AMD Instinct MI100");
}

TEST(GpuListingTools, NvidiaSmiWithNoDevicesListsNothing) {
  temp_dir t;
  auto fx = t.path / "fx.json";
  write_file(fx, R"({"nvidia": {"mode": "no_devices"}})");
  auto bin = make_bin(t.path, {"nvidia-smi"});
  EXPECT_TRUE(list_nvidia_gpus(where_in(t.path, bin, fx.string())).empty());
}

TEST(GpuListingTools, FailingToolsAreErrorsNamingToolAndHow) {
  struct mode_case {
    const char* tool;
    const char* mode_key;
    const char* mode;
    const char* cmd;
    const char* how;
  };
  const mode_case cases[] = {
      {"nvidia-smi", "mode", "fail", "nvidia-smi --query-gpu", "exit 9"},
      {"nvidia-smi", "mode", "crash", "nvidia-smi --query-gpu", "signal 11"},
      {"amd-smi", "mode", "fail", "amd-smi list -e", "exit 1"},
      {"amd-smi", "mode", "crash", "amd-smi list -e", "signal 11"},
      {"amd-smi", "asic_mode", "fail", "amd-smi static --asic", "exit 1"},
  };
  for (const auto& c : cases) {
    temp_dir t;
    auto fx = t.path / "fx.json";
    std::string vendor = std::string(c.tool) == "nvidia-smi" ? "nvidia" : "amd";
    write_file(fx, "{\"" + vendor + "\": {\"" + c.mode_key + "\": \"" + c.mode + "\", \"gpus\": [" +
                       (vendor == "nvidia" ? R"({"index": 0, "name": "NVIDIA H200"})"
                                           : R"({"gpu": 0, "hip_id": 0, "gfx": "gfx942"})") +
                       "]}}");
    auto bin = make_bin(t.path, {c.tool});
    auto w = where_in(t.path, bin, fx.string());
    auto msg = run_error_of([&] { vendor == "nvidia" ? (void)list_nvidia_gpus(w) : (void)list_amd_gpus(w); });
    EXPECT_NE(msg.find(c.cmd), std::string::npos) << c.tool << " " << c.mode << ": " << msg;
    EXPECT_NE(msg.find(c.how), std::string::npos) << c.tool << " " << c.mode << ": " << msg;
  }
}

TEST(GpuListingTools, HangingToolIsKilledAndReported) {
  temp_dir t;
  auto fx = t.path / "fx.json";
  write_file(fx, R"({"amd": {"mode": "hang", "gpus": [{"gpu": 0, "hip_id": 0}]}})");
  auto bin = make_bin(t.path, {"amd-smi"});
  auto w = where_in(t.path, bin, fx.string());
  w.amd_smi_timeout = std::chrono::milliseconds(700);
  auto msg = run_error_of([&] { list_amd_gpus(w); });
  EXPECT_NE(msg.find("amd-smi list -e"), std::string::npos) << msg;
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
}

// Appendix A: test_path_binaries_use_nvidia_unless_hip_visible_devices — the real listing path, with
// both fakes on PATH: no mask stays on NVIDIA without running amd-smi; HIP_VISIBLE_DEVICES picks AMD.
TEST(GpuDetect, PathBinariesUseNvidiaUnlessHipVisibleDevices) {
  temp_dir t;
  auto bin = make_bin(t.path, {"nvidia-smi", "amd-smi"});
  auto w = where_in(t.path, bin, fixture("mixed_node.json").string());
  auto sel = detect_gpus({}, {}, w);
  EXPECT_EQ(sel.vendor, "nvidia");
  EXPECT_EQ(sel.ids, (std::vector<int>{0, 1}));
  EXPECT_EQ(read_file(t.path / "calls.log").find("amd-smi"), std::string::npos);

  sel = detect_gpus({}, {{"HIP_VISIBLE_DEVICES", "0"}}, w);
  EXPECT_EQ(sel.vendor, "rocm");
  EXPECT_EQ(sel.ids, (std::vector<int>{1}));
  EXPECT_EQ(sel.devices.at(0).spec_key, "AMD Instinct MI300X");
  EXPECT_NE(read_file(t.path / "calls.log").find("amd-smi list -e"), std::string::npos);
}

TEST(GpuDetect, RocmRequestOnMixedNodeWithFakes) {
  temp_dir t;
  auto bin = make_bin(t.path, {"nvidia-smi", "amd-smi"});
  auto w = where_in(t.path, bin, fixture("mixed_node.json").string());
  selection_request r;
  r.platform.given = true;
  for (const auto& c : platform_spec::component_names()) r.platform.component(c) = "rocm";
  auto sel = detect_gpus(r, {}, w);
  EXPECT_EQ(sel.ids, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(read_file(t.path / "calls.log").find("nvidia-smi"), std::string::npos);
  try {
    detect_gpus(r, {{"HIP_VISIBLE_DEVICES", "9"}}, w);
    ADD_FAILURE() << "expected an error";
  } catch (const user_error& e) {
    EXPECT_STREQ(e.what(), "ROCm platform was requested but no devices are visible");
  }
}
