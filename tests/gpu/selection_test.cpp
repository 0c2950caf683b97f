// Every rule of SPEC §10.2 and §14 A.54-A.70, on listings in hand (no tools run here).
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/gpu/selection.hpp"

using namespace kagent;

namespace {

gpu_listing nv(std::vector<int> ids) {
  gpu_listing l;
  for (int i : ids) {
    gpu_device d;
    d.id = i;
    d.name = "NVIDIA H100 80GB HBM3";
    d.uuid = "GPU-aaaa000" + std::to_string(i) + "-1111-2222-3333-444444444444";
    d.spec_key = "NVIDIA H100 SXM5 80GB";
    l.push_back(d);
  }
  return l;
}

gpu_listing amd(std::vector<int> hip_ids) {
  gpu_listing l;
  int idx = 0;
  for (int i : hip_ids) {
    gpu_device d;
    d.id = i;
    d.smi_index = idx;
    d.hsa_id = idx + 2;
    ++idx;
    d.name = "AMD Instinct MI300X";
    d.spec_key = "AMD Instinct MI300X";
    l.push_back(d);
  }
  return l;
}

platform_spec platform(const std::string& p) {
  platform_spec s;
  for (const auto& c : platform_spec::component_names()) s.component(c) = p;
  s.given = true;
  return s;
}

selection_request req(const std::string& p = "", std::vector<int> ids = {}) {
  selection_request r;
  if (!p.empty()) r.platform = platform(p);
  r.gpu_ids = std::move(ids);
  return r;
}

/// A lazy listing that counts how often the tool would have run.
struct counted {
  gpu_listing value;
  int calls = 0;
  lazy_listing fn() {
    return [this] {
      ++calls;
      return value;
    };
  }
};

std::string error_of(const selection_request& r, const env_map& env, const gpu_listing& n, const gpu_listing& a) {
  try {
    select_gpus(r, env, n, a);
  } catch (const user_error& e) {
    return e.what();
  }
  return "<no error>";
}

using ids = std::vector<int>;

}  // namespace

TEST(GpuSelection, ErrorStringsAreVerbatim) {
  EXPECT_STREQ(err_rocm_none_visible, "ROCm platform was requested but no devices are visible");
  EXPECT_STREQ(err_nvidia_got_rocm, "NVIDIA platform was requested but ROCm devices were selected");
  EXPECT_STREQ(err_rocm_got_nvidia, "ROCm platform was requested but NVIDIA devices were selected");
  EXPECT_STREQ(err_no_gpu, "no GPU visible");
}

// Rule 2 / §14 A.59 / §10.5 "CUDA_VISIBLE_DEVICES=1 HIP_VISIBLE_DEVICES=0 raises for any strategy".
TEST(GpuSelection, CudaPlusRocmMaskConflictIsCheckedFirstForAnyStrategy) {
  for (const auto& env : {env_map{{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "0"}},
                          env_map{{"CUDA_VISIBLE_DEVICES", "0"}, {"ROCR_VISIBLE_DEVICES", "0"}}}) {
    for (const auto& r : {req(), req("nvidia"), req("rocm"), req("noop"), req("cpu"), req("nvidia", {0})}) {
      counted n{nv({0, 1})}, a{amd({0})};
      try {
        select_gpus(r, env, n.fn(), a.fn());
        ADD_FAILURE() << "no conflict error";
      } catch (const user_error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(err_mask_conflict, 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("CUDA_VISIBLE_DEVICES="), std::string::npos) << e.what();
      }
      EXPECT_EQ(n.calls + a.calls, 0);
    }
  }
}

TEST(GpuSelection, AnEmptyMaskIsNoConflict) {
  auto s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", ""}, {"HIP_VISIBLE_DEVICES", "0"}}, nv({0}), amd({0}));
  EXPECT_EQ(s.vendor, "rocm");
  s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", "0"}, {"ROCR_VISIBLE_DEVICES", ""}}, nv({0}), amd({0}));
  EXPECT_EQ(s.vendor, "nvidia");
}

// Rule 3 / §14 A.58
TEST(GpuSelection, EmptyCudaMaskDisablesNvidia) {
  auto s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", ""}}, nv({0, 1}), amd({0}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({0}));
  EXPECT_EQ(error_of(req(), {{"CUDA_VISIBLE_DEVICES", ""}}, nv({0, 1}), {}), err_no_gpu);
}

