// A device's profiles in a real actor system: its gpu_worker (which owns the device's analysis mode)
// and the device actor it spawns, with the fake rocprofv3 / ncu and a small recorder actor standing in
// for the manager: replies, profiling_failed, synthetic mode (ROCm only), budgets, pinning.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <caf/all.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "actors/actors.hpp"
#include "actors/device.hpp"
#include "actors/gpu_worker.hpp"
#include "platform/common/stop.hpp"
#include "tests/support/actor_system.hpp"
#include "runner_support.hpp"

using namespace kagent;
using namespace kagent::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using failures_atom = caf::atom_constant<caf::atom("failures")>;

using cfg_t = kagent::test::actor_test_config;

struct recorder_state {
  std::vector<profiling_failed> got;
  static inline const char* name = "test_manager";
};

// Stands in for the manager: keeps every profiling_failed, and lists them on request.
caf::behavior recorder(caf::stateful_actor<recorder_state>* self) {
  return {
      [=](const profiling_failed& f) { self->state.got.push_back(f); },
      [=](failures_atom) {
        std::vector<std::string> out;
        for (const auto& f : self->state.got)
          out.push_back(fmt::format("{}|{}|{}|{}|{}{}", f.gpu_id, f.candidate_id, f.platform, f.invocation, f.reason,
                                    f.turned_synthetic ? "|synthetic" : ""));
        return out;
      },
  };
}

struct actor_case {
  scratch_dir root{"actor"};
  std::shared_ptr<run_context> ctx = std::make_shared<run_context>();
  cfg_t cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  caf::actor manager;
  caf::actor profiler;
  int device_id = 2;

  /// `platform` is the profiler component's; the fakes' variables go into the run's child environment.
  actor_case(const std::string& platform, const std::map<std::string, std::string>& vars) {
    ctx->cfg.platform.profiler = platform;
    ctx->sandbox_mode = "off";  // the fakes append to FAKE_*_LOG outside the profile's sandbox
    ctx->install_root = KAGENT_SOURCE_DIR;
    ctx->problem_path = matvec_dir() + "/problem.py";
    ctx->python = "python3";
    ctx->run_path = root.str();
    ctx->gpu_name = platform == "rocm" ? "AMD Instinct MI300X" : platform == "nvidia" ? "NVIDIA H200" : "";
    ctx->child_env = fake_env(vars);
  }
  void start() {
    manager = sys.spawn(recorder);
    profiler = sys.spawn(gpu_worker_actor, context_ptr(ctx), 0, device_id, llm_api{}, manager, device_actor_type{});
  }
  ~actor_case() {
    self->send_exit(profiler, caf::exit_reason::user_shutdown);
    self->send_exit(manager, caf::exit_reason::user_shutdown);
  }

  profile request(const std::string& candidate, double budget_s = 0) {
    profile p;
    p.candidate_id = candidate;
    p.code = matvec_code();
    p.label = "sol";
    p.work_dir = root / candidate;
    p.profile_id = candidate + "_sol";
    p.budget_s = budget_s;
    return p;
  }
  profile_result ask(const profile& p) {
    profile_result out;
    self->request(profiler, 60s, p)
        .receive([&](const profile_result& r) { out = r; },
                 [&](caf::error& e) { ADD_FAILURE() << "profile request failed: " << sys.render(e); });
    return out;
  }
  std::vector<std::string> failures() {
    std::vector<std::string> out;
    self->request(manager, 10s, failures_atom::value)
        .receive([&](const std::vector<std::string>& v) { out = v; },
                 [&](caf::error& e) { ADD_FAILURE() << sys.render(e); });
    return out;
  }
  std::string log_path() const { return root / "fake.log"; }
  size_t tool_runs() const { return log_lines(log_path()).size(); }
};

std::map<std::string, std::string> rocprof_vars(const actor_case* c, const std::string& fixture_dir,
                                                const std::map<std::string, std::string>& extra = {}) {
  std::map<std::string, std::string> v{{"FAKE_ROCPROF_FIXTURES", fixture_dir},
                                       {"FAKE_ROCPROF_LOG", c->root / "fake.log"},
                                       {"FAKE_ROCPROF_RUN_PROGRAM", "0"}};
  for (const auto& [k, val] : extra) v[k] = val;
  return v;
}

