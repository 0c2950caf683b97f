// The standby profiler (platform/profiling/profile_runner.hpp, profiler_standby): the fake ncu runs the
// real harness/profile_wrapper.py --standby on the CPU (the harness interpreter, Triton's interpreter)
// and writes a real H100 capture of a standby batch (fixtures/profiling/ncu_standby_matvec).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "platform/common/stop.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "runner_support.hpp"

namespace fs = std::filesystem;
using namespace kagent;
using namespace kagent::test;

namespace {

/// A kernel whose launched @triton.jit function is matvec_splitk_kernel (a real split-K matvec, so
/// the wrapper's batch runs it in Triton's interpreter).
std::string splitk_code() {
  return R"(import torch
import triton
import triton.language as tl


@triton.jit
def matvec_splitk_kernel(a_ptr, b_ptr, c_ptr, M, K, stride_am, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_k = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rk = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + rm[:, None] * stride_am + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk, mask=rk < K, other=0.0)
    part = tl.sum(a.to(tl.float32) * b.to(tl.float32)[None, :], axis=1)
    tl.atomic_add(c_ptr + rm, part, mask=rm < M)


def kernel_function(A, B):
    M, K = A.shape
    acc = torch.zeros(M, device=A.device, dtype=torch.float32)
    grid = (triton.cdiv(M, 32), triton.cdiv(K, 64))
    matvec_splitk_kernel[grid](A, B.reshape(-1), acc, M, K, A.stride(0), BLOCK_M=32, BLOCK_K=64)
    return acc.to(A.dtype).reshape(M, 1)
)";
}