TEST(GpuSelection, EmptyHipOrRocrMaskDisablesAmd) {
  for (const char* var : {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"}) {
    env_map env{{var, ""}};
    EXPECT_EQ(error_of(req(), env, {}, amd({0, 1})), err_no_gpu) << var;
    EXPECT_EQ(select_gpus(req(), env, nv({0}), amd({0, 1})).vendor, "nvidia") << var;
    EXPECT_EQ(error_of(req("rocm"), env, nv({0}), amd({0, 1})), err_rocm_none_visible) << var;
  }
}

// Rule 4 / §14 A.56: ROCR selects by HIP-id value; the reviewer's MI100 is HIP 0 / HSA 2.
TEST(GpuSelection, RocrSelectsByHipIdValueNotHsaId) {
  gpu_listing mi100 = amd({0});
  mi100[0].hsa_id = 2;
  EXPECT_EQ(error_of(req(), {{"ROCR_VISIBLE_DEVICES", "2"}}, {}, mi100), err_no_gpu);
  auto s = select_gpus(req(), {{"ROCR_VISIBLE_DEVICES", "0"}}, {}, mi100);
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({0}));
}

// Appendix A: test_visible_hip_id_uses_the_detected_list
TEST(GpuSelection, VisibleHipIdUsesTheDetectedList) {
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, "1,2,3", "2"), ids({3}));
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, "0", "1"), ids({}));
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, std::nullopt, "0"), ids({1}));  // HIP alone indexes the full list
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, std::nullopt, "3,0"), ids({4, 1}));
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, "4,2", std::nullopt), ids({4, 2}));
  EXPECT_EQ(visible_hip_ids({0, 1, 2, 3}, std::nullopt, "2"), ids({2}));  // normal case: position == id
  EXPECT_EQ(visible_hip_ids({1, 2, 3, 4}, std::nullopt, std::nullopt), ids({1, 2, 3, 4}));
}

TEST(GpuSelection, RocrThenHipThroughSelect) {
  auto s = select_gpus(req("rocm"), {{"ROCR_VISIBLE_DEVICES", "1,2,3"}, {"HIP_VISIBLE_DEVICES", "2"}}, nv({0, 1}),
                       amd({1, 2, 3, 4}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({3}));
  EXPECT_NE(s.reason.find("HIP_VISIBLE_DEVICES='2'"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("ROCR_VISIBLE_DEVICES='1,2,3'"), std::string::npos) << s.reason;
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].id, 3);
}