/// A copy of a fixture directory, so that a test can add or remove its `faults` file between profiles.
double now_epoch_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string fixture_copy(const scratch_dir& root, const std::string& name) {
  fs::path dst = root.path / ("fixture-" + name);
  fs::create_directories(dst);
  for (const auto& e : fs::directory_iterator(fixture(name))) fs::copy_file(e.path(), dst / e.path().filename());
  return dst.string();
}

} // namespace

TEST(ProfilerActor, RocmSuccessRepliesWithMetricsAndRoofline) {
  actor_case c("rocm", {});
  c.ctx->child_env = fake_env(rocprof_vars(&c, fixture("rocm_mi300x_matvec")));
  c.start();
  auto r = c.ask(c.request("r1_c0"));
  EXPECT_TRUE(r.available);
  ASSERT_TRUE(r.ok) << r.error << "\n" << r.output_tail;
  EXPECT_EQ(r.candidate_id, "r1_c0");
  EXPECT_EQ(r.profile.kernel_name, "matvec_kernel");
  EXPECT_EQ(r.profile.label, "sol");
  EXPECT_EQ(r.profile.platform, "rocm");
  EXPECT_DOUBLE_EQ(r.profile.metrics.at("duration_ms"), 1.2);
  ASSERT_TRUE(r.profile.roofline);
  EXPECT_NEAR(r.profile.roofline->memory_sol_pct.value(), 67.53, 0.01);
  EXPECT_TRUE(r.error.empty());
  EXPECT_GT(r.wall_s, 0);
  // Everything under <work_dir>/profile_<profile_id>/.
  const std::string dir = c.root / "r1_c0/profile_r1_c0_sol";
  EXPECT_TRUE(fs::is_regular_file(dir + "/metrics.json"));
  EXPECT_EQ(log_lines(dir + "/invocations.jsonl").size(), 8u);  // stats, six counter groups, the MFMA pass
  EXPECT_TRUE(c.failures().empty());
}

TEST(ProfilerActor, RocmFailureTellsTheManagerAndTurnsTheSessionSynthetic) {
  actor_case c("rocm", {});
  c.ctx->child_env = fake_env(rocprof_vars(&c, fixture("rocm_mi300x_matvec"), {{"FAKE_ROCPROF_FAULT_STATS", "exit_nonzero"}}));
  c.start();
  auto r = c.ask(c.request("r1_c0"));
  EXPECT_TRUE(r.available);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, "rocprof stats pass failed (rc=3)");
  EXPECT_EQ(r.invocation, "stats pass");
  EXPECT_NE(r.output_tail.find("fault injected"), std::string::npos) << r.output_tail;
  EXPECT_TRUE(r.profile.metrics.empty());
  EXPECT_EQ(c.failures(), std::vector<std::string>{"2|r1_c0|rocm|stats pass|rocprof stats pass failed (rc=3)|synthetic"})
      << "the worker turned the device synthetic and told the manager so";
  const size_t runs = c.tool_runs();
  EXPECT_EQ(runs, 1u);

  // Every later profile of this session: synthetic, no tool, no second supervision message.
  for (const char* cand : {"r2_c0", "r2_c1"}) {
    auto s = c.ask(c.request(cand));
    EXPECT_TRUE(s.available);
    EXPECT_FALSE(s.ok);
    EXPECT_TRUE(s.synthetic);
    EXPECT_FALSE(s.abandoned);
    EXPECT_EQ(s.error.rfind("synthetic mode", 0), 0u) << s.error;
    EXPECT_NE(s.error.find("rocprof stats pass failed (rc=3)"), std::string::npos) << s.error;
    EXPECT_EQ(s.profile.platform, "rocm");
  }
  EXPECT_EQ(c.tool_runs(), runs);
  EXPECT_EQ(c.failures().size(), 1u);
  EXPECT_FALSE(fs::exists(c.root / "r2_c0/profile_r2_c0_sol"));
}

