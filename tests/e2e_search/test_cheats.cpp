// Trusted evaluation end to end (issue 11): a real beam search on the cpu platform whose LLM replies
// are the cheating kernels of tests/cheats/matvec (one candidate each, plus honest controls). No
// cheat may be verified, every control must be, the honest controls rank as they really are, the
// best kernel is honest, and an honest kernel evaluated after the cheats measures what it measured
// before them. Also the user's own test.py: it decides before a candidate becomes the best, and a
// starting kernel that fails it ends the run with exit 1 and the test's output.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>
#include <optional>
#include <regex>
#include <set>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

namespace {

const std::string kMatvec = source("examples/optimize_01_matvec");
const std::string kCheats = source("tests/cheats/matvec");
const kagent::env_map kEnv{{"KAGENT_INJECT_FAULT", ""}};

std::string expect_of(const std::string& code) {
  std::smatch m;
  static const std::regex re("# expect: (\\w+)");
  return std::regex_search(code, m, re) ? m[1].str() : "any";
}

std::string name_of(const std::string& code) {
  std::smatch m;
  static const std::regex re("# corpus: ([A-Za-z0-9_.-]+)");
  return std::regex_search(code, m, re) ? m[1].str() : "initial";
}

std::string reply_with(const std::string& code) {
  return "Here is the kernel.\n\n```python\n" + code + "\n```\n";
}

std::string directions(int n) {
  nlohmann::json a = nlohmann::json::array();
  for (int i = 1; i <= n; ++i)
    a.push_back({{"category", "memory"},
                 {"summary", "direction " + std::to_string(i)},
                 {"reasoning", "corpus"},
                 {"root_causes", nlohmann::json::array({{{"cause", "c"}, {"evidence", nlohmann::json::array()},
                                                         {"fixes", nlohmann::json::array({{{"fix", "f"}, {"rationale", "r"}}})}}})}});
  return a.dump(2);
}

const char* kReflexion = R"({"was_diagnosis_correct": true, "was_fix_effective": true, "expected_outcome": "e",
"actual_outcome": "a", "reasoning": "r", "lessons": [], "avoid_patterns": [], "try_patterns": []})";

/// A private copy of the matvec kernel directory with a replay set serving `kernels` in order.
fs::path kernel_dir_with(const scratch& s, const std::vector<std::string>& kernels, const std::string& test_py = "") {
  const auto dir = s.dir / "kernel";
  fs::create_directories(dir / "replay");
  for (const char* f : {"input.py", "problem.py", "test.py"}) fs::copy_file(fs::path(kMatvec) / f, dir / f);
  if (!test_py.empty()) s.write("kernel/test.py", test_py);
  s.write("kernel/replay/bottleneck_001.md", directions(static_cast<int>(kernels.size())));
  for (size_t i = 0; i < kernels.size(); ++i)
    s.write(fmt::format("kernel/replay/optimize_{:03}.md", i + 1), reply_with(kernels[i]));
  s.write("kernel/replay/reflexion_001.md", std::string("<!-- replay\n# every reflexion\n-->\n") + kReflexion);
  return dir;
}

/// One candidate per kernel in one round: `candidates` directions of one sample each, or, beyond the
/// 32 directions a config may ask for, fewer directions of several samples (as many replies in all).
std::pair<int, int> fanout(int candidates) {
  for (int samples = 1; samples <= 32; ++samples)
    if (candidates % samples == 0 && candidates / samples <= 32) return {candidates / samples, samples};
  ADD_FAILURE() << candidates << " kernels: no split into at most 32 directions of equal samples; add a kernel";
  return {32, 1};
}

std::string config(int candidates, const std::string& extra = "") {
  const auto [directions, samples] = fanout(candidates);
  return fmt::format(R"(strategy: beam_search
num_workers: 2
max_rounds: 1
strategy_config:
  num_top_kernels: 1
  num_bottlenecks: {}
  samples_per_prompt: {}
platform: cpu
target_platform: cpu
benchmark_warmup: 5
benchmark_repeat: 8
max_refine_attempts: 0
compile_reference: false
llm:
  provider: replay
{})",
                     directions, samples, extra);
}

