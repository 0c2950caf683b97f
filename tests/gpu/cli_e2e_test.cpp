// End-to-end: the `kagent-actors gpus` binary with the fake nvidia-smi / amd-smi first (and alone) on
// PATH, for every example command line of SPEC §10.5 and the mixed-node fixture.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpu_test_util.hpp"
#include "platform/process/runner.hpp"

using namespace kagent;
using namespace kagent::test;
using json = nlohmann::json;

namespace {

struct cli_result {
  int code = -1;
  std::string out, err;
  json doc;
};

class GpusCli : public ::testing::Test {
protected:
  temp_dir tmp;
  fs::path bin;

  void SetUp() override { bin = make_bin(tmp.path, {"nvidia-smi", "amd-smi"}); }

  /// Runs `kagent-actors gpus <args>` with only the given masks set and the fixture chosen.
  cli_result gpus(const std::string& fixture_name, const env_map& masks, const std::vector<std::string>& args,
                  bool as_json = true) {
    auto binary = fs::path(KAGENT_BINARY_DIR) / "app" / "kagent-actors";
    EXPECT_TRUE(fs::exists(binary)) << "build the kagent-actors target first: " << binary;
    process_spec spec;
    spec.argv = {binary.string(), "gpus"};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    if (as_json) spec.argv.push_back("--json");
    env_map env{{"PATH", bin.string()},
                {"HOME", tmp.path.string()},
                {"ROCM_PATH", (tmp.path / "no-rocm").string()},
                {"KAGENT_CONFIG_DIR", (fs::path(KAGENT_SOURCE_DIR) / "configs").string()},
                {"KAGENT_FAKE_GPU_FIXTURE", fixture(fixture_name).string()},
                {"KAGENT_FAKE_GPU_LOG", (tmp.path / "calls.log").string()}};
    for (const auto& [k, v] : masks) env[k] = v;
    spec.env = env;
    spec.timeout = std::chrono::milliseconds(60000);
    auto r = run_process(spec);
    cli_result out;
    out.code = r.ok() ? 0 : r.exit_code;
    out.out = r.out;
    out.err = r.err;
    if (as_json && out.code == 0) {
      try {
        out.doc = json::parse(r.out);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "stdout is not JSON: " << e.what() << "\n" << r.out;
      }
    }
    return out;
  }

  std::string calls() { return read_file(tmp.path / "calls.log"); }
};

std::vector<int> ids(const json& doc) { return doc.at("ids").get<std::vector<int>>(); }

}  // namespace

