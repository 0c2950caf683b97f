// kagent-actors with hostile candidates (cpu platform, replay LLM): one dumps every environment it
// can reach (its own, its parent's, kagent-actors' /proc/<pid>/environ and .env) and one hangs.
// The planted API key must be in no file of the run; a kill of kagent-actors mid-hang must leave
// no process behind within 2 s.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "tests/e2e/e2e_util.hpp"

using namespace e2e;

namespace {

const std::string kMatvec = source("examples/optimize_01_matvec");
const std::string kKey = "sk-ant-test-" + std::to_string(::getpid()) + "-c0ffee5ecret";
const std::string kDotenvKey = "sk-openai-test-" + std::to_string(::getpid()) + "-d07e4v";

/// The starting kernel with `prologue` run at the top of kernel_function.
std::string hostile(const std::string& prologue) {
  std::string code = slurp(kMatvec + "/input.py");
  const std::string at = "    \"\"\"y = A @ B for A (M x K) and B (K x 1); returns an (M x 1) tensor of A's dtype.\"\"\"\n";
  auto pos = code.find(at);
  if (pos == std::string::npos) return "";
  code.insert(pos + at.size(), prologue);
  code.insert(code.find("import torch"), "import os\n");
  return "Here is the faster kernel.\n\n```python\n" + code + "```\n";
}

const std::string kDump =
    "    out = []\n"
    "    pid = os.getpid()\n"
    "    for _ in range(8):\n"
    "        try:\n"
    "            out.append('ENV%d:' % pid + open('/proc/%d/environ' % pid, 'rb').read().replace(b'\\0', b' ').decode())\n"
    "        except Exception as e:\n"
    "            out.append('ERR %r' % e)\n"
    "        try:\n"
    "            out.append('DOTENV:' + open('/proc/%d/cwd/.env' % pid).read())\n"
    "        except Exception:\n"
    "            pass\n"
    "        try:\n"
    "            pid = int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])\n"
    "        except Exception:\n"
    "            break\n"
    "        if pid <= 1:\n"
    "            break\n"
    "    dump = '\\n'.join(out)\n"
    "    print('HOSTILE_DUMP', dump)\n"
    "    raise RuntimeError('HOSTILE_DUMP ' + dump[:4000])\n";

const std::string kHang =
    "    open('hang_started', 'w').close()\n"
    "    while True:\n"
    "        pass\n";

void write_replay(const scratch& s, const std::string& reply) {
  s.write("replay/optimize_001.md", reply);
  s.write("replay/optimize_002.md", reply);
  const std::string bottleneck =
      R"([{"category": "memory", "summary": "streamed once", "reasoning": "bandwidth bound", "root_causes": [{"cause": "small tiles",)"
      R"( "evidence": [], "fixes": [{"fix": "raise BLOCK_K", "rationale": "fewer programs"}]}]}])";
  s.write("replay/bottleneck_001.md", bottleneck);
  s.write("replay/reflexion_001.md",
          R"({"was_diagnosis_correct": false, "was_fix_effective": false, "expected_outcome": "faster",)"
          R"( "actual_outcome": "failed", "reasoning": "it failed", "lessons": [], "avoid_patterns": [], "try_patterns": []})");
}

std::string config(const scratch& s, const std::string& extra = "", const std::string& user_test = "never") {
  return s.write("cfg/contain.yaml",
                 "strategy: greedy\nnum_workers: 1\nmax_rounds: 1\nplatform: cpu\ntarget_platform: cpu\n"
                 "benchmark_warmup: 1\nbenchmark_repeat: 2\nmax_refine_attempts: 1\n"
                 // Not what containment is about: no inductor compile of the reference (seconds of
                 // g++ per run), no test.py (a fresh interpreter importing torch).
                 "compile_reference: false\nuser_test: " + user_test + "\n" + extra +
                 "llm:\n  provider: replay\n  replay_dir: " + (s.dir / "replay").string() + "\n");
}

// A candidate that reserves 20 GiB (on the 24 GiB CI machine): torch.empty maps it without touching
// it, so an uncapped candidate succeeds (and says so) without endangering the host.
const std::string kHuge =
    "    big = torch.empty(20 << 30, dtype=torch.uint8)\n"
    "    raise RuntimeError('ALLOC' + 'ATED_20G %d' % big.numel())\n";  // the marker exists only at run time

/// Every regular file under `dir` that contains `needle`.
std::vector<std::string> files_containing(const fs::path& dir, const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->is_regular_file(ec)) continue;
    if (slurp(it->path()).find(needle) != std::string::npos) out.push_back(it->path().string());
  }
  return out;
}