struct run_outcome {
  kagent::process_result proc;
  fs::path run_dir;
  nlohmann::json summary;
  std::map<std::string, kagent::store::program_record> by_name;
};

run_outcome run_search(const scratch& s, const fs::path& kdir, const std::string& cfg,
                       const kagent::env_map& env = kEnv) {
  s.write("cfg.yaml", cfg);
  run_outcome o;
  o.proc = run({"--strategy", (s.dir / "cfg.yaml").string(), "--kernel-dir", kdir.string(), "--run-dir",
                (s.dir / "runs").string()},
               env, "", 840);
  auto dirs = run_dirs(s.dir / "runs");
  if (dirs.size() != 1) return o;
  o.run_dir = dirs.front();
  if (fs::exists(o.run_dir / "summary.json")) o.summary = nlohmann::json::parse(slurp(o.run_dir / "summary.json"));
  auto db = program_db::open(o.run_dir / "program.db", program_db::mode::read_only);
  for (auto& p : db.list_programs()) o.by_name[p.id == "initial" ? "initial" : name_of(p.code)] = p;
  return o;
}

/// One line per program (name, status, cause, time, the start of its error): for the message of a failed
/// expectation, since the run directory is gone by the time CI shows it.
std::string how_each_ended(const run_outcome& o) {
  std::string ended;
  for (const auto& [name, p] : o.by_name)
    ended += name + " " + p.status + " " + p.failure_cause.value_or("") + " " +
             (p.time_ms ? std::to_string(*p.time_ms) : std::string("-")) + " " + p.error.value_or("").substr(0, 400) + "\n";
  return ended;
}

TEST(Cheats, NoCheatIsVerifiedAndTheHonestKernelsWinInTheirTrueOrder) {
  scratch s;
  std::vector<std::string> kernels;
  for (const auto& e : fs::directory_iterator(kCheats)) {
    auto code = slurp(e.path());
    kernels.push_back("# corpus: " + e.path().filename().string() + "\n" + code);
  }
  // The starting kernel again: it must measure what the starting kernel measured, although every cheat
  // ran before or beside it. As a program of its own (one statement more): with only a comment more it
  // would be a duplicate, and a duplicate takes its original's timing instead of being timed again.
  kernels.push_back("# corpus: start_again.py\n# expect: any\n" + slurp(fs::path(kMatvec) / "input.py") +
                    "\n_timed_again_after_the_cheats = True\n");
  ASSERT_GE(kernels.size(), 12u);
  const auto kdir = kernel_dir_with(s, kernels);
  // Without test.py: the judge alone must reject every cheat (a cheat that only test.py caught would
  // fail as user_test here, not as integrity or verification).
  auto o = run_search(s, kdir, config(static_cast<int>(kernels.size()), "user_test: never\n"));
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  ASSERT_EQ(o.by_name.size(), kernels.size() + 1) << o.proc.out;
  for (const auto& k : kernels) {
    const auto name = name_of(k);
    const auto& p = o.by_name.at(name);
    const auto want = expect_of(k);
    SCOPED_TRACE(name + ": " + p.status + " " + p.failure_cause.value_or("") + " " + p.error.value_or(""));
    if (want == "verified") {
      EXPECT_EQ(p.status, "verified");
    } else if (want == "integrity") {
      EXPECT_EQ(p.failure_cause.value_or(""), "integrity");
    } else if (want == "mismatch") {
      EXPECT_EQ(p.failure_cause.value_or(""), "verification");
    } else if (want == "banned") {
      EXPECT_EQ(p.failure_cause.value_or(""), "banned");
    }
    if (want != "verified" && want != "any") {
      EXPECT_NE(p.status, "verified");
    }
  }
  // The fastest verified kernel is the honest one with larger blocks, faster than the slow control.
  const auto& best_id = o.summary.value("best_program_id", "");
  ASSERT_FALSE(best_id.empty()) << o.summary.dump();
  EXPECT_EQ(o.by_name.at("honest_control.py").id, best_id);
  EXPECT_LT(*o.by_name.at("honest_control.py").time_ms, *o.by_name.at("honest_slow.py").time_ms);
  // Cheats are counted by cause in the summary.
  EXPECT_GE(o.summary["failures_by_cause"].value("integrity", 0), 6) << o.summary.dump();
  // No contamination: the starting kernel evaluated again (as a program of its own, timed again) measures
  // what it measured first, within the interpreter's noise (a factor of 2.3 was seen on the 2-core CI machine
  // while a build ran beside it; a contaminated interpreter is off by far more, or wrong).
  const auto& again = o.by_name.at("start_again.py");
  EXPECT_EQ(again.status, "verified") << again.failure_cause.value_or("") << ": timed again, not a duplicate";
  ASSERT_TRUE(again.time_ms && o.by_name.at("initial").time_ms);
  const double ratio = *again.time_ms / *o.by_name.at("initial").time_ms;
  EXPECT_GT(ratio, 1.0 / 3);
  EXPECT_LT(ratio, 3.0);
  // The best kernel's share of the physics floor is not reported on the cpu platform (no peak
  // bandwidth), and the best kernel is exactly the verified code.
  EXPECT_EQ(slurp(o.run_dir / "output" / "best_kernel.py"), o.by_name.at("honest_control.py").code);
}