TEST(GpuSelection, Rocr0Hip1IsPastTheEnd) {
  env_map env{{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "1"}};
  EXPECT_EQ(error_of(req("rocm"), env, nv({0}), amd({0})), err_rocm_none_visible);
  // No platform requested: the unmatched mask disables AMD and NVIDIA stays.
  auto s = select_gpus(req(), env, nv({0}), amd({0}));
  EXPECT_EQ(s.vendor, "nvidia");
  // ROCR=0 HIP=0 stays on the AMD GPU (§10.5).
  s = select_gpus(req("rocm"), {{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "0"}}, nv({0}), amd({0}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({0}));
}

TEST(GpuSelection, UnparsableOrUnmatchedEntrySelectsNothing) {
  EXPECT_EQ(visible_hip_ids({0, 1}, std::nullopt, "x"), ids({}));
  EXPECT_EQ(visible_hip_ids({0, 1}, std::nullopt, "-1"), ids({}));
  EXPECT_EQ(visible_hip_ids({0, 1}, "GPU-9f444a2fb30adeb0", std::nullopt), ids({}));
  EXPECT_EQ(visible_hip_ids({0, 1}, std::nullopt, "1,x"), ids({1}));
  EXPECT_EQ(visible_hip_ids({0, 1}, std::nullopt, " 1 "), ids({1}));
  EXPECT_EQ(visible_hip_ids({0, 1}, std::nullopt, "1,1"), ids({1}));
}

// Rule 5 / §14 A.62: the common NVIDIA case never runs amd-smi.
TEST(GpuSelection, NoMaskAndNoRocmRequestStaysOnNvidiaWithoutAmdSmi) {
  for (const auto& r : {req(), req("nvidia")}) {
    counted n{nv({0, 1})}, a{amd({1, 2, 3, 4})};
    auto s = select_gpus(r, {}, n.fn(), a.fn());
    EXPECT_EQ(s.vendor, "nvidia");
    EXPECT_EQ(s.ids, ids({0, 1}));
    EXPECT_EQ(a.calls, 0);
    EXPECT_EQ(n.calls, 1);
  }
}

TEST(GpuSelection, AmdSmiFailureDoesNotMatterWhenRule5Decides) {
  counted n{nv({0})};
  lazy_listing broken = []() -> gpu_listing { throw run_error("GPU listing: `amd-smi list -e` failed: exit 1"); };
  EXPECT_EQ(select_gpus(req(), {}, n.fn(), broken).vendor, "nvidia");
  EXPECT_THROW(select_gpus(req("rocm"), {}, n.fn(), broken), run_error);
}

// Appendix A: test_mixed_node_uses_nvidia_unless_hip_visible_devices
TEST(GpuSelection, MixedNodeUsesNvidiaUnlessHipVisibleDevices) {
  auto s = select_gpus(req(), {}, nv({0, 1}), amd({1, 2, 3, 4}));
  EXPECT_EQ(s.vendor, "nvidia");
  EXPECT_EQ(s.ids, ids({0, 1}));
  s = select_gpus(req(), {{"HIP_VISIBLE_DEVICES", "0"}}, nv({0, 1}), amd({1, 2, 3, 4}));
  EXPECT_EQ(s.vendor, "rocm");  // rule 6.2: a mask that leaves a HIP id picks AMD
  EXPECT_EQ(s.ids, ids({1}));
}

// Rule 6.3 / §14 A.60-A.61: mixed-node fixture.
TEST(GpuSelection, RocmRequestWithMasksUnsetUsesAllHipIdsOnAMixedNode) {
  counted n{nv({0, 1})}, a{amd({1, 2, 3, 4})};
  auto s = select_gpus(req("rocm"), {}, n.fn(), a.fn());
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({1, 2, 3, 4}));
  EXPECT_EQ(n.calls, 0);  // never an nvidia-smi index for a ROCm worker
  EXPECT_NE(s.reason.find("ROCm platform requested"), std::string::npos);
  // A CUDA mask alone does not restrict a ROCm run: the ROCm pin removes it.
  s = select_gpus(req("rocm"), {{"CUDA_VISIBLE_DEVICES", "0"}}, nv({0, 1}), amd({1, 2, 3, 4}));
  EXPECT_EQ(s.ids, ids({1, 2, 3, 4}));
}