// §10.5 NVIDIA: unset HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES=0 … --strategy nvidia
TEST_F(GpusCli, NvidiaExample) {
  auto r = gpus("mi100_m40.json", {{"CUDA_VISIBLE_DEVICES", "0"}}, {"--strategy", "nvidia"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "nvidia");
  EXPECT_EQ(ids(r.doc), std::vector<int>{0});
  EXPECT_EQ(r.doc["devices"][0]["name"], "Tesla M40");
  EXPECT_TRUE(r.doc["devices"][0]["spec"].is_null());  // an M40 is not in the database
  EXPECT_EQ(r.doc["gpu_name"], "NVIDIA H100 NVL 94GB");  // falls back to the YAML name, and says so
  EXPECT_NE(r.doc["gpu_name_note"].get<std::string>().find("Tesla M40"), std::string::npos);
  EXPECT_EQ(calls().find("amd-smi"), std::string::npos);
}

// §10.5 AMD through HIP: unset CUDA_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES; HIP_VISIBLE_DEVICES=0 … --strategy amd
TEST_F(GpusCli, AmdThroughHipExample) {
  auto r = gpus("mi100_m40.json", {{"HIP_VISIBLE_DEVICES", "0"}}, {"--strategy", "amd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "rocm");
  EXPECT_EQ(ids(r.doc), std::vector<int>{0});
  const auto& d = r.doc["devices"][0];
  EXPECT_EQ(d["name"], "AMD Instinct MI100");
  EXPECT_EQ(d["chip_id"], "0x738c");
  EXPECT_EQ(d["compute_units"], 120);
  EXPECT_EQ(d["spec"]["name"], "AMD Instinct MI100");
  EXPECT_EQ(d["spec"]["peak_fp32_tflops"], 46.1);
  // §14 A.72: amd.yaml says MI300X; the selected device is an MI100, and the device wins.
  EXPECT_EQ(r.doc["gpu_name"], "AMD Instinct MI100");
  EXPECT_NE(r.doc["gpu_name_note"].get<std::string>().find("AMD Instinct MI300X"), std::string::npos);
  EXPECT_NE(r.doc["reason"].get<std::string>().find("HIP_VISIBLE_DEVICES='0'"), std::string::npos);
}

// §10.5 AMD through ROCR, whose value is the HIP id.
TEST_F(GpusCli, AmdThroughRocrExample) {
  auto r = gpus("mi100_m40.json", {{"ROCR_VISIBLE_DEVICES", "0"}}, {"--strategy", "amd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "rocm");
  EXPECT_EQ(ids(r.doc), std::vector<int>{0});
  // ROCR=2 is the MI100's HSA_ID, not its HIP id: it hides the device.
  r = gpus("mi100_m40.json", {{"ROCR_VISIBLE_DEVICES", "2"}}, {"--strategy", "amd"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ROCm platform was requested but no devices are visible"), std::string::npos) << r.err;
}

// §10.5 Both ROCR and HIP: ROCR=0 HIP=0 stays on the AMD GPU; HIP=1 is past the end.
TEST_F(GpusCli, RocrAndHipExample) {
  auto r = gpus("mi100_m40.json", {{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "0"}}, {"--strategy", "amd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "rocm");
  EXPECT_EQ(ids(r.doc), std::vector<int>{0});
  r = gpus("mi100_m40.json", {{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "1"}}, {"--strategy", "amd"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ROCm platform was requested but no devices are visible"), std::string::npos) << r.err;
}

// §10.5 CUDA_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES=0 raises for any strategy, before it is read.
TEST_F(GpusCli, CudaPlusHipRaisesForAnyStrategy) {
  for (std::vector<std::string> args : {std::vector<std::string>{"--strategy", "nvidia"},
                                        std::vector<std::string>{"--strategy", "amd"},
                                        std::vector<std::string>{"--strategy", "noop"}, std::vector<std::string>{}}) {
    auto r = gpus("mi100_m40.json", {{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "0"}}, args);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("conflicting GPU visibility masks"), std::string::npos) << r.err;
  }
  EXPECT_EQ(calls(), "");  // no tool ran
}

// Review thread: with both ROCm masks unset, --strategy nvidia runs on NVIDIA and --strategy amd on
// the HIP ids (the final behaviour; the earlier "NVIDIA devices were selected" raise is gone).
TEST_F(GpusCli, MasksUnsetEachStrategyGetsItsVendor) {
  auto r = gpus("mi100_m40.json", {}, {"--strategy", "nvidia"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "nvidia");
  r = gpus("mi100_m40.json", {}, {"--strategy", "amd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "rocm");
  EXPECT_EQ(ids(r.doc), std::vector<int>{0});
}

// Review thread: a matching AMD mask with --strategy nvidia raises.
TEST_F(GpusCli, MatchingHipMaskWithNvidiaStrategyRaises) {
  auto r = gpus("mi100_m40.json", {{"HIP_VISIBLE_DEVICES", "0"}}, {"--strategy", "nvidia"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("NVIDIA platform was requested but ROCm devices were selected"), std::string::npos) << r.err;
}

// Mixed-node fixture: nvidia [0,1], amd HIP ids [1,2,3,4].
TEST_F(GpusCli, MixedNodeRocmRequestUsesAllHipIds) {
  auto r = gpus("mixed_node.json", {}, {"--strategy", "amd"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "rocm");
  EXPECT_EQ(ids(r.doc), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(r.doc["devices"].size(), 4u);
  EXPECT_EQ(calls().find("nvidia-smi"), std::string::npos);
}

TEST_F(GpusCli, MixedNodeNoPlatformStaysOnNvidiaWithoutCallingAmdSmi) {
  auto r = gpus("mixed_node.json", {}, {});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.doc["vendor"], "nvidia");
  EXPECT_EQ(ids(r.doc), (std::vector<int>{0, 1}));
  EXPECT_EQ(r.doc["platform"], "nvidia");
  EXPECT_EQ(r.doc["devices"][0]["spec"]["name"], "NVIDIA H100 SXM5 80GB");
  EXPECT_NE(calls().find("nvidia-smi"), std::string::npos);
  EXPECT_EQ(calls().find("amd-smi"), std::string::npos);
}

TEST_F(GpusCli, MixedNodeMaskedRocmRequests) {
  auto r = gpus("mixed_node.json", {{"ROCR_VISIBLE_DEVICES", "1,2,3"}, {"HIP_VISIBLE_DEVICES", "2"}}, {"--platform", "rocm"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ids(r.doc), std::vector<int>{3});
  r = gpus("mixed_node.json", {{"HIP_VISIBLE_DEVICES", "9"}}, {"--strategy", "amd"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("ROCm platform was requested but no devices are visible"), std::string::npos) << r.err;
}

TEST_F(GpusCli, NoopNeedsNoGpuAndNothingListedStops) {
  fs::remove(bin / "nvidia-smi");
  fs::remove(bin / "amd-smi");
  auto r = gpus("mixed_node.json", {}, {"--strategy", "noop"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.doc["vendor"].is_null());
  EXPECT_EQ(r.doc["platform"], "noop");
  r = gpus("mixed_node.json", {}, {});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no GPU visible"), std::string::npos) << r.err;
  // What was looked for and what to run instead; with --json the answer is still JSON.
  EXPECT_NE(r.err.find("looked for NVIDIA GPUs with nvidia-smi (not on PATH)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--strategy cpu"), std::string::npos) << r.err;
  const auto doc = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  EXPECT_TRUE(doc["devices"].empty());
  EXPECT_TRUE(doc["vendor"].is_null());
  EXPECT_NE(doc["suggestion"].get<std::string>().find("--strategy cpu"), std::string::npos);
}

TEST_F(GpusCli, ExplicitGpuIdsSkipDetection) {
  auto r = gpus("mixed_node.json", {}, {"--platform", "rocm", "--gpu-ids", "2,3"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(ids(r.doc), (std::vector<int>{2, 3}));
  EXPECT_EQ(calls(), "");
}

TEST_F(GpusCli, CrashingToolIsARunFailureNamingIt) {
  temp_dir t2;
  auto fx = t2.path / "crash.json";
  write_file(fx, R"({"nvidia": {"mode": "crash", "gpus": [{"index": 0, "name": "NVIDIA H200"}]}})");
  auto r = gpus("mixed_node.json", {{"KAGENT_FAKE_GPU_FIXTURE", fx.string()}}, {});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("nvidia-smi"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("signal 11"), std::string::npos) << r.err;
}

TEST_F(GpusCli, TableOutput) {
  auto r = gpus("h200.json", {}, {}, false);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("vendor:   nvidia"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reason:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVIDIA H200"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4800"), std::string::npos) << r.out;
}