TEST(Cheats, TheLeanJudgeOfSmallCardsRejectsTheCachesAndZerosToo) {
  // KAGENT_JUDGE_LEAN=1: what an 80 GB card gets for RMSNorm. Only trial 0's inputs and reference stay
  // with the judge (trials 1 and 2 are drawn again from their seeds) and one worker runs at a time.
  // A cache keyed by address or by content, and zeros, must still fail; the honest kernel still wins.
  scratch s;
  std::vector<std::string> kernels;
  for (const char* f : {"cache_by_address.py", "cache_by_content.py", "zeros.py", "honest_control.py"})
    kernels.push_back(std::string("# corpus: ") + f + "\n" + slurp(fs::path(kCheats) / f));
  const auto kdir = kernel_dir_with(s, kernels);
  auto env = kEnv;
  env["KAGENT_JUDGE_LEAN"] = "1";
  auto o = run_search(s, kdir, config(static_cast<int>(kernels.size()), "user_test: never\n"), env);
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  ASSERT_EQ(o.by_name.size(), kernels.size() + 1) << o.proc.out;
  for (const char* cheat : {"cache_by_address.py", "cache_by_content.py", "zeros.py"}) {
    const auto& p = o.by_name.at(cheat);
    SCOPED_TRACE(std::string(cheat) + ": " + p.status + " " + p.error.value_or(""));
    EXPECT_NE(p.status, "verified");
  }
  EXPECT_EQ(o.by_name.at("honest_control.py").status, "verified");
  EXPECT_EQ(o.summary.value("best_program_id", ""), o.by_name.at("honest_control.py").id);
  // The judge said it ran lean.
  // The judge says so where the README points the user: the device's server.log.
  EXPECT_NE(slurp(o.run_dir / "workers" / "gpu0" / "server.log").find("judge: lean memory mode"), std::string::npos);
}

// test.py of the user checks a shape the harness never uses (50 rows, not a multiple of 16).
std::string strict_test_py() {
  auto t = slurp(fs::path(kMatvec) / "test.py");
  const std::string marker = "def main():";
  auto pos = t.find(marker);
  t.insert(pos, R"(def edge_case():
    """50 rows: a kernel that drops the row mask is wrong here."""
    a = torch.rand(50, 2048, device=DEVICE).to(DTYPE)
    x = torch.rand(2048, 1, device=DEVICE).to(DTYPE)
    out = kernel_function(a, x)
    ref = (a.float() @ x.float()).to(DTYPE)
    if not torch.allclose(out.float(), ref.float(), rtol=1e-2, atol=1e-2):
        print("FAIL: edge case of 50 rows")
        sys.exit(1)


)");
  pos = t.find("    print(\"PASS\")");
  t.insert(pos, "    edge_case()\n");
  return t;
}