TEST(GpuSelection, PlatformMapWithRocmWorkerRunnerIsARocmRequest) {
  selection_request r;
  r.platform.given = true;
  r.platform.is_map = true;
  r.platform.verifier = r.platform.benchmarker = r.platform.worker_runner = r.platform.profiler = "rocm";
  r.platform.rag_prescriber = "noop";
  auto s = select_gpus(r, {}, nv({0, 1}), amd({1, 2, 3, 4}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({1, 2, 3, 4}));
}

// Rule 6.1 / §14 A.54 / Appendix A: test_amd_smi_print_order_kept_when_nvidia_absent
TEST(GpuSelection, AmdSmiPrintOrderKeptWhenNvidiaAbsent) {
  auto s = select_gpus(req(), {}, {}, amd({3, 1, 2}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({3, 1, 2}));
}

// Rule 7 / §14 A.57 / Appendix A: test_unmatched_hip_visible_devices_disables_amd
TEST(GpuSelection, UnmatchedHipVisibleDevicesDisablesAmd) {
  env_map env{{"HIP_VISIBLE_DEVICES", "9"}};
  EXPECT_EQ(error_of(req(), env, {}, amd({0})), err_no_gpu);
  auto s = select_gpus(req(), env, nv({0}), amd({0}));
  EXPECT_EQ(s.vendor, "nvidia");
  EXPECT_NE(s.reason.find("disables AMD"), std::string::npos) << s.reason;
  // A requested ROCm run raises instead of scheduling a worker, and never moves onto NVIDIA ids.
  EXPECT_EQ(error_of(req("rocm"), env, nv({0, 1}), amd({0})), err_rocm_none_visible);
  EXPECT_EQ(error_of(req("rocm"), {{"ROCR_VISIBLE_DEVICES", "9"}}, nv({0, 1}), amd({0})), err_rocm_none_visible);
}

TEST(GpuSelection, RocmRequestWithNoAmdDevicesRaises) {
  EXPECT_EQ(error_of(req("rocm"), {}, nv({0, 1}), {}), err_rocm_none_visible);
  EXPECT_EQ(error_of(req("rocm"), {}, {}, {}), err_rocm_none_visible);
}

// Rule 8 / §14 A.63
TEST(GpuSelection, NvidiaRequestWithMatchingHipIdRaises) {
  EXPECT_EQ(error_of(req("nvidia"), {{"HIP_VISIBLE_DEVICES", "0"}}, nv({0}), amd({0})), err_nvidia_got_rocm);
  EXPECT_EQ(error_of(req("nvidia"), {{"ROCR_VISIBLE_DEVICES", "0"}}, nv({0}), amd({0})), err_nvidia_got_rocm);
}

// Rule 9 / §14 A.64 / Appendix A: test_no_listed_gpu_stops
TEST(GpuSelection, NoListedGpuStopsWithoutAGpu0Fallback) {
  EXPECT_EQ(error_of(req(), {}, {}, {}), err_no_gpu);
  EXPECT_EQ(error_of(req("nvidia"), {}, {}, {}), err_no_gpu);
  EXPECT_EQ(error_of(req(), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, {}), err_no_gpu);
}

// Rule 10 / §14 A.65 / Appendix A: test_cuda_visible_devices_without_nvidia_smi_keeps_amd
TEST(GpuSelection, CudaVisibleDevicesWithoutNvidiaSmiKeepsAmd) {
  auto s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, amd({0}));
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({0}));
}

// Appendix A: test_explicit_nvidia_without_listed_gpus_does_not_invent_one
TEST(GpuSelection, ExplicitNvidiaWithoutListedGpusDoesNotInventOne) {
  EXPECT_EQ(error_of(req("nvidia"), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, {}), err_no_gpu);
  EXPECT_EQ(error_of(req("nvidia"), {{"CUDA_VISIBLE_DEVICES", "0"}}, {}, amd({0})), err_nvidia_got_rocm);
}

TEST(GpuSelection, CudaMaskSelectsNvidiaSmiIndexesByValueOrUuid) {
  auto s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", "3,1"}}, nv({0, 1, 2, 3}), {});
  EXPECT_EQ(s.ids, ids({3, 1}));
  s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", "GPU-aaaa0002"}}, nv({0, 1, 2, 3}), {});
  EXPECT_EQ(s.ids, ids({2}));
  s = select_gpus(req(), {{"CUDA_VISIBLE_DEVICES", "1,7"}}, nv({0, 1}), {});
  EXPECT_EQ(s.ids, ids({1}));  // 7 is not listed: never invented
  EXPECT_EQ(error_of(req(), {{"CUDA_VISIBLE_DEVICES", "7"}}, nv({0, 1}), {}), err_no_gpu);
}

// §14 A.68
TEST(GpuSelection, ExplicitGpuIdsSkipDetection) {
  counted n{nv({0})}, a{amd({0})};
  auto s = select_gpus(req("rocm", {2, 3}), {}, n.fn(), a.fn());
  EXPECT_EQ(s.vendor, "rocm");
  EXPECT_EQ(s.ids, ids({2, 3}));
  EXPECT_FALSE(s.detected);
  EXPECT_EQ(n.calls + a.calls, 0);
  s = select_gpus(req("", {1}), {}, n.fn(), a.fn());
  EXPECT_EQ(s.vendor, "nvidia");  // the default platform
  EXPECT_EQ(n.calls + a.calls, 0);
}

