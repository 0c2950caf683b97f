// The binary refuses what makes no sense with exit 2, one line on stderr and no run directory; and
// what a candidate returns is what is saved.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "platform/llm/extract.hpp"
#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

namespace {
const std::string matvec = source("examples/optimize_01_matvec");
const kagent::env_map no_gpu_tools{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_REPLAY_DELAY_S", ""}};

// Exit 2, exactly one line on stderr holding `needle`, and nothing under `runs`.
void expect_refused(const kagent::process_result& r, const std::string& needle, const fs::path& runs) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("kagent-actors: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_TRUE(run_dirs(runs).empty()) << "a run directory was created under " << runs;
}

std::vector<std::string> noop_args(const scratch& s, std::vector<std::string> more = {}) {
  std::vector<std::string> a{"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// A copy of configs/noop.yaml with the top-level `key: value` lines of `extra` set (replacing the
// file's own line for that key) and the replay set in `replay_dir`.
std::string noop_config(const scratch& s, const std::string& name, const std::string& extra,
                        const std::string& replay_dir = "") {
  auto cfg = slurp(source("configs/noop.yaml"));
  if (!replay_dir.empty()) cfg.replace(cfg.find("provider: replay"), 16, "provider: replay\n  replay_dir: " + replay_dir);
  std::stringstream lines{extra};
  std::string line;
  while (std::getline(lines, line)) {
    const auto key = line.substr(0, line.find(':') + 1);
    if (auto at = cfg.find("\n" + key); at != std::string::npos)
      cfg.replace(at + 1, cfg.find('\n', at + 1) - at - 1, line);
    else
      cfg += line + "\n";
  }
  return s.write("cfg/" + name + ".yaml", cfg);
}
} // namespace

TEST(Refuse, DuplicateGpuIds) {
  scratch s;
  expect_refused(run(noop_args(s, {"--gpu-ids", "0,0,0"}), no_gpu_tools), "--gpu-ids '0,0,0': device 0 is listed twice",
                 s.dir / "runs");
}

TEST(Refuse, AbsurdMaxRoundsFlag) {
  scratch s;
  expect_refused(run(noop_args(s, {"--max-rounds", "1000000"}), no_gpu_tools), "--max-rounds 1000000: expected 1 to 10000",
                 s.dir / "runs");
}

TEST(Refuse, NegativeBudgetAndUnknownProviderFlags) {
  scratch s;
  expect_refused(run(noop_args(s, {"--budget-usd", "-1"}), no_gpu_tools), "--budget-usd -1: expected 0 to", s.dir / "runs");
  auto r = run(noop_args(s, {"--provider", "acme"}), no_gpu_tools);
  expect_refused(r, "acme", s.dir / "runs");
}

TEST(Refuse, GarbageInTheEnvironment) {
  scratch s;
  auto env = no_gpu_tools;
  env["KAGENT_REPLAY_DELAY_S"] = "soon";
  expect_refused(run(noop_args(s), env), "KAGENT_REPLAY_DELAY_S='soon': expected a number of seconds", s.dir / "runs");
  env["KAGENT_REPLAY_DELAY_S"] = "";
  env["KAGENT_INJECT_FAULT"] = "candidate_crash:r1_c0";
  expect_refused(run(noop_args(s), env), "KAGENT_INJECT_FAULT='candidate_crash:r1_c0': unknown fault", s.dir / "runs");
  env["KAGENT_INJECT_FAULT"] = "";
  env["KAGENT_NOOP_DEVICE_S"] = "0";
  expect_refused(run(noop_args(s), env), "KAGENT_NOOP_DEVICE_S='0': expected a number of seconds above 0", s.dir / "runs");
  env["KAGENT_NOOP_DEVICE_S"] = "";
  env["KAGENT_TEST_STANDBY"] = "5";
  expect_refused(run(noop_args(s), env), "KAGENT_TEST_STANDBY='5': expected how many test.py processes wait", s.dir / "runs");
  env["KAGENT_TEST_STANDBY"] = "two";
  expect_refused(run(noop_args(s), env), "KAGENT_TEST_STANDBY='two': expected", s.dir / "runs");
}

TEST(Refuse, AKernelDirectoryThatIsASymlinkLoop) {
  scratch s;
  fs::create_symlink(s.dir / "loop", s.dir / "loop");
  expect_refused(run({"--strategy", "noop", "--kernel-dir", (s.dir / "loop").string(), "--run-dir",
                      (s.dir / "runs").string()},
                     no_gpu_tools),
                 "Too many levels of symbolic links", s.dir / "runs");
}

TEST(Refuse, ARunDirectoryThatIsAFileOrReadOnly) {
  scratch s;
  const auto file = s.write("runs-file", "x");
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", file}, no_gpu_tools);
  expect_refused(r, "--run-dir " + file + ": " + file + " is not a directory", s.dir / "runs");
  EXPECT_EQ(slurp(file), "x");

  fs::create_directories(s.dir / "ro");
  ::chmod((s.dir / "ro").c_str(), 0555);
  auto ro = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "ro").string()}, no_gpu_tools);
  expect_refused(ro, "is read-only", s.dir / "ro");
  ::chmod((s.dir / "ro").c_str(), 0755);
}