/// Descendants of `root` (by /proc/<pid>/stat's ppid), with their start times.
std::vector<std::pair<int, std::string>> descendants(int root) {
  std::map<int, std::pair<int, std::string>> info;  // pid -> (ppid, starttime)
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string st = slurp(e.path() / "stat");
    auto close = st.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream ss(st.substr(close + 2));
    std::vector<std::string> f;
    std::string x;
    while (ss >> x) f.push_back(x);
    if (f.size() < 20) continue;
    info[std::stoi(name)] = {std::stoi(f[1]), f[19]};
  }
  std::vector<std::pair<int, std::string>> out;
  std::vector<int> frontier{root};
  while (!frontier.empty()) {
    int p = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, pi] : info)
      if (pi.first == p) {
        out.push_back({pid, pi.second});
        frontier.push_back(pid);
      }
  }
  return out;
}

bool alive(int pid, const std::string& starttime) {
  const std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = st.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream ss(st.substr(close + 2));
  std::vector<std::string> f;
  std::string x;
  while (ss >> x) f.push_back(x);
  return f.size() >= 20 && f[0] != "Z" && f[0] != "X" && f[19] == starttime;
}

} // namespace

TEST(Containment, PlantedKeyIsInNoFileOfTheRun) {
  scratch s;
  write_replay(s, hostile(kDump));
  s.write(".env", "OPENAI_API_KEY=" + kDotenvKey + "\n");
  auto r = run({"--strategy", config(s), "--kernel-dir", kMatvec, "--run-dir", (s.dir / "runs").string(),
                "--llm-record", (s.dir / "rec").string()},
               {{"ANTHROPIC_API_KEY", kKey}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON}}, s.dir.string(), 400);
  ASSERT_TRUE(r.started) << r.describe();
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u) << r.err;
  // The hostile kernel ran and its dump reached the run (candidate error, logs).
  EXPECT_FALSE(files_containing(dirs[0], "HOSTILE_DUMP").empty()) << r.out << r.err;
  EXPECT_FALSE(files_containing(dirs[0], "ENV").empty());
  // The key from the environment is in no file of the run, nor in the LLM records, nor on stdout/stderr.
  auto leaks = files_containing(s.dir / "runs", kKey);
  EXPECT_TRUE(leaks.empty()) << leaks.front();
  EXPECT_TRUE(files_containing(s.dir / "rec", kKey).empty());
  EXPECT_EQ(r.out.find(kKey), std::string::npos);
  EXPECT_EQ(r.err.find(kKey), std::string::npos);
  // The .env key is readable by an unsandboxed candidate through /proc/<pid>/cwd; what the run
  // itself writes (program.db, events, candidate files, LLM records) is redacted by value.
  for (const char* f : {"program.db", "events.jsonl", "summary.json"})
    if (fs::exists(dirs[0] / f)) {
      EXPECT_EQ(slurp(dirs[0] / f).find(kDotenvKey), std::string::npos) << f;
    }
  if (fs::exists(dirs[0] / "candidates")) {
    EXPECT_TRUE(files_containing(dirs[0] / "candidates", kDotenvKey).empty());
  }
  EXPECT_TRUE(files_containing(s.dir / "rec", kDotenvKey).empty());
  // In the sandbox the candidate sees neither its parents' /proc entries nor the .env (masked), so
  // the dump carries no key at all; without a sandbox the sinks would have redacted it.
}