// §14 A.67: noop (and cpu) need no GPU, and never pick up the host's GPUs.
TEST(GpuSelection, NoopAndCpuNeedNoGpu) {
  for (const char* p : {"noop", "cpu"}) {
    counted n{nv({0, 1})}, a{amd({})};
    auto s = select_gpus(req(p), {}, n.fn(), a.fn());
    EXPECT_EQ(s.vendor, "") << p;
    EXPECT_EQ(s.ids, ids({0})) << p;
    EXPECT_TRUE(s.devices.empty());
    EXPECT_EQ(n.calls + a.calls, 0) << p;
    EXPECT_NE(s.reason.find("needs no GPU"), std::string::npos);
  }
  EXPECT_EQ(select_gpus(req("noop", {4}), {}, gpu_listing{}, gpu_listing{}).ids, ids({4}));
}

// Rule 11 / §14 A.66
TEST(GpuSelection, DetectedVendorAppliesOnlyWhenNoPlatformWasGiven) {
  auto sel = select_gpus(req(), {}, {}, amd({0}));
  auto p = apply_detected_vendor(platform_spec{}, sel);
  for (const auto& c : platform_spec::component_names()) EXPECT_EQ(p.component(c), "rocm") << c;

  auto noop = apply_detected_vendor(platform("noop"), sel);
  EXPECT_EQ(noop.uniform(), "noop");
  auto given = apply_detected_vendor(platform("nvidia"), sel);
  EXPECT_EQ(given.uniform(), "nvidia");

  platform_spec map;
  map.given = map.is_map = true;
  map.profiler = map.roofline_analyzer = map.bottleneck_analyzer = map.rag_prescriber = "noop";
  auto kept = apply_detected_vendor(map, sel);
  EXPECT_EQ(kept.verifier, "nvidia");
  EXPECT_EQ(kept.profiler, "noop");
  EXPECT_EQ(kept.rag_prescriber, "noop");

  gpu_selection none;  // noop selection: nothing to apply
  EXPECT_EQ(apply_detected_vendor(platform_spec{}, none).uniform(), "nvidia");
}

// Appendix A: test_manager_runs_the_vendor_the_visibility_rules_choose
TEST(GpuSelection, ManagerRunsTheVendorTheVisibilityRulesChoose) {
  auto sel = select_gpus(req(), {{"HIP_VISIBLE_DEVICES", "0"}}, nv({0}), amd({0}));
  EXPECT_EQ(apply_detected_vendor(platform_spec{}, sel).worker_runner, "rocm");
  sel = select_gpus(req(), {}, nv({0}), amd({0}));
  EXPECT_EQ(apply_detected_vendor(platform_spec{}, sel).worker_runner, "nvidia");
}

TEST(GpuSelection, ListingsRunAtMostOnce) {
  // The mask needs amd-smi, then NVIDIA is empty and AMD is consulted again: one amd-smi run.
  counted n{{}}, a{amd({0})};
  EXPECT_THROW(select_gpus(req(), {{"HIP_VISIBLE_DEVICES", "5"}}, n.fn(), a.fn()), user_error);
  EXPECT_EQ(a.calls, 1);
  EXPECT_EQ(n.calls, 1);
  counted n2{{}}, a2{amd({0, 1})};
  EXPECT_EQ(select_gpus(req(), {}, n2.fn(), a2.fn()).ids, ids({0, 1}));
  EXPECT_EQ(a2.calls, 1);
}

TEST(GpuSelection, SelectionCarriesDeviceRecords) {
  auto a = amd({1, 2});
  a[1].chip_id = "0x74a1";
  a[1].compute_units = 304;
  auto s = select_gpus(req("rocm"), {{"HIP_VISIBLE_DEVICES", "1"}}, {}, a);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].id, 2);
  EXPECT_EQ(s.devices[0].chip_id, "0x74a1");
  EXPECT_EQ(s.devices[0].compute_units, 304);
  EXPECT_TRUE(s.detected);
}

TEST(GpuSelection, MoreCpuDevicesThanCoresIsANoteThatSaysWhy) {
  EXPECT_EQ(kagent::cpu_device_note(2, 2), "");
  EXPECT_EQ(kagent::cpu_device_note(1, 16), "");
  EXPECT_EQ(kagent::cpu_device_note(4, 0), "") << "unknown core count: no note";
  const auto n = kagent::cpu_device_note(4, 2);
  EXPECT_EQ(n.rfind("devices: 4 cpu devices on 2 cores: evaluators share cores, so their timings bend", 0), 0u) << n;
}
