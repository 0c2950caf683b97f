// Worker pinning (§10.6, §14 A.69-A.70), gpu_name validation and reconciliation (§9.4, §14 A.72,
// B.104) and the per-platform test timeout (§14 A.39).
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/gpu/gpu_name.hpp"
#include "platform/gpu/pinning.hpp"
#include "platform/gpu/timeouts.hpp"

using namespace kagent;

namespace {
const env_map parent{{"PATH", "/usr/bin"},
                     {"CUDA_VISIBLE_DEVICES", "0,1"},
                     {"ROCR_VISIBLE_DEVICES", "1,2,3"},
                     {"HIP_VISIBLE_DEVICES", "2"},
                     {"HOME", "/home/u"}};

gpu_selection amd_sel(int id, const std::string& name, const std::string& key) {
  gpu_selection s;
  s.vendor = "rocm";
  gpu_device d;
  d.id = id;
  d.name = name;
  d.spec_key = key;
  s.devices.push_back(d);
  s.ids = {id};
  s.detected = true;
  return s;
}
}  // namespace

// Appendix A: test_pin_rocm_worker_unsets_cuda_visible_devices
TEST(GpuPinning, PinRocmWorkerUnsetsCudaVisibleDevices) {
  auto env = pin_environment(parent, "rocm", 3);
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);  // removed, never emptied
  EXPECT_EQ(env.count("ROCR_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(env.at("PATH"), "/usr/bin");
  EXPECT_EQ(env.at("HOME"), "/home/u");
}

TEST(GpuPinning, NvidiaPinSetsTheIndexInNvidiaSmiOrder) {
  auto env = pin_environment({{"PATH", "/usr/bin"}}, "nvidia", 1);
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1");
  EXPECT_EQ(env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(pin_environment({{"CUDA_VISIBLE_DEVICES", "0,1"}}, "nvidia", 0).at("CUDA_VISIBLE_DEVICES"), "0");
}

TEST(GpuPinning, NoCudaMaskIsEverEmpty) {
  for (const char* v : {"nvidia", "rocm"})
    for (int id : {0, 1, 7}) {
      auto env = pin_environment(parent, v, id);
      auto it = env.find("CUDA_VISIBLE_DEVICES");
      if (it != env.end()) {
        EXPECT_FALSE(it->second.empty()) << v << " " << id;
      }
    }
  EXPECT_THROW(pin_environment(parent, "nvidia", -1), std::invalid_argument);
}

// §14 A.70: the parent map is a value; pinning returns a copy.
TEST(GpuPinning, ParentEnvironmentIsUntouchedAndGpuLessPlatformsAreUnchanged) {
  env_map copy = parent;
  (void)pin_environment(copy, "rocm", 0);
  EXPECT_EQ(copy, parent);
  EXPECT_EQ(pin_environment(parent, "", 0), parent);
  EXPECT_EQ(pin_environment(parent, "noop", 0), parent);
  EXPECT_EQ(pin_environment(parent, "cpu", 0), parent);
}

// §14 B.104
TEST(GpuName, ValidateAcceptsKeysAndResolvableNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(validate_gpu_name("NVIDIA H100 NVL 94GB"), "NVIDIA H100 NVL 94GB");
  EXPECT_EQ(validate_gpu_name("AMD Instinct MI300X OAM"), "AMD Instinct MI300X");
  EXPECT_EQ(validate_gpu_name("NVIDIA H200"), "NVIDIA H200");
  try {
    validate_gpu_name("NVIDIA B200");
    ADD_FAILURE();
  } catch (const user_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("gpu_name 'NVIDIA B200' is not in the GPU specs database"), std::string::npos) << m;
    EXPECT_NE(m.find("AMD Instinct MI100"), std::string::npos) << m;  // lists the known names
    EXPECT_NE(m.find("NVIDIA H200"), std::string::npos) << m;
  }
}

// §14 A.72: amd.yaml says MI300X; on the reviewer's node the mask selects an MI100.
TEST(GpuName, DetectedDeviceWinsOverTheStaticYamlName) {
  auto c = reconcile_gpu_name("AMD Instinct MI300X", amd_sel(0, "AMD Instinct MI100", "AMD Instinct MI100"));
  EXPECT_EQ(c.name, "AMD Instinct MI100");
  EXPECT_NE(c.note.find("does not match the selected device (HIP id 0: AMD Instinct MI100)"), std::string::npos)
      << c.note;
  c = reconcile_gpu_name("AMD Instinct MI100", amd_sel(0, "AMD Instinct MI100", "AMD Instinct MI100"));
  EXPECT_EQ(c.name, "AMD Instinct MI100");
  EXPECT_EQ(c.note, "");
  c = reconcile_gpu_name("", amd_sel(2, "AMD Instinct MI300X", "AMD Instinct MI300X"));
  EXPECT_EQ(c.name, "AMD Instinct MI300X");
  EXPECT_NE(c.note.find("derived"), std::string::npos);
}

TEST(GpuName, UnknownDeviceFallsBackToTheConfiguredName) {
  gpu_selection s = amd_sel(0, "Tesla M40", "");
  s.vendor = "nvidia";
  auto c = reconcile_gpu_name("NVIDIA H100 NVL 94GB", s);
  EXPECT_EQ(c.name, "NVIDIA H100 NVL 94GB");
  EXPECT_NE(c.note.find("'Tesla M40' is not in the GPU specs database"), std::string::npos) << c.note;
  try {
    reconcile_gpu_name("", s);
    ADD_FAILURE();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find("set gpu_name to one of"), std::string::npos);
  }
  EXPECT_THROW(reconcile_gpu_name("bogus", s), user_error);
}

TEST(GpuName, GpuLessAndExplicitIdRuns) {
  gpu_selection noop;
  noop.ids = {0};
  EXPECT_EQ(reconcile_gpu_name("", noop).name, "");
  EXPECT_EQ(reconcile_gpu_name("NVIDIA H200", noop).name, "NVIDIA H200");
  gpu_selection explicit_ids;
  explicit_ids.vendor = "nvidia";
  explicit_ids.ids = {0};
  explicit_ids.devices.resize(1);
  explicit_ids.devices[0].id = 0;
  EXPECT_EQ(reconcile_gpu_name("NVIDIA H200", explicit_ids).name, "NVIDIA H200");
  EXPECT_THROW(reconcile_gpu_name("", explicit_ids), user_error);
}

// Appendix A: test_timeout_default_is_platform_specific / §14 A.39
TEST(GpuTimeouts, TimeoutDefaultIsPlatformSpecific) {
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "rocm"), 300);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "nvidia"), 30);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "cuda"), 30);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "xpu"), 30);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "cpu"), 300);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(std::nullopt, "noop"), 30);
  // §14 A.40-A.41: an explicit value always wins, on every platform.
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(45.0, "rocm"), 45);
  EXPECT_DOUBLE_EQ(resolve_test_timeout_s(600.0, "cuda"), 600);
  EXPECT_THROW(resolve_test_timeout_s(0.0, "cuda"), user_error);
  EXPECT_THROW(resolve_test_timeout_s(std::nullopt, "tpu"), user_error);
}