// Reads the memory of its ancestors up to kagent-actors (the judge, kagent-actors itself, which keeps
// the API key in memory for the LLM provider) through /proc/<pid>/mem, looking for the key's prefix.
const std::string kMemScan =
    "    seen = []\n"
    "    pid = os.getpid()\n"
    "    for _ in range(8):\n"
    "        try:\n"
    "            pid = int(open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[1])\n"
    "            comm = open('/proc/%d/comm' % pid).read().strip()\n"
    "        except Exception:\n"
    "            break\n"
    "        hits = 0\n"
    "        try:\n"
    "            with open('/proc/%d/maps' % pid) as maps, open('/proc/%d/mem' % pid, 'rb', 0) as mem:\n"
    "                for line in maps:\n"
    "                    f = line.split()\n"
    "                    if not f[1].startswith('rw') or (len(f) > 5 and f[5].startswith('/')):\n"
    "                        continue\n"
    "                    lo, hi = (int(x, 16) for x in f[0].split('-'))\n"
    "                    if hi - lo > (1 << 30):\n"
    "                        continue\n"
    "                    try:\n"
    "                        mem.seek(lo)\n"
    "                        hits += mem.read(hi - lo).count(b'sk-ant-' + b'test-')\n"
    "                    except OSError:\n"
    "                        pass\n"
    "            seen.append('%s:%s' % (comm, 'found' if hits else 'read, nothing'))\n"
    "        except OSError as e:\n"
    "            seen.append('%s:denied %s' % (comm, type(e).__name__))\n"
    "        if comm == 'kagent-actors':\n"
    "            break\n"
    "    raise RuntimeError('HOSTILE_' + 'MEMSCAN ' + ' '.join(seen))\n";  // the marker exists only at run time

/// The line kMemScan reported into some file of the run ("" if none did).
std::string memscan_report(const fs::path& run_dir) {
  const auto said = files_containing(run_dir, "HOSTILE_MEMSCAN");
  if (said.empty()) return "";
  const std::string text = slurp(said.front());
  const auto at = text.find("HOSTILE_MEMSCAN");
  return text.substr(at, text.find('\n', at) - at);
}

// Without a sandbox a candidate shares kagent-actors' PID namespace and user (root here, as in many
// containers): kagent-actors is not dumpable and the candidate's process holds no capability, so its
// memory (the API key) and the judge's stay closed.
TEST(Containment, AnUnsandboxedCandidateCannotReadItsAncestorsMemory) {
  scratch s;
  write_replay(s, hostile(kMemScan));
  auto r = run({"--strategy", config(s, "sandbox:\n  mode: off\n"), "--kernel-dir", kMatvec, "--run-dir",
                (s.dir / "runs").string()},
               {{"ANTHROPIC_API_KEY", kKey}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON}}, s.dir.string(), 400);
  ASSERT_TRUE(r.started) << r.describe();
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u) << r.err;
  const std::string report = memscan_report(dirs[0]);
  ASSERT_FALSE(report.empty()) << r.out << r.err;  // the scan ran and reported
  EXPECT_NE(report.find("kagent-actors:denied"), std::string::npos) << report;
  EXPECT_EQ(report.find("found"), std::string::npos) << report;
  EXPECT_EQ(report.find("read, nothing"), std::string::npos) << report;
}

// The same scan from test.py's process (user_test: every): an honest kernel that scans only when the
// kernel directory's test.py imported it. Without a standby (KAGENT_TEST_STANDBY=0, the cpu platform's
// default) kagent-actors starts test.py itself, so the drop of capabilities must come from there.
class UserTestScan : public ::testing::TestWithParam<const char*> {};

TEST_P(UserTestScan, AnUnsandboxedTestPyCannotReadItsAncestorsMemory) {
  scratch s;
  std::string scan;  // kMemScan under the `if`
  std::istringstream lines(kMemScan);
  for (std::string line; std::getline(lines, line);) scan += "    " + line + "\n";
  write_replay(s, hostile("    if b'test.py' in open('/proc/self/cmdline', 'rb').read():\n" + scan));
  auto r = run({"--strategy", config(s, "sandbox:\n  mode: off\n", "every"), "--kernel-dir", kMatvec, "--run-dir",
                (s.dir / "runs").string()},
               {{"ANTHROPIC_API_KEY", kKey}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON},
                {"KAGENT_TEST_STANDBY", GetParam()}},
               s.dir.string(), 400);
  ASSERT_TRUE(r.started) << r.describe();
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u) << r.err;
  const std::string report = memscan_report(dirs[0]);
  ASSERT_FALSE(report.empty()) << r.out << r.err;  // test.py ran the scan and it reported
  EXPECT_NE(report.find("kagent-actors:denied"), std::string::npos) << report;
  EXPECT_EQ(report.find("found"), std::string::npos) << report;
}

INSTANTIATE_TEST_SUITE_P(Containment, UserTestScan, ::testing::Values("0", "1"),
                         [](const auto& info) { return std::string(info.param) == "0" ? "Fresh" : "Standby"; });