TEST(Refuse, AConfigPathThatIsADirectoryOrEmpty) {
  scratch s;
  fs::create_directories(s.dir / "dir.yaml");
  expect_refused(run({"--strategy", (s.dir / "dir.yaml").string(), "--kernel-dir", matvec, "--run-dir",
                      (s.dir / "runs").string()},
                     no_gpu_tools),
                 "dir.yaml: is a directory; expected a strategy YAML file", s.dir / "runs");
  const auto empty = s.write("cfg/empty.yaml", "# nothing yet\n");
  expect_refused(run({"--strategy", empty, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools),
                 empty + ": the strategy config is empty", s.dir / "runs");
}

TEST(Refuse, NonFiniteAndAbsurdConfigNumbers) {
  scratch s;
  const std::vector<std::pair<std::string, std::string>> cases{
      {"candidate_timeout_s: .nan\n", "key 'candidate_timeout_s' must be a finite number from 1 to 604800, got .nan"},
      {"candidate_timeout_s: 1e308\n", "key 'candidate_timeout_s' must be a finite number"},
      {"test_timeout_s: .inf\n", "key 'test_timeout_s' must be a finite number"},
      {"benchmark_warmup: 1e9\n", "key 'benchmark_warmup' must be a finite number from 0 to 10000"},
      {"num_workers: 100000\n", "key 'num_workers' must be an integer from 1 to 1024"},
  };
  int n = 0;
  for (const auto& [extra, needle] : cases) {
    const auto cfg = noop_config(s, "bad" + std::to_string(n++), extra);
    expect_refused(run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools),
                   needle, s.dir / "runs");
  }
  // The one the issue names: 100000 bottlenecks, nested under strategy_config.
  auto cfg = slurp(source("configs/noop.yaml"));
  cfg.replace(cfg.find("  max_no_improvement: 1"), 23, "  max_no_improvement: 1\n  num_bottlenecks: 100000");
  const auto p = s.write("cfg/fanout.yaml", cfg);
  expect_refused(run({"--strategy", p, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools),
                 "key 'strategy_config.num_bottlenecks' must be an integer from 1 to 32", s.dir / "runs");
}

TEST(Refuse, AnOversizedOrNonUtf8StartingKernel) {
  scratch s;
  for (const char* f : {"problem.py", "test.py"}) s.write(std::string("k/") + f, slurp(fs::path(matvec) / f));
  s.write("k/input.py", slurp(fs::path(matvec) / "input.py") + "# " + std::string(300 * 1024, 'x') + "\n");
  const auto k = (s.dir / "k").string();
  expect_refused(run({"--strategy", "noop", "--kernel-dir", k, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools),
                 "input.py is 302.0 KiB", s.dir / "runs");
  // Raised in the config, the same kernel directory is accepted (and the run goes on to succeed).
  const auto cfg = noop_config(s, "big", "max_kernel_bytes: 1048576\n", matvec + "/replay");
  auto ok = run({"--strategy", cfg, "--kernel-dir", k, "--run-dir", (s.dir / "runs").string(), "--max-rounds", "1"},
                no_gpu_tools);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  fs::remove_all(s.dir / "runs");

  s.write("k/input.py", slurp(fs::path(matvec) / "input.py") + "# caf\xe9\n");
  expect_refused(run({"--strategy", "noop", "--kernel-dir", k, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools),
                 "input.py is not valid UTF-8", s.dir / "runs");
}

// A reply with a latin-1 byte and a stray 0xFF: the code saved as the candidate's kernel.py and in
// program.db is valid UTF-8, parses as Python, and is the same bytes everywhere.
TEST(Saved, ANonUtf8ReplyIsNormalisedBeforeVerificationAndSavedAsVerified) {
  scratch s;
  const auto code = slurp(fs::path(matvec) / "input.py");
  s.write("replay/optimize_001.md", "Here it is.\n```python\n# tuned caf\xe9 \xff\n" + code + "```\n");
  const auto cfg = noop_config(s, "utf8", "", (s.dir / "replay").string());
  auto r = run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--max-rounds", "1"},
               no_gpu_tools);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  auto p = db.get_program("r1_c0");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->status, "verified") << p->error.value_or("");
  const auto saved = slurp(run_dir / "candidates/r1_c0/kernel.py");
  EXPECT_TRUE(kagent::is_valid_utf8(saved));
  EXPECT_EQ(saved, p->code);
  EXPECT_EQ(saved.rfind("# tuned caf\xEF\xBF\xBD \xEF\xBF\xBD\n", 0), 0u) << saved.substr(0, 40);
  EXPECT_TRUE(kagent::is_valid_utf8(slurp(run_dir / "candidates/r1_c0/1_optimize_reply.txt")));
  const auto best = slurp(run_dir / "output/best_kernel.py");
  EXPECT_TRUE(kagent::is_valid_utf8(best));
  // Python reads it as source (it refused the raw bytes: "SyntaxError: Non-UTF-8 code").
  if (fs::exists("/usr/bin/python3")) {
    kagent::process_spec ps;
    ps.argv = {"/usr/bin/python3", "-c", "import ast, sys; ast.parse(open(sys.argv[1], 'rb').read())",
               (run_dir / "candidates/r1_c0/kernel.py").string()};
    ps.timeout = std::chrono::seconds(30);
    auto py = kagent::run_process(ps);
    EXPECT_TRUE(py.ok()) << py.err;
  }
}

// A reply over llm.max_reply_bytes fails its candidate with the cause named, never quoted back.
TEST(Saved, AnOversizedReplyFailsItsCandidateWithAClearCause) {
  scratch s;
  const auto code = slurp(fs::path(matvec) / "input.py");
  s.write("replay/optimize_001.md", "```python\n" + code + "# " + std::string(8000, 'x') + "\n```\n");
  const auto cfg = noop_config(s, "bigreply", "", (s.dir / "replay").string());
  {
    auto text = slurp(cfg);
    text.replace(text.find("provider: replay"), 16, "provider: replay\n  max_reply_bytes: 4096");
    s.write("cfg/bigreply.yaml", text);
  }
  auto r = run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--max-rounds", "1"},
               no_gpu_tools);
  // Its only candidate got no usable reply, so the search found nothing: exit 1, with that reason.
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("run failed: no candidate got an LLM reply; the first error: reply_too_large"), std::string::npos)
      << r.err;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  auto p = db.get_program("r1_c0");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->status, "failed");
  EXPECT_EQ(p->failure_cause.value_or(""), "llm");
  EXPECT_NE(p->error.value_or("").find("reply_too_large: the reply is"), std::string::npos) << p->error.value_or("");
  EXPECT_NE(p->error.value_or("").find("over llm.max_reply_bytes (4096)"), std::string::npos) << p->error.value_or("");
  EXPECT_FALSE(fs::exists(run_dir / "candidates/r1_c0/1_optimize_reply.txt"));
}