TEST(ProfilerActor, NvidiaFailureDoesNotGoSyntheticAndTheNextProfileRuns) {
  actor_case c("nvidia", {});
  const std::string fx = fixture_copy(c.root, "ncu_h200_matvec");
  write_file(fx + "/faults", "exit_nonzero\n");
  // The fresh command's failures (no standby: KAGENT_NCU_STANDBY=0; test_profile_standby.cpp has those).
  c.ctx->child_env = fake_env({{"FAKE_NCU_FIXTURES", fx},
                               {"FAKE_NCU_LOG", c.log_path()},
                               {"FAKE_NCU_RUN_PROGRAM", "0"},
                               {"KAGENT_NCU_STANDBY", "0"}});
  c.start();
  auto r = c.ask(c.request("r1_c0"));
  EXPECT_TRUE(r.available);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.invocation, "ncu");
  EXPECT_EQ(r.error.rfind("ncu failed with return code 1", 0), 0u) << r.error;
  ASSERT_EQ(c.failures().size(), 1u);
  EXPECT_NE(c.failures()[0].find("|nvidia|ncu|ncu failed with return code 1"), std::string::npos);
  EXPECT_EQ(c.failures()[0].find("|synthetic"), std::string::npos) << "NVIDIA never turns synthetic by itself";

  fs::remove(fx + "/faults");
  auto ok = c.ask(c.request("r2_c0"));
  ASSERT_TRUE(ok.ok) << ok.error;
  EXPECT_EQ(ok.profile.platform, "nvidia");
  EXPECT_EQ(ok.profile.kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(ok.profile.roofline.value().memory_sol_pct.value(), 12.41);
  EXPECT_EQ(c.tool_runs(), 2u);
  EXPECT_EQ(c.failures().size(), 1u);
}

TEST(ProfilerActor, SyntheticModeMessageStopsEveryLaterToolRun) {
  actor_case c("nvidia", {});
  c.ctx->child_env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_h200_matvec")},
                               {"FAKE_NCU_LOG", c.log_path()},
                               {"FAKE_NCU_RUN_PROGRAM", "0"},
                               {"KAGENT_NCU_STANDBY", "0"}});
  c.start();
  ASSERT_TRUE(c.ask(c.request("r1_c0")).ok);
  c.self->send(c.profiler, mode_atom::value, analysis_mode::synthetic);
  auto s = c.ask(c.request("r2_c0"));
  EXPECT_TRUE(s.available);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.error.rfind("synthetic mode", 0), 0u) << s.error;
  EXPECT_EQ(c.tool_runs(), 1u);
  EXPECT_TRUE(c.failures().empty());
}

TEST(ProfilerActor, PlatformsWithoutAProfilerAnswerNotAvailable) {
  for (const char* platform : {"cpu", "noop"}) {
    actor_case c(platform, {});
    c.ctx->child_env = fake_env(rocprof_vars(&c, fixture("rocm_mi300x_matvec")));
    c.start();
    auto r = c.ask(c.request("r1_c0"));
    EXPECT_FALSE(r.available) << platform;
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.profile.platform, platform);
    EXPECT_EQ(c.tool_runs(), 0u);
    EXPECT_TRUE(c.failures().empty());
  }
}

TEST(ProfilerActor, BudgetComesFromTheRequestThenTheConfigThenTheCandidateTimeout) {
  actor_case c("rocm", {});
  // The configured binary path, with the fakes off PATH.
  auto vars = rocprof_vars(&c, fixture("rocm_mi300x_matvec"));
  c.ctx->child_env = fake_env(vars);
  c.ctx->child_env["PATH"] = "/usr/bin:/bin";
  c.ctx->cfg.pkwargs.rocprof_bin_path = fakes_dir() + "/rocprofv3";
  c.ctx->cfg.platform.profiler = "rocm";
  c.ctx->cfg.candidate_timeout_s = 1000;  // default budget: half of it
  c.ctx->cfg.profile_budget_s = 0;
  c.start();
  auto budget_of = [&](const std::string& cand) {
    return nlohmann::json::parse(read_file(c.root / (cand + "/profile_" + cand + "_sol/metrics.json")))
        .at("budget_s")
        .get<double>();
  };
  ASSERT_TRUE(c.ask(c.request("a", 0)).ok);
  EXPECT_DOUBLE_EQ(budget_of("a"), 500);
  ASSERT_TRUE(c.ask(c.request("b", 90)).ok);
  EXPECT_DOUBLE_EQ(budget_of("b"), 90);
  auto lines = log_lines(c.root / "b/profile_b_sol/invocations.jsonl");
  ASSERT_FALSE(lines.empty());
  // The stats pass, first of 8 commands (stats, 6 groups, MFMA), gets what is left of the 90 s less
  // half an even split for each later pass: about 89.5 - 7 * 89.5 / 16 = 50.3 s (the old worst-case
  // share was 8 s), and never more than the budget.
  const double t0 = lines[0].at("timeout_s").get<double>();
  EXPECT_GT(t0, 45.0);
  EXPECT_LE(t0, 90.0 - 0.5);
  EXPECT_EQ(lines[0].at("argv").at(0), fakes_dir() + "/rocprofv3");
}