TEST(Containment, MemoryCapRefusesATwentyGigabyteAllocation) {
  scratch s;
  write_replay(s, hostile(kHuge));
  auto r = run({"--strategy", config(s, "sandbox:\n  memory_mb: 8192\n"), "--kernel-dir", kMatvec, "--run-dir",
                (s.dir / "runs").string()},
               {{"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON}}, s.dir.string(), 400);
  ASSERT_TRUE(r.started) << r.describe();
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u) << r.err;
  // The allocation was refused inside the candidate's process (RLIMIT_AS of the sandbox): the
  // allocator's own message reached the candidate's record, the success marker did not.
  EXPECT_TRUE(files_containing(dirs[0], "ALLOCATED_20G").empty()) << r.out << r.err;
  EXPECT_FALSE(files_containing(dirs[0], "allocate memory").empty()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.describe();  // the run itself goes on and ends normally
}

TEST(Containment, CpuTimeLimitEndsASpinningCandidateBeforeAnyTimeout) {
  scratch s;
  write_replay(s, hostile(kHang));
  // No timeout of the run comes near (the candidate's is an hour): only RLIMIT_CPU can end it.
  auto r = run({"--strategy", config(s, "candidate_timeout_s: 3600\ntest_timeout_s: 3600\nsandbox:\n  max_cpu_s: 15\n"),
                "--kernel-dir", kMatvec, "--run-dir", (s.dir / "runs").string()},
               {{"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON}}, s.dir.string(), 400);
  ASSERT_TRUE(r.started) << r.describe();
  EXPECT_FALSE(r.timed_out) << r.describe();
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u) << r.err;
  EXPECT_FALSE(files_containing(dirs[0], "SIGXCPU) (its CPU time limit, sandbox.max_cpu_s)").empty()) << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

class KillDuringHang : public ::testing::TestWithParam<int> {};

TEST_P(KillDuringHang, LeavesNothingBehind) {
  const int sig = GetParam();
  scratch s;
  write_replay(s, hostile(kHang));
  const std::string cfg = config(s);
  const std::string out_path = (s.dir / "out.log").string();
  auto env = kagent::current_environment();
  env["ANTHROPIC_API_KEY"] = kKey;
  env["KAGENT_PYTHON"] = KAGENT_PYTHON;
  env.erase("KAGENT_INJECT_FAULT");
  std::vector<std::string> args{binary(), "--strategy", cfg, "--kernel-dir", kMatvec, "--run-dir", (s.dir / "runs").string()};
  std::vector<std::string> envs;
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::chdir(s.dir.c_str());
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  // The candidate may only write its own scratch directory (the sandbox), so that is where its mark is.
  auto find_mark = [&]() -> fs::path {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(s.dir / "runs", ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->path().filename() == "hang_started") return it->path();
    return {};
  };
  fs::path mark;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  while ((mark = find_mark()).empty() && std::chrono::steady_clock::now() < until) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid) FAIL() << "kagent-actors ended before the hang: " << slurp(out_path);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(mark.empty()) << slurp(out_path);
  EXPECT_FALSE(fs::exists(s.dir / "hang_started"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto kids = descendants(pid);
  ASSERT_FALSE(kids.empty());
  // kagent-actors' own environment no longer shows the key.
  EXPECT_EQ(slurp("/proc/" + std::to_string(pid) + "/environ").find(kKey), std::string::npos);
  for (const auto& [k, st] : kids)
    EXPECT_EQ(slurp("/proc/" + std::to_string(k) + "/environ").find(kKey), std::string::npos) << k;
  ::kill(pid, sig);
  int st = 0;
  bool reaped = false;
  for (int i = 0; i < 100 && !reaped; ++i) {
    reaped = ::waitpid(pid, &st, WNOHANG) == pid;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!reaped) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &st, 0);
    ADD_FAILURE() << "kagent-actors did not exit within 5 s of signal " << sig;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::vector<int> left;
  do {
    left.clear();
    for (const auto& [k, start] : kids)
      if (alive(k, start)) left.push_back(k);
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  for (int k : left) ::kill(k, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) outlived kagent-actors by 2 s after signal " << sig;
}

INSTANTIATE_TEST_SUITE_P(Signals, KillDuringHang, ::testing::Values(SIGKILL, SIGTERM, SIGINT),
                         [](const auto& info) { return std::string(sigabbrev_np(info.param)); });