std::string without_row_mask() {
  // Right for the harness's 64 rows, wrong (zeros) for any row count that is not a multiple of 16.
  // One program covers the small shape (64 x 2048), so it is faster than honest_control (32 x 1024:
  // four blocks) in the interpreter: whichever is timed first, it is a would-be best and runs test.py
  // (a kernel slower than one that passed test.py on the same device runs none).
  auto code = slurp(fs::path(kMatvec) / "input.py");
  code = std::regex_replace(code, std::regex("BLOCK_M, BLOCK_K = 16, 512"), "BLOCK_M, BLOCK_K = 64, 2048");
  code = std::regex_replace(code, std::regex("    return y\n"), "    if M % 16:\n        y.zero_()\n    return y\n");
  return "# corpus: no_row_mask.py\n" + code;
}

TEST(UserTest, DecidesBeforeACandidateBecomesTheBest) {
  scratch s;
  const auto honest = "# corpus: honest_control.py\n" + slurp(fs::path(kCheats) / "honest_control.py");
  const auto kdir = kernel_dir_with(s, {without_row_mask(), honest}, strict_test_py());
  // One pipeline: the kernel without a row mask is evaluated first, against the starting kernel (16
  // block iterations in the interpreter to its one), so it is a would-be best for sure. With two,
  // either could reach the device first, and when honest_control did, the two kernels' interpreted
  // times (4 block iterations to 1) were once within a loaded CI machine's noise: the bad one timed
  // slower than the new best and, rightly under `best`, ran no test.py.
  auto cfg = config(2);
  cfg.replace(cfg.find("num_workers: 2"), 14, "num_workers: 1");
  auto o = run_search(s, kdir, cfg);
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  const auto ended = how_each_ended(o);
  std::cout << ended;
  const auto& bad = o.by_name.at("no_row_mask.py");
  EXPECT_EQ(bad.status, "failed") << ended;
  EXPECT_EQ(bad.failure_cause.value_or(""), "user_test") << ended;
  EXPECT_NE(bad.error.value_or("").find("test.py failed"), std::string::npos) << bad.error.value_or("");
  EXPECT_NE(slurp(o.run_dir / "candidates" / bad.id / "user_test.log").find("edge case of 50 rows"), std::string::npos);
  EXPECT_TRUE(fs::exists(o.run_dir / "candidates" / bad.id / "user_test.log"));
  // Its device time names the test.py run apart (num_workers: auto sizes pipelines without it).
  double user_test_s = -1;
  for (const auto& e : events(o.run_dir))
    if (e.value("type", "") == "candidate_result" && e.value("candidate_id", "") == bad.id)
      user_test_s = e.value("user_test_s", -1.0);
  EXPECT_GT(user_test_s, 0.0);
  // The run's total of test.py seconds (the start's check and every candidate's) is part of its
  // device time, in summary.json and on the terminal.
  double tested = 0;
  for (const auto& e : events(o.run_dir))
    if (const auto type = e.value("type", ""); type == "candidate_result" || type == "start_checked")
      tested += e.value("user_test_s", 0.0);
  ASSERT_TRUE(o.summary["user_test_s"].is_number()) << o.summary.dump(2);
  EXPECT_NEAR(o.summary["user_test_s"].get<double>(), tested, 1e-6);
  EXPECT_GT(tested, user_test_s) << "the starting kernel's test.py counts too";
  EXPECT_LE(o.summary["user_test_s"].get<double>(), o.summary["device_s"].get<double>());
  EXPECT_NE(o.proc.out.find("of it the kernel directory's test.py"), std::string::npos) << o.proc.out;
  EXPECT_EQ(o.by_name.at("honest_control.py").status, "verified") << ended;
  EXPECT_EQ(o.summary.value("best_program_id", ""), o.by_name.at("honest_control.py").id) << ended;
  EXPECT_GE(o.summary["failures_by_cause"].value("user_test", 0), 1) << ended;
}

TEST(UserTest, NeverSkipsItAndTheHarnessAloneDecides) {
  scratch s;
  const auto kdir = kernel_dir_with(s, {without_row_mask()}, strict_test_py());
  auto o = run_search(s, kdir, config(1, "user_test: never\n"));
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  EXPECT_EQ(o.by_name.at("no_row_mask.py").status, "verified");
  EXPECT_FALSE(fs::exists(o.run_dir / "candidates" / o.by_name.at("no_row_mask.py").id / "user_test.log"));
}