TEST(ProfilerActor, ConfiguredBudgetAndThePinnedEnvironmentReachTheTool) {
  actor_case c("rocm", {});
  // A stand-in interpreter that records the environment the profiled program gets.
  const std::string seen = c.root / "seen.txt";
  const std::string py = c.root / "fake-python";
  write_file(py, "#!/bin/sh\necho \"HIP=${HIP_VISIBLE_DEVICES-unset} CUDA=${CUDA_VISIBLE_DEVICES-unset} "
                 "TMPDIR=$TMPDIR\" >> " + seen + "\n");
  fs::permissions(py, fs::perms::owner_all);
  auto vars = rocprof_vars(&c, fixture("rocm_mi300x_matvec"), {{"FAKE_ROCPROF_RUN_PROGRAM", "1"}});
  vars["CUDA_VISIBLE_DEVICES"] = "0";
  c.ctx->child_env = fake_env(vars);
  c.ctx->python = py;
  c.ctx->vendor = "rocm";
  c.ctx->cfg.profile_budget_s = 45;
  c.start();
  auto r = c.ask(c.request("r1_c0"));
  ASSERT_TRUE(r.ok) << r.error;
  const std::string dir = c.root / "r1_c0/profile_r1_c0_sol";
  auto lines = read_file(seen);
  EXPECT_NE(lines.find("HIP=2 CUDA=unset TMPDIR=" + dir + "/tmp\n"), std::string::npos) << lines;
  auto m = nlohmann::json::parse(read_file(dir + "/metrics.json"));
  EXPECT_DOUBLE_EQ(m.at("budget_s").get<double>(), 45);
}

TEST(ProfilerActor, AProfileOfATimedOutCandidateIsKilledAndIsNoProfilerFailure) {
  // The candidate's deadline passes while rocprofv3 hangs: cancel_work ends the profile at once, the
  // manager hears of no profiler failure, the device stays in profiled mode and profiles the next
  // candidate as usual.
  clear_cancelled_for_tests();
  actor_case c("rocm", {});
  const std::string fx = fixture_copy(c.root, "rocm_mi300x_matvec");
  write_file(fx + "/faults", "stats hang\n");
  c.ctx->child_env = fake_env(rocprof_vars(&c, fx));
  c.start();
  std::thread deadline([&] {
    for (int i = 0; i < 1000 && c.tool_runs() == 0; ++i) std::this_thread::sleep_for(10ms);
    std::this_thread::sleep_for(200ms);
    cancel_work("r1_c0");
  });
  auto r = c.ask(c.request("r1_c0", 500));
  deadline.join();
  EXPECT_TRUE(r.available);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.abandoned);
  EXPECT_FALSE(r.synthetic);
  EXPECT_EQ(r.error.rfind("profile abandoned", 0), 0u) << r.error;
  EXPECT_TRUE(c.failures().empty());

  fs::remove(fx + "/faults");
  auto ok = c.ask(c.request("r2_c0"));
  ASSERT_TRUE(ok.ok) << ok.error;
  EXPECT_TRUE(c.failures().empty());
  clear_cancelled_for_tests();
}