/// Two requests (the starting kernel, a split-K one) and a standby like them, on the real wrapper.
struct standby_case {
  runner_case a;
  kernel_profile_request b;
  kernel_profile_request like;
  explicit standby_case(const std::map<std::string, std::string>& extra = {}, double budget_s = 120)
      : a("nvidia", "ncu_standby_matvec", with_program(extra), budget_s) {
    a.req.python = harness_python();
    a.req.kernel_id = "parent_r1_c0";
    a.req.dir = a.root / "candidates/r1_c0/profile_parent_r1_c0";
    b = a.req;
    b.code = splitk_code();
    b.kernel_id = "parent_r1_c3";
    b.dir = a.root / "candidates/r1_c3/profile_parent_r1_c3";
    like = a.req;
    like.kernel_id = "standby_d0";
    like.dir = a.root / "profiles/standby_d0";
  }
  static std::map<std::string, std::string> with_program(std::map<std::string, std::string> extra) {
    extra.emplace("FAKE_NCU_RUN_PROGRAM", "1");  // the standby is a real process that waits
    return extra;
  }
  std::vector<nlohmann::json> fake_calls() const { return log_lines(a.root / "fake.log"); }
  std::vector<nlohmann::json> invocations(const kernel_profile_request& r) const {
    return log_lines(r.dir + "/invocations.jsonl");
  }
  fs::path standby_dir(int n) const { return a.root / ("profiles/standby_d0_" + std::to_string(n)); }
  /// Waits (bounded) until the n-th standby wrote standby.ready: torch imported, problem loaded.
  bool wait_ready(int n, double limit_s = 120) const {
    for (int i = 0; i < static_cast<int>(limit_s * 20); ++i) {
      if (fs::exists(standby_dir(n) / "standby.ready")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
};

#define NEED_HARNESS_PYTHON()                                                                            \
  if (!harness_python_usable()) GTEST_SKIP() << harness_python() << " cannot import torch and triton"

} // namespace

TEST(ProfilerStandby, ABatchGoesToTheWaitingProcessAndEachKernelGetsTheLaunchesOfItsRange) {
  NEED_HARNESS_PYTHON();
  standby_case c;
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  EXPECT_TRUE(sb.waiting());
  ASSERT_TRUE(c.wait_ready(1)) << "the standby never became ready";
  // Started before the kernels existed: an NVTX filter, no name (only PyTorch's own kernels left out),
  // the wrapper in standby mode.
  auto calls = c.fake_calls();
  ASSERT_EQ(calls.size(), 1u);
  const auto argv = calls[0]["argv"].get<std::vector<std::string>>();
  auto k = std::find(argv.begin(), argv.end(), "--kernel-name");
  ASSERT_NE(k, argv.end());
  EXPECT_EQ(*(k + 1), std::string("regex:") + not_pytorch_kernel_regex);
  auto n = std::find(argv.begin(), argv.end(), "--nvtx-include");
  ASSERT_NE(n, argv.end());
  EXPECT_EQ(*(n + 1), "kagent_measured/");
  const auto launcher = read_file((c.standby_dir(1) / "standby_d0_1_wrapper.py").string());
  EXPECT_NE(launcher.find("\"--standby\""), std::string::npos) << launcher;

  auto out = profile_kernels({c.a.req, c.b}, &sb);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].ok) << out[0].error << "\n" << out[0].output_tail;
  ASSERT_TRUE(out[1].ok) << out[1].error << "\n" << out[1].output_tail;
  EXPECT_EQ(c.fake_calls().size(), 1u) << "no profiler process besides the standby";
  EXPECT_EQ(sb.served(), 1);
  EXPECT_FALSE(sb.waiting()) << "a standby serves one batch";
  // Each kernel: the launch of its name inside its range (the real capture's numbers).
  EXPECT_EQ(out[0].kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(out[0].metrics.at("gpu__time_duration.sum"), 2389024);
  EXPECT_EQ(out[1].kernel_name, "matvec_splitk_kernel");
  EXPECT_DOUBLE_EQ(out[1].metrics.at("gpu__time_duration.sum"), 1410112);
  EXPECT_EQ(out[1].detail.at("nvtx_include"), "kagent_measured/");
  ASSERT_TRUE(out[0].roofline && out[1].roofline);
  for (const auto* r : {&c.a.req, &c.b}) {
    const auto inv = c.invocations(*r);
    ASSERT_EQ(inv.size(), 1u) << r->dir;
    EXPECT_EQ(inv[0]["name"], "ncu (standby, batch of 2)");
    EXPECT_TRUE(fs::exists(r->dir + "/metrics.json"));
  }
  // The wrapper really ran the batch it was handed (in Triton's interpreter), in the standby's dir.
  const auto& rec = out[0].records.back();
  EXPECT_NE(rec.output_tail.find("standby: batch of 2 received"), std::string::npos) << rec.output_tail;
  EXPECT_NE(rec.output_tail.find("kernel k1 output shape"), std::string::npos) << rec.output_tail;
  EXPECT_NE(rec.verdict.find("before its batch"), std::string::npos) << rec.verdict;
  EXPECT_TRUE(fs::exists(c.standby_dir(1) / "k1_kernel.py"));
  EXPECT_TRUE(fs::exists(c.standby_dir(1) / "batch.json"));
}

TEST(ProfilerStandby, OtherSettingsAreNotServedAndTheStandbyKeepsWaitingThenDiesWithItsOwner) {
  NEED_HARNESS_PYTHON();
  standby_case c;
  int pid = 0;
  {
    profiler_standby sb;
    ASSERT_TRUE(sb.start(c.like, 300));
    ASSERT_TRUE(c.wait_ready(1));
    // Another dtype needs other inputs: a profile of its own (a second fake ncu), the standby untouched.
    auto other = c.a.req;
    other.dtype = "float16";
    auto out = profile_kernels({other}, &sb);
    EXPECT_EQ(c.fake_calls().size(), 2u);
    EXPECT_EQ(sb.served(), 0);
    EXPECT_TRUE(sb.waiting());
    EXPECT_TRUE(sb.start(c.like, 300)) << "one is already waiting";
    EXPECT_EQ(sb.started(), 1);
    pid = c.fake_calls()[0]["pid"].get<int>();
    EXPECT_TRUE(process_alive(pid));
  }
  // Its owner is gone: the waiting process is killed and reaped, nothing is left behind.
  EXPECT_FALSE(process_alive(pid));
}

TEST(ProfilerStandby, OneThatEndsBeforeItsBatchIsNotUsedAndTwoInARowTurnItOff) {
  // The fake ncu does not run the program here: it writes its CSV and exits at once. What it wrote
  // came before any batch, so it must not be used; the profile is a fresh one.
  runner_case a("nvidia", "ncu_standby_matvec");
  a.req.kernel_id = "parent";
  auto like = a.req;
  like.kernel_id = "standby_d0";
  like.dir = a.root / "profiles/standby_d0";
  profiler_standby sb;
  ASSERT_TRUE(sb.start(like, 300));
  for (int i = 0; i < 200 && sb.waiting(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  auto out = profile_kernels({a.req}, &sb);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].ok) << out[0].error;
  ASSERT_EQ(out[0].records.size(), 1u);
  EXPECT_EQ(out[0].records[0].name, "ncu") << "a profile of its own";
  EXPECT_EQ(sb.served(), 0);
  ASSERT_TRUE(sb.start(like, 300));
  for (int i = 0; i < 200 && sb.waiting(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_FALSE(sb.start(like, 300)) << "two ended early in a row: the standby stays off";
  EXPECT_EQ(sb.started(), 2);
}

TEST(ProfilerStandby, AHungBatchIsKilledAtTheBudgetAndItsKernelsAreProfiledOnTheirOwn) {
  NEED_HARNESS_PYTHON();
  // The standby's ncu hangs (only in the standby's invocation: its log file is under standby_d0_*).
  standby_case c({{"FAKE_NCU_FAULT", "hang"}, {"FAKE_NCU_FAULT_ONLY_IN", "standby_d0_"}}, 6);
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  auto out = profile_kernels({c.a.req}, &sb);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_GE(out[0].records.size(), 1u);
  const auto& first = out[0].records.front();
  EXPECT_EQ(first.name, "ncu (standby, batch of 1)");
  EXPECT_TRUE(first.timed_out);
  EXPECT_LE(first.wall_s, 6.0 + 2.0) << "killed at the budget";
  // The batch took the profile's whole budget: nothing is left for a profile of its own, which
  // fails as any profile whose budget is spent, and no process outlives it.
  EXPECT_FALSE(out[0].ok);
  EXPECT_NE(out[0].error.find("budget"), std::string::npos) << out[0].error;
  EXPECT_FALSE(process_alive(c.fake_calls()[0]["pid"].get<int>()));
  EXPECT_FALSE(sb.waiting());
}

TEST(ProfilerStandby, AResumedRunNeverReusesADirectoryAnEarlierSessionLeft) {
  // A resumed run numbers its standbys from 1 again; standby_d0_1 of the first session still holds
  // its batch.json, which a new standby there would run as its own batch.
  runner_case a("nvidia", "ncu_standby_matvec");
  auto like = a.req;
  like.kernel_id = "standby_d0";
  like.dir = a.root / "profiles/standby_d0";
  const auto old_dir = a.root.path / "profiles/standby_d0_1";
  fs::create_directories(old_dir);
  write_file((old_dir / "batch.json").string(), "{\"kernels\": [[\"k0\", \"/old/k0_kernel.py\"]]}\n");
  profiler_standby sb;
  ASSERT_TRUE(sb.start(like, 300));
  // The fake does not run the program here: it writes its log line and CSV and ends at once.
  for (int i = 0; i < 200 && sb.waiting(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  sb.stop();
  const auto calls = a.log();
  ASSERT_EQ(calls.size(), 1u);
  const auto argv = calls[0]["argv"].dump();
  EXPECT_NE(argv.find("standby_d0_2"), std::string::npos) << argv;
  EXPECT_EQ(argv.find("standby_d0_1"), std::string::npos) << argv;
  EXPECT_EQ(read_file((old_dir / "batch.json").string()), "{\"kernels\": [[\"k0\", \"/old/k0_kernel.py\"]]}\n");
  // Recorded as unused in its own directory.
  const auto rec = log_lines((a.root.path / "profiles/standby_d0_2/invocations.jsonl").string());
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(rec[0]["name"], "ncu (standby)");
  EXPECT_EQ(rec[0]["verdict"].get<std::string>().rfind("unused: ", 0), 0u) << rec[0].dump();
}

TEST(ProfilerStandby, OffByEnvironmentForOtherToolsAndOnceTheRunStops) {
  runner_case a("nvidia", "ncu_h200_real", {{"KAGENT_NCU_STANDBY", "0"}});
  profiler_standby sb;
  auto like = a.req;
  like.dir = a.root / "profiles/standby_d0";
  EXPECT_FALSE(sb.start(like, 300));
  runner_case r("rocm", "rocm_mi300x_matvec");
  auto rlike = r.req;
  rlike.dir = r.root / "profiles/standby_d0";
  EXPECT_FALSE(sb.start(rlike, 300)) << "rocprofv3 profiles are several commands";
  EXPECT_EQ(sb.started(), 0);
  EXPECT_TRUE(a.log().empty());
  runner_case n("nvidia", "ncu_h200_real");
  auto nlike = n.req;
  nlike.dir = n.root / "profiles/standby_d0";
  request_stop();
  EXPECT_FALSE(sb.start(nlike, 300));
  clear_stop_for_tests();
  EXPECT_TRUE(n.log().empty());
}

// The judge's shared launchers (platform/device/device_backend.hpp, launchers_shareable): a profile
// under bwrap hands the wrapper the directory (bound read-only, created if the judge has not yet);
// under any other sandbox the wrapper is not told of it, since the kernel could write there.
TEST(ProfilerStandby, TheWrapperIsToldOfTheJudgesLaunchersOnlyUnderBwrap) {
  NEED_HARNESS_PYTHON();
  for (const std::string mode : {"off", "bwrap"}) {
    if (mode == "bwrap" && !probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
    standby_case c;
    const std::string shared = c.a.root / "workers/gpu0/launchers/shared";
    c.like.shared_launchers = shared;
    c.like.sandbox_mode = mode;
    profiler_standby sb;
    ASSERT_TRUE(sb.start(c.like, 300)) << mode;
    const auto launcher = read_file((c.standby_dir(1) / "standby_d0_1_wrapper.py").string());
    EXPECT_NE(launcher.find("\"--standby\""), std::string::npos) << launcher;
    if (mode == "bwrap") {
      EXPECT_NE(launcher.find("\"--launchers\", \"" + shared + "\""), std::string::npos) << launcher;
      EXPECT_TRUE(fs::is_directory(shared));
    } else {
      EXPECT_EQ(launcher.find("--launchers"), std::string::npos) << launcher;
    }
    sb.stop();
  }
}

// The next standby starts when one is handed its batch (next_ahead), so that its start-up overlaps
// that batch: on an H200 a profile 3 s after another waited 2 s for a standby started after it.
TEST(ProfilerStandby, TheNextOneStartsBesideTheBatchItFollowsUnlessTurnedOff) {
  NEED_HARNESS_PYTHON();
  for (const bool off : {false, true}) {
    standby_case c(off ? std::map<std::string, std::string>{{"KAGENT_NCU_STANDBY_AHEAD", "0"}}
                       : std::map<std::string, std::string>{});
    profiler_standby sb;
    ASSERT_TRUE(sb.start(c.like, 300));
    ASSERT_TRUE(c.wait_ready(1));
    auto out = profile_kernels({c.a.req}, &sb, true);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(out[0].ok) << out[0].error << "\n" << out[0].output_tail;
    EXPECT_EQ(sb.served(), 1);
    const auto calls = c.fake_calls();
    if (off) {
      EXPECT_FALSE(sb.waiting()) << "KAGENT_NCU_STANDBY_AHEAD=0: the owner starts the next one";
      EXPECT_EQ(sb.started(), 1);
      EXPECT_EQ(calls.size(), 1u);
      continue;
    }
    EXPECT_TRUE(sb.waiting());
    EXPECT_EQ(sb.started(), 2);
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_NE(calls[1]["argv"].dump().find("standby_d0_2"), std::string::npos) << calls[1].dump();
    // It started before the first one's batch ended: before the fake wrote that batch's CSV (it
    // writes it when the program it ran has ended).
    const auto csv = out[0].detail.at("batch").at("csv").get<std::string>();
    struct stat st {};
    ASSERT_EQ(::stat(csv.c_str(), &st), 0) << csv;
    const double written = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
    EXPECT_LT(calls[1]["t"].get<double>(), written) << "the next standby started after the batch it follows";
    // It is a standby like the first (its own directory, the same NVTX filter) and serves the next batch.
    ASSERT_TRUE(c.wait_ready(2));
    auto again = profile_kernels({c.a.req}, &sb, false);  // (the capture's k0 is this kernel)
    ASSERT_TRUE(again[0].ok) << again[0].error;
    EXPECT_EQ(sb.served(), 2);
    EXPECT_FALSE(sb.waiting()) << "no next one after a batch that wants none";
    EXPECT_EQ(c.fake_calls().size(), 2u);
  }
}

TEST(ProfilerStandby, DepthIsTwoOnAGpuOneOnTheCpuOrWhatTheEnvironmentSays) {
  kernel_profile_request r;
  r.device = "cuda";
  EXPECT_EQ(standby_depth(r), 2);
  r.device = "cpu";
  EXPECT_EQ(standby_depth(r), 1);
  for (const auto& [v, n] : std::vector<std::pair<std::string, int>>{{"0", 0}, {"1", 1}, {"3", 3}, {"4", 4}, {"", 1}}) {
    r.env = {{"KAGENT_NCU_STANDBY", v}};
    EXPECT_EQ(standby_depth(r), n) << v;
  }
  r.device = "cuda";
  r.env = {{"KAGENT_NCU_STANDBY", "9"}};  // refused at start-up (check_ncu_standby); never more than one here
  EXPECT_EQ(standby_depth(r), 1);
}

TEST(ProfilerStandby, TwoWaitAtOnceAndABatchGoesToAReadyOneBeforeAnOlderOneStillStarting) {
  NEED_HARNESS_PYTHON();
  standby_case c(std::map<std::string, std::string>{{"KAGENT_NCU_STANDBY", "2"}});
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  EXPECT_EQ(sb.started(), 2);
  EXPECT_EQ(sb.running(), 2);
  ASSERT_TRUE(c.wait_ready(1) && c.wait_ready(2)) << "the standbys never became ready";
  // Asked again while both wait: none more starts.
  ASSERT_TRUE(sb.start(c.like, 300));
  EXPECT_EQ(sb.started(), 2);
  EXPECT_EQ(c.fake_calls().size(), 2u);
  // The older one as if still starting up (no standby.ready yet): the batch goes to the younger, ready one.
  const auto ready1 = c.standby_dir(1) / "standby.ready";
  fs::rename(ready1, c.standby_dir(1) / "standby.ready.hidden");
  auto out = profile_kernels({c.a.req}, &sb, false);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].ok) << out[0].error << "\n" << out[0].output_tail;
  EXPECT_TRUE(fs::exists(c.standby_dir(2) / "batch.json"));
  EXPECT_FALSE(fs::exists(c.standby_dir(1) / "batch.json"));
  EXPECT_EQ(sb.served(), 1);
  EXPECT_EQ(sb.running(), 1) << "the older one still waits; none started after a batch that wants none";
  // Ready again: the next batch goes to it, and the two waiting are made up at once beside it.
  fs::rename(c.standby_dir(1) / "standby.ready.hidden", ready1);
  auto again = profile_kernels({c.a.req}, &sb, true);
  ASSERT_TRUE(again[0].ok) << again[0].error;
  EXPECT_TRUE(fs::exists(c.standby_dir(1) / "batch.json"));
  EXPECT_EQ(sb.served(), 2);
  EXPECT_EQ(sb.started(), 4);
  EXPECT_EQ(sb.running(), 2);
  EXPECT_EQ(c.fake_calls().size(), 4u);
  sb.stop();
  EXPECT_EQ(sb.running(), 0);
  for (int n : {3, 4}) {
    const auto inv = log_lines((c.standby_dir(n) / "invocations.jsonl").string());
    ASSERT_EQ(inv.size(), 1u) << n;
    EXPECT_NE(inv[0].dump().find("stopped while it waited for a batch"), std::string::npos) << inv[0].dump();
  }
}

// ---- the device given back before ncu's report ------------------------------------------------------

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

using env_vars = std::map<std::string, std::string>;

/// Every request of the case under bwrap: the only sandbox whose PID namespace keeps everything the
/// program starts below ncu.
void under_bwrap(standby_case& c) {
  for (auto* r : {&c.a.req, &c.b, &c.like}) r->sandbox_mode = "bwrap";
}

/// When the fake ncu saw its program end and wrote its report (ncu_report.jsonl in its directory).
nlohmann::json report_times(const fs::path& standby_dir) {
  const auto lines = log_lines(standby_dir / "ncu_report.jsonl");
  return lines.empty() ? nlohmann::json{} : lines.back();
}

/// An attack's batch (kernel b's code starts with what the attack runs) through a ready standby under
/// bwrap: the device comes back only after the attack wrote TMPDIR/`marker` (the time it wrote in
/// it), still before ncu's report, and both kernels are profiled.
void expect_the_device_kept_until(standby_case& c, const std::string& marker) {
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  ASSERT_TRUE(c.wait_ready(1));
  auto started = start_profile_kernels(std::vector<kernel_profile_request>{c.a.req, c.b}, &sb, false);
  const double returned = now_s();
  const auto written = c.standby_dir(1) / "tmp" / marker;
  ASSERT_TRUE(fs::exists(written)) << "the device was given back while the kernel's code ran";
  EXPECT_LE(std::stod(read_file(written.string())), returned);
  // Still before the report: what kept the device was the kernel's code, not ncu.
  ASSERT_TRUE(started.tail);
  EXPECT_FALSE(fs::exists(c.standby_dir(1) / "ncu_report.jsonl"));
  auto out = started.tail->finish();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) EXPECT_TRUE(o.ok) << o.error;
}

} // namespace

// ncu writes its report after the profiled program has exited (about 1 s a profile on an H200), and
// the device does nothing for it: the device is given back as soon as the program is gone, and the
// report is finished by whoever holds the tail.
TEST(ProfilerStandby, TheDeviceIsGivenBackWhenItsProgramHasExitedBeforeNcusReport) {
  NEED_HARNESS_PYTHON();
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  standby_case c(env_vars{{"FAKE_NCU_REPORT_S", "1.5"}});
  under_bwrap(c);
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  ASSERT_TRUE(c.wait_ready(1));
  auto started = start_profile_kernels(std::vector<kernel_profile_request>{c.a.req, c.b}, &sb, false);
  const double returned = now_s();
  ASSERT_TRUE(started.tail) << "the device was not given back before the report";
  EXPECT_TRUE(started.outcomes.empty());
  EXPECT_FALSE(fs::exists(c.standby_dir(1) / "ncu_report.jsonl")) << "given back only after the report";
  EXPECT_GT(started.tail->held_s(), 0);
  auto out = started.tail->finish();
  ASSERT_EQ(out.size(), 2u);
  for (const auto& o : out) {
    ASSERT_TRUE(o.ok) << o.error << "\n" << o.output_tail;
    EXPECT_FALSE(o.redo);
    EXPECT_GT(o.report_s, 0) << "the report's seconds are not the device's";
    ASSERT_FALSE(o.records.empty());
    EXPECT_NE(o.records.back().verdict.find("device was given back"), std::string::npos) << o.records.back().verdict;
  }
  EXPECT_EQ(out[0].kernel_name, "matvec_kernel");
  EXPECT_EQ(out[1].kernel_name, "matvec_splitk_kernel");
  const auto t = report_times(c.standby_dir(1));
  ASSERT_FALSE(t.is_null());
  EXPECT_LE(t["program_ended"].get<double>(), returned) << "given back while the program ran";
  EXPECT_GT(t["report_written"].get<double>(), returned);
  EXPECT_NEAR(out[0].detail.at("batch").at("report_s").get<double>(), out[0].report_s, 1e-9);
}

// Not given back early with KAGENT_PROFILE_RELEASE=0: the outcomes are complete at once. (Outside a
// PID namespace of its own it is never given back either: every other test here runs without bwrap and
// gets its outcomes from profile_kernels at once.)
TEST(ProfilerStandby, TheDeviceIsKeptToTheEndWhenTurnedOff) {
  NEED_HARNESS_PYTHON();
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  standby_case c(env_vars{{"FAKE_NCU_REPORT_S", "1"}, {"KAGENT_PROFILE_RELEASE", "0"}});
  under_bwrap(c);
  profiler_standby sb;
  ASSERT_TRUE(sb.start(c.like, 300));
  ASSERT_TRUE(c.wait_ready(1));
  auto started = start_profile_kernels(std::vector<kernel_profile_request>{c.a.req}, &sb, false);
  EXPECT_FALSE(started.tail) << "turned off";
  ASSERT_EQ(started.outcomes.size(), 1u);
  EXPECT_TRUE(started.outcomes[0].ok) << started.outcomes[0].error;
  EXPECT_EQ(started.outcomes[0].report_s, 0);
  EXPECT_TRUE(fs::exists(c.standby_dir(1) / "ncu_report.jsonl"));
}

// The attack: a kernel whose module leaves a process behind when the wrapper exits (a new session, and
// named "ncu" like the profiler), which waits for the wrapper's exit and then runs on. The device is not
// given back while it lives: the rule looks at executables and scripts, not at names a process sets.
TEST(ProfilerStandby, AProcessTheKernelLeavesBehindKeepsTheDeviceUntilItEnds) {
  NEED_HARNESS_PYTHON();
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  standby_case c(env_vars{{"FAKE_NCU_REPORT_S", "3"}});
  under_bwrap(c);
  c.b.code = R"(import ctypes, os, time
_parent = os.getpid()
if os.fork() == 0:
    os.setsid()
    try:
        ctypes.CDLL(None).prctl(15, b"ncu", 0, 0, 0)
    except Exception:
        pass
    while os.getppid() == _parent:
        time.sleep(0.02)
    time.sleep(1.5)
    with open(os.path.join(os.environ.get("TMPDIR", "."), "left_behind_ended"), "w") as f:
        f.write(repr(time.time()))
    os._exit(0)
)" + c.b.code;
  expect_the_device_kept_until(c, "left_behind_ended");
}

// The attack on the standby's fast exit (harness/profile_wrapper.py ends with os._exit once its batch
// is done): a kernel that replaces os._exit with a function that runs on for 1.5 s before it ends the
// process. The device is still given back only once the program is gone, after that work.
TEST(ProfilerStandby, AKernelThatReplacesTheFastExitKeepsTheDeviceUntilItsProcessEnds) {
  NEED_HARNESS_PYTHON();
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  standby_case c(env_vars{{"FAKE_NCU_REPORT_S", "2"}});
  under_bwrap(c);
  c.b.code = R"(import os, time
_real_exit = os._exit
def _late_exit(code):
    time.sleep(1.5)
    with open(os.path.join(os.environ.get("TMPDIR", "."), "late_exit"), "w") as f:
        f.write(repr(time.time()))
    _real_exit(code)
os._exit = _late_exit
)" + c.b.code;
  expect_the_device_kept_until(c, "late_exit");
}