TEST(UserTest, AStartingKernelThatFailsItEndsTheRunWithItsOutput) {
  scratch s;
  const auto kdir = kernel_dir_with(s, {without_row_mask()}, strict_test_py());
  // The starting kernel itself drops the row mask.
  auto code = without_row_mask();
  s.write("kernel/input.py", code.substr(code.find('\n') + 1));
  auto o = run_search(s, kdir, config(1));
  EXPECT_EQ(o.proc.exit_code, 1) << o.proc.err << o.proc.out;
  EXPECT_NE((o.proc.out + o.proc.err).find("edge case of 50 rows"), std::string::npos) << o.proc.out << o.proc.err;
  // The test ran while the starting kernel's analysis waited for the LLM; no candidate was written
  // (no optimize call was spent) for a start that fails it, and the start is recorded as failed.
  ASSERT_FALSE(o.run_dir.empty());
  bool checked_after_analysis_started = false, analysis_started = false;
  for (const auto& e : events(o.run_dir)) {
    const auto type = e.value("type", "");
    EXPECT_NE(type, "candidate_start") << e.dump();
    if (type == "llm_call") {
      EXPECT_EQ(e.value("purpose", ""), "bottleneck") << e.dump();
    }
    if (type == "analysis_start") analysis_started = true;
    if (type == "error" && e.value("what", "").find("test.py") != std::string::npos)
      checked_after_analysis_started = analysis_started;
  }
  EXPECT_TRUE(checked_after_analysis_started);
  auto db = program_db::open(o.run_dir / "program.db", program_db::mode::read_only);
  EXPECT_EQ(db.get_program("initial")->failure_cause.value_or(""), "user_test");
  EXPECT_FALSE(fs::exists(o.run_dir / "output" / "best_kernel.py"));
}

TEST(KernelDir, AProblemPyThatFailsIsNamedWithItsLineAndNotBlamedOnTheKernel) {
  // The user's problem.py raises in get_inputs (line 7 of the file below): the run ends with exit 1
  // and says that the kernel directory's problem.py failed, with its line; the traceback is kept
  // beside the starting kernel; nothing calls the (correct) kernel wrong.
  scratch s;
  const auto kdir = kernel_dir_with(s, {});
  s.write("kernel/problem.py",
          "import torch\n"                                     // 1
          "import torch.nn as nn\n"                            // 2
          "class Model(nn.Module):\n"                          // 3
          "    def forward(self, A, B):\n"                     // 4
          "        return torch.matmul(A, B)\n"                // 5
          "def get_inputs(device=None, dtype=None):\n"         // 6
          "    return [torch.rand(64, 2048), undefined_name]\n"  // 7
          "def get_init_inputs():\n"
          "    return []\n");
  auto o = run_search(s, kdir, config(1));
  const auto all = o.proc.out + o.proc.err;
  EXPECT_EQ(o.proc.exit_code, 1) << all;
  EXPECT_NE(all.find("problem.py line 7"), std::string::npos) << all;
  EXPECT_NE(all.find("NameError"), std::string::npos) << all;
  EXPECT_NE(all.find("kernel directory is at fault"), std::string::npos) << all;
  EXPECT_EQ(all.find("initial kernel failed verification"), std::string::npos) << all;
  ASSERT_FALSE(o.run_dir.empty());
  std::string log;
  for (const auto& e : fs::recursive_directory_iterator(o.run_dir))
    if (e.path().filename() == "evaluate.log") log = slurp(e.path());
  EXPECT_NE(log.find("undefined_name"), std::string::npos) << "no traceback kept: " << log;
  EXPECT_NE(log.find("line 7"), std::string::npos) << log;
  ASSERT_TRUE(o.by_name.count("initial"));
  EXPECT_EQ(o.by_name.at("initial").failure_cause.value_or(""), "problem");
}