TEST(ProfilerActor, NvidiaProfilesAskedTogetherShareOneProfilerProcess) {
  actor_case c("nvidia", {});
  c.ctx->child_env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_batch_matvec")},
                               {"FAKE_NCU_LOG", c.log_path()},
                               {"FAKE_NCU_RUN_PROGRAM", "0"},
                               {"KAGENT_NCU_STANDBY", "0"}});
  c.start();
  // A round's two new parents: both requests are in the worker's mailbox before it dispatches.
  auto a = c.request("r1_c0");
  auto b = c.request("r1_c3");
  b.code = "import triton\n\n@triton.jit\ndef matvec_splitk_kernel(x):\n    pass\n\n"
           "def kernel_function(x):\n    matvec_splitk_kernel[(1,)](x)\n    return x\n";
  c.self->send(c.profiler, a);
  c.self->send(c.profiler, b);
  std::map<std::string, profile_result> by_id;
  for (int i = 0; i < 2; ++i)
    c.self->receive([&](const profile_result& r) { by_id[r.candidate_id] = r; },
                    caf::after(60s) >> [] { ADD_FAILURE() << "no answer"; });
  std::vector<profile_result> got{by_id["r1_c0"], by_id["r1_c3"]};
  ASSERT_TRUE(got[0].ok) << got[0].error;
  ASSERT_TRUE(got[1].ok) << got[1].error;
  EXPECT_EQ(got[0].candidate_id, "r1_c0");
  EXPECT_EQ(got[0].profile.kernel_name, "matvec_kernel");
  EXPECT_EQ(got[1].candidate_id, "r1_c3");
  EXPECT_EQ(got[1].profile.kernel_name, "matvec_splitk_kernel");
  EXPECT_DOUBLE_EQ(got[1].profile.metrics.at("gpu__time_duration.sum"), 1004512);
  EXPECT_EQ(c.tool_runs(), 1u) << "one ncu process for both";
  EXPECT_TRUE(c.failures().empty());
  // One at a time afterwards: a profile of its own.
  auto alone = c.ask(c.request("r2_c0"));
  ASSERT_TRUE(alone.ok) << alone.error;
  EXPECT_EQ(c.tool_runs(), 2u);
}

TEST(ProfilerActor, ANvidiaDeviceStartsItsNextProfilerAheadAndAProfileFindsItWaiting) {
  // The fake ncu runs the real wrapper here (standby mode, on the CPU): the device actor starts a
  // standby when it starts, the profile goes to it, and the next one is started at once.
  const auto py = std::string(KAGENT_SOURCE_DIR) + "/.venv/bin/python";
  if (!run_cmd({py, "-c", "import torch, triton"}, current_environment(), "", 120).ok())
    GTEST_SKIP() << py << " cannot import torch and triton";
  actor_case c("nvidia", {});
  c.ctx->python = py;
  c.ctx->child_env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_standby_matvec")},
                               {"FAKE_NCU_LOG", c.log_path()},
                               {"FAKE_NCU_RUN_PROGRAM", "1"}});
  c.start();
  const fs::path first = c.root.path / "profiles" / "standby_d2_1";
  for (int i = 0; i < 2400 && !fs::exists(first / "standby.ready"); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(fs::exists(first / "standby.ready")) << "no standby became ready";
  ASSERT_EQ(c.tool_runs(), 1u);
  auto r = c.ask(c.request("r1_c0"));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.profile.kernel_name, "matvec_kernel");
  EXPECT_DOUBLE_EQ(r.profile.metrics.at("gpu__time_duration.sum"), 2389024);
  const auto inv = log_lines((c.root.path / "r1_c0" / "profile_r1_c0_sol" / "invocations.jsonl").string());
  ASSERT_EQ(inv.size(), 1u);
  EXPECT_EQ(inv[0]["name"], "ncu (standby, batch of 1)");
  EXPECT_TRUE(fs::exists(first / "k0_kernel.py"));
  // The next profile's standby is on its way.
  for (int i = 0; i < 200 && c.tool_runs() < 2; ++i) std::this_thread::sleep_for(50ms);
  const auto calls = log_lines(c.log_path());
  ASSERT_EQ(calls.size(), 2u);
  for (const auto& call : calls) {
    const auto argv = call["argv"].get<std::vector<std::string>>();
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--nvtx-include"), argv.end());
  }
  EXPECT_TRUE(fs::exists(c.root.path / "profiles" / "standby_d2_2"));
  // ... and was started while the first one ran its batch, not after it.
  struct stat st {};
  const auto csv = (first / "standby_d2_1_ncu.csv").string();  // the fake writes it when its program ended
  ASSERT_EQ(::stat(csv.c_str(), &st), 0) << csv;
  EXPECT_LT(calls[1]["t"].get<double>(), static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9)
      << "the next standby started after the batch it follows";
  // The final profile of a run goes to that standby, and no standby follows it (no profile does).
  const fs::path second = c.root.path / "profiles" / "standby_d2_2";
  for (int i = 0; i < 2400 && !fs::exists(second / "standby.ready"); ++i) std::this_thread::sleep_for(50ms);
  auto fin = c.request("r2_c3");
  fin.label = "final";
  fin.profile_id = "r2_c3_final";
  auto f = c.ask(fin);
  ASSERT_TRUE(f.ok) << f.error;
  EXPECT_TRUE(fs::exists(second / "k0_kernel.py"));
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(c.tool_runs(), 2u) << "a standby started after the final profile";
  EXPECT_FALSE(fs::exists(c.root.path / "profiles" / "standby_d2_3"));
  EXPECT_TRUE(c.failures().empty());
}