TEST(CandidateTimeout, ACandidateHungOnTheDeviceIsKilledAtItsDeadlineAndFreesTheDevice) {
  // Round 1's kernel hangs inside its call (5 minutes, well inside test_timeout_s); round 2's is
  // honest. candidate_timeout_s is 20 s. If the hung candidate's device step went on after its
  // deadline, the device would stay busy for minutes and round 2's candidate would time out waiting
  // for it; since the deadline kills that step (and restarts the evaluator), round 2 verifies.
  scratch s;
  auto honest = slurp(fs::path(kCheats) / "honest_control.py");
  auto hung = honest;
  const std::string def = "def kernel_function(A, B):\n";
  hung.replace(hung.find(def), def.size(), def + "    import time\n    time.sleep(300)\n");
  const auto kdir = kernel_dir_with(s, {"# corpus: hung.py\n" + hung, "# corpus: honest_control.py\n" + honest});
  const std::string cfg = R"(strategy: greedy
num_workers: 1
max_rounds: 2
strategy_config:
  max_no_improvement: 5
platform: cpu
target_platform: cpu
benchmark_warmup: 5
benchmark_repeat: 8
max_refine_attempts: 0
candidate_timeout_s: 20
test_timeout_s: 600
user_test: never
compile_reference: false
llm:
  provider: replay
)";
  auto o = run_search(s, kdir, cfg);
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  ASSERT_TRUE(o.by_name.count("honest_control.py")) << o.proc.err;
  // The hung kernel is round 1's one candidate (killed before its result, so no code is recorded).
  auto db = program_db::open(o.run_dir / "program.db", program_db::mode::read_only);
  std::optional<kagent::store::program_record> hung_one;
  for (auto& p : db.list_programs())
    if (p.id != "initial" && p.round == 1) hung_one = p;
  ASSERT_TRUE(hung_one) << o.proc.err;
  const auto& h = *hung_one;
  EXPECT_EQ(h.status, "failed");
  EXPECT_EQ(h.failure_cause.value_or(""), "timeout") << h.error.value_or("");
  const auto& ok = o.by_name.at("honest_control.py");
  EXPECT_EQ(ok.status, "verified") << ok.failure_cause.value_or("") << ": " << ok.error.value_or("");
  // Whether the honest kernel also times faster than the starting one is a timing comparison on the
  // CPU (a loaded CI machine once kept `initial`); the device freed is what its verification shows.
  EXPECT_NE(o.summary.value("best_program_id", ""), h.id);
  // Recorded once, and nothing of it after its deadline: no verify log, no reflexion.
  int results = 0;
  for (const auto& ev : events(o.run_dir))
    if (ev.value("type", "") == "candidate_result" && ev.value("candidate_id", "") == h.id) ++results;
  EXPECT_EQ(results, 1);
  ASSERT_TRUE(fs::is_directory(o.run_dir / "candidates" / h.id));
  for (const auto& e : fs::directory_iterator(o.run_dir / "candidates" / h.id)) {
    const auto name = e.path().filename().string();
    EXPECT_EQ(name.find("verify_"), std::string::npos) << name;
    EXPECT_EQ(name.find("reflexion"), std::string::npos) << name;
  }
}

}  // namespace

// A device's evaluator (Python, torch, Triton, problem.py and its inputs: seconds each time, more on a
// GPU) starts when the device joins the run, not at its first candidate: a two-device run with a
// single candidate still has both devices' problem loaded, the idle one included.
TEST(Devices, EveryDeviceLoadsTheProblemWhenTheRunStartsNotAtItsFirstCandidate) {
  scratch s;
  const auto kdir = kernel_dir_with(s, {"# corpus: honest_control.py\n" + slurp(fs::path(kCheats) / "honest_control.py")});
  auto o = run_search(s, kdir, config(1, "gpu_ids: [0, 1]\nuser_test: never\n"));
  ASSERT_EQ(o.proc.exit_code, 0) << o.proc.err << o.proc.out;
  std::set<int> used;
  for (const auto& e : events(o.run_dir))
    if (e.value("type", "") == "candidate_start") used.insert(e.value("gpu_id", -1));
  ASSERT_EQ(used.size(), 1u);
  const int idle = used.count(0) ? 1 : 0;
  const auto dir = o.run_dir / "workers" / ("gpu" + std::to_string(idle));
  ASSERT_TRUE(fs::exists(dir / "server.log")) << "the idle device's evaluator never started";
  // load_problem starts the device's fork server (and its pre-warmed candidate processes).
  EXPECT_TRUE(fs::exists(dir / "sandbox" / "zygote" / "zygote.log")) << "the idle device never loaded the problem";
}