/// A device actor of its own under bwrap, the fake ncu running the real wrapper and writing its report
/// `report_s` after the program's exit; returns once its first standby is ready (false: none became).
bool released_device(actor_case& c, const std::string& py, const std::string& report_s, device_actor_type& device,
                     fs::path& first) {
  c.ctx->python = py;
  c.ctx->sandbox_mode = "bwrap";  // (the fake's log is outside the sandbox: its report file says when)
  c.ctx->child_env = fake_env({{"FAKE_NCU_FIXTURES", fixture("ncu_standby_matvec")},
                               {"FAKE_NCU_RUN_PROGRAM", "1"},
                               {"FAKE_NCU_REPORT_S", report_s}});
  device = c.sys.spawn<caf::detached>(device_actor, context_ptr(c.ctx), c.device_id);
  first = c.root.path / "profiles" / "standby_d2_1";
  for (int i = 0; i < 2400 && !fs::exists(first / "standby.ready"); ++i) std::this_thread::sleep_for(50ms);
  return fs::exists(first / "standby.ready");
}

// The device goes to its next request once a profile's program has exited, while ncu still writes
// that profile's report (under bwrap: start_profile_kernels' tail, finished by a helper actor that
// answers the profile). The next request here is an evaluation of a candidate whose deadline passed
// (answered at once, without the evaluator): it is answered after the program's exit (the device's
// mailbox is still one thing at a time) and before the report, and the profile comes back whole.
TEST(ProfilerActor, ADeviceTakesItsNextRequestWhileNcuWritesTheReportOfTheLast) {
  const auto py = std::string(KAGENT_SOURCE_DIR) + "/.venv/bin/python";
  if (!run_cmd({py, "-c", "import torch, triton"}, current_environment(), "", 120).ok())
    GTEST_SKIP() << py << " cannot import torch and triton";
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  actor_case c("nvidia", {});
  device_actor_type device;
  fs::path first;
  ASSERT_TRUE(released_device(c, py, "2.5", device, first)) << "no standby became ready";
  profile_result r1;
  double profiled_at = 0;
  std::thread asker([&] {  // the profile, asked from an actor of its own
    caf::scoped_actor other{c.sys};
    other->request(device, 120s, c.request("r1_c0"))
        .receive([&](const profile_result& r) { r1 = r; },
                 [&](caf::error& e) { ADD_FAILURE() << "profile: " << c.sys.render(e); });
    profiled_at = now_epoch_s();
  });
  for (int i = 0; i < 2400 && !fs::exists(first / "batch.json"); ++i) std::this_thread::sleep_for(10ms);
  cancel_work("r1_c9");
  evaluation e;
  c.self->request(device, 120s, evaluate{"r1_c9", "", device_mode::verify, ""})
      .receive([&](const evaluation& got) { e = got; }, [&](caf::error& err) { ADD_FAILURE() << c.sys.render(err); });
  const double evaluated_at = now_epoch_s();
  asker.join();
  EXPECT_EQ(e.error, "cancelled before it reached the device");
  ASSERT_TRUE(r1.ok) << r1.error;
  EXPECT_EQ(r1.profile.kernel_name, "matvec_kernel");
  const auto report = log_lines(first / "ncu_report.jsonl");
  ASSERT_EQ(report.size(), 1u);
  EXPECT_GE(evaluated_at, report[0]["program_ended"].get<double>()) << "answered while the program ran";
  EXPECT_LT(evaluated_at, report[0]["report_written"].get<double>()) << "the device waited for the report";
  EXPECT_GE(profiled_at, report[0]["report_written"].get<double>());
  // The profile's device seconds leave its report out; the batch's record says when it was given back.
  const auto batch = log_lines(first / "invocations.jsonl");
  ASSERT_FALSE(batch.empty());
  EXPECT_NE(batch.back()["verdict"].get<std::string>().find("device was given back"), std::string::npos)
      << batch.back().dump().substr(0, 3000);
  EXPECT_LT(r1.wall_s, batch.back()["wall_s"].get<double>());
  c.self->send_exit(device, caf::exit_reason::user_shutdown);
}

// A kernel a batch did not deliver, when the device was given back before the report: the helper sends
// it to the device again (its mailbox keeps the device exclusive) and answers with that profile, whose
// file starts with the batch's record. The captured batch has rows of matvec_kernel for its first
// kernel only: the second of two matvec kernels gets none of its own.
TEST(ProfilerActor, AKernelTheReleasedBatchDidNotDeliverIsProfiledAgainOnTheDevice) {
  const auto py = std::string(KAGENT_SOURCE_DIR) + "/.venv/bin/python";
  if (!run_cmd({py, "-c", "import torch, triton"}, current_environment(), "", 120).ok())
    GTEST_SKIP() << py << " cannot import torch and triton";
  if (!probe_bwrap().ok) GTEST_SKIP() << "bwrap does not work here: " << probe_bwrap().why;
  actor_case c("nvidia", {});
  device_actor_type device;
  fs::path first;
  ASSERT_TRUE(released_device(c, py, "1", device, first)) << "no standby became ready";
  profile_batch b{{c.request("r1_c0"), c.request("r1_c1")}};
  std::vector<profile_result> rs;
  c.self->request(device, 300s, b).receive([&](std::vector<profile_result>& got) { rs = std::move(got); },
                                           [&](caf::error& e) { ADD_FAILURE() << c.sys.render(e); });
  ASSERT_EQ(rs.size(), 2u);
  for (const auto& r : rs) EXPECT_TRUE(r.ok) << r.candidate_id << ": " << r.error;
  const auto batch = log_lines(first / "invocations.jsonl");
  ASSERT_FALSE(batch.empty());
  // The capture's second range is another kernel's (matvec_splitk_kernel): only the first of these two
  // is delivered by the batch.
  EXPECT_NE(batch.back()["verdict"].get<std::string>().find("1 of 2 kernels attributed"), std::string::npos)
      << batch.back()["verdict"];
  EXPECT_NE(batch.back()["verdict"].get<std::string>().find("device was given back"), std::string::npos)
      << batch.back()["verdict"];
  for (const std::string id : {"r1_c1"}) {
    const auto again = log_lines((c.root.path / id / ("profile_" + id + "_sol") / "invocations.jsonl").string());
    ASSERT_GE(again.size(), 2u) << id;
    EXPECT_EQ(again[0]["name"], "ncu (standby, batch of 2)") << id;
    EXPECT_NE(again[0]["verdict"].get<std::string>().find("profiled again on its own, on the device"), std::string::npos)
        << again[0]["verdict"];
    EXPECT_NE(again[1]["name"].get<std::string>().find("ncu"), std::string::npos) << again[1].dump().substr(0, 500);
  }
  c.self->send_exit(device, caf::exit_reason::user_shutdown);
}
