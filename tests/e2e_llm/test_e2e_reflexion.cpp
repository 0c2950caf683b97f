// Issue 14, "keep the GPU fed behind a slow LLM", end to end: real kagent-actors runs (noop platform,
// greedy, two pipelines) whose loopback LLM answers every reflexion late. A candidate is recorded as
// soon as it is measured, before its reflexion: the next round's candidate starts while the
// reflexion is still out, the reflexion is attached to the program when it comes back, and a run
// killed during a reflexion resumes without running the recorded candidate again.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "tests/e2e_llm/e2e_llm_util.hpp"

using namespace e2e_llm;

namespace {

bool is_reflexion(const received_request& rq) {
  return rq.body.find("so that later rounds can learn from it") != std::string::npos;
}

/// Rewrites get a unique valid kernel at once, bottleneck analyses their reply at once, reflexions
/// theirs after `reflexion_delay_s`.
class slow_reflexion_endpoint {
public:
  explicit slow_reflexion_endpoint(double delay_s) : reflexion_delay_s(delay_s) {}
  std::string base_url() const { return srv_.url() + "/v1"; }
  std::atomic<double> reflexion_delay_s;

private:
  std::atomic<int> rewrites_{0};
  loopback_server srv_{[this](const received_request& rq, int) {
    if (is_reflexion(rq)) {
      auto r = ok_reply(rq, side_reply_text(rq));
      r.delay_before_s = reflexion_delay_s.load();
      return r;
    }
    if (is_side_request(rq)) return ok_reply(rq, side_reply_text(rq));
    return ok_reply(rq, kernel_text(rewrites_++));
  }};
};

kagent::env_map run_env() {
  return {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey}, {"OPENAI_API_KEY", ""},
          {"ANTHROPIC_API_KEY", ""}, {"HTTP_PROXY", ""},         {"http_proxy", ""},     {"HTTPS_PROXY", ""},
          {"https_proxy", ""},       {"ALL_PROXY", ""},          {"all_proxy", ""},      {"NO_PROXY", ""},
          {"no_proxy", ""},          {"LLM_RELAY_URL", ""},      {"KAGENT_REPLAY_DELAY_S", ""}};
}

std::vector<std::string> run_args(const e2e::scratch& s, const slow_reflexion_endpoint& ep, int rounds) {
  run_options o;
  o.rounds = rounds;
  o.num_workers = 2;
  o.timeout_s = 30;  // a late reflexion is slow, not timed out
  o.idle_timeout_s = 30;
  const auto cfg = s.write("reflexion.yaml", config_yaml(ep.base_url(), o));
  return {"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()};
}

/// events.jsonl as far as it is written (a line being written is left out).
std::vector<json> events_so_far(const fs::path& run_dir) {
  std::vector<json> out;
  std::ifstream f(run_dir / "events.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(j);
  }
  return out;
}

/// The index of the first event of `type` (for `candidate`, and for llm_call of `purpose`); size() when none.
size_t index_of(const std::vector<json>& ev, const std::string& type, const std::string& candidate,
                const std::string& purpose = "") {
  for (size_t i = 0; i < ev.size(); ++i)
    if (ev[i].value("type", "") == type && ev[i].value("candidate_id", "") == candidate &&
        (purpose.empty() || ev[i].value("purpose", "") == purpose))
      return i;
  return ev.size();
}

size_t count_of(const std::vector<json>& ev, const std::string& type) {
  size_t n = 0;
  for (const auto& e : ev) n += e.value("type", "") == type ? 1 : 0;
  return n;
}

}  // namespace

// The candidate is recorded (candidate_result, program.db) when it is measured, and the next round's
// candidate goes out, while its reflexion is still out; the reflexion joins its program afterwards,
// and nothing is counted twice.
TEST(E2eReflexion, ACandidateIsRecordedAndTheNextOneStartsWhileItsReflexionIsOut) {
  e2e::scratch s;
  slow_reflexion_endpoint ep(2.5);
  auto proc = e2e::run(run_args(s, ep, 2), run_env(), s.dir.string(), 120);
  ASSERT_EQ(proc.exit_code, 0) << proc.err << proc.out;
  auto dirs = e2e::run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto ev = events_so_far(dirs.front());

  const size_t reflexion_r1 = index_of(ev, "llm_call", "r1_c0", "reflexion");
  ASSERT_LT(reflexion_r1, ev.size());
  const size_t recorded_r1 = index_of(ev, "candidate_result", "r1_c0");
  ASSERT_LT(recorded_r1, ev.size());
  EXPECT_LT(recorded_r1, reflexion_r1) << "r1_c0 was recorded only after its reflexion";
  EXPECT_TRUE(ev[recorded_r1].value("reflexion_pending", false)) << ev[recorded_r1].dump();
  EXPECT_LT(index_of(ev, "candidate_start", "r2_c1"), reflexion_r1) << "round 2 waited for round 1's reflexion";
  EXPECT_GT(index_of(ev, "candidate_end", "r1_c0"), reflexion_r1);
  EXPECT_LT(index_of(ev, "candidate_end", "r1_c0"), ev.size());
  EXPECT_LT(index_of(ev, "candidate_result", "r2_c1"), index_of(ev, "llm_call", "r2_c1", "reflexion"));

  // Once each.
  EXPECT_EQ(count_of(ev, "candidate_result"), 2u);
  EXPECT_EQ(count_of(ev, "candidate_end"), 2u);
  auto summary = json::parse(e2e::slurp(dirs.front() / "summary.json"));
  EXPECT_EQ(summary.value("candidates", -1), 2) << summary.dump(2);
  EXPECT_EQ(summary.value("verified", -1), 2) << summary.dump(2);
  auto db = program_db::open(dirs.front() / "program.db", program_db::mode::read_only);
  const auto programs = db.list_programs();
  EXPECT_EQ(programs.size(), 3u);
  for (const auto& p : programs) EXPECT_EQ(p.status, "verified") << p.id;
  std::multiset<std::string> attempts, reflexions;
  for (const auto& a : db.list_attempts()) attempts.insert(a.program_id.value_or("?"));
  for (const auto& r : db.list_reflexions()) reflexions.insert(r.program_id.value_or("?"));
  EXPECT_EQ(attempts, (std::multiset<std::string>{"r1_c0", "r2_c1"}));
  EXPECT_EQ(reflexions, (std::multiset<std::string>{"r1_c0", "r2_c1"}));
  size_t reflexion_calls = 0;
  for (const auto& c : db.list_llm_calls()) reflexion_calls += c.purpose == "reflexion" && c.ok ? 1 : 0;
  EXPECT_EQ(reflexion_calls, 2u);
}

// kill -9 while a recorded candidate reflects: --resume does not run it again (program.db is the
// truth, and it is complete there); the run ends with each candidate once.
TEST(E2eReflexion, AResumeAfterAKillDuringAReflexionDoesNotRunTheRecordedCandidateAgain) {
  e2e::scratch s;
  slow_reflexion_endpoint ep(6);
  const auto args = run_args(s, ep, 2);
  const pid_t pid = e2e::spawn_logged(args, run_env(), s.dir / "first.log");
  ASSERT_GT(pid, 0);
  bool reflecting = false, ended = false;
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!reflecting && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ended = true;  // it ended without ever being caught reflecting
      break;
    }
    auto dirs = e2e::run_dirs(s.dir / "runs");
    if (dirs.size() != 1) continue;
    const auto ev = events_so_far(dirs.front());
    const size_t i = index_of(ev, "candidate_result", "r1_c0");
    reflecting = i < ev.size() && ev[i].value("reflexion_pending", false);
  }
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(reflecting) << e2e::slurp(s.dir / "first.log");
  auto dirs = e2e::run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto run_dir = dirs.front();
  {
    auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
    EXPECT_EQ(db.get_program("r1_c0")->status, "verified");
    EXPECT_TRUE(db.list_reflexions().empty());
  }

  ep.reflexion_delay_s = 0;
  auto proc = e2e::run({"--resume", run_dir.string()}, run_env(), s.dir.string(), 120);
  ASSERT_EQ(proc.exit_code, 0) << proc.err << proc.out;
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  const auto programs = db.list_programs();
  EXPECT_EQ(programs.size(), 3u);
  for (const auto& p : programs) EXPECT_EQ(p.status, "verified") << p.id;
  size_t optimize_r1 = 0;
  for (const auto& c : db.list_llm_calls())
    optimize_r1 += c.candidate_id.value_or("") == "r1_c0" && c.purpose == "optimize" ? 1 : 0;
  EXPECT_EQ(optimize_r1, 1u) << "the recorded candidate was run again";
  // The resumed session started r2_c1 at most (never r1_c0).
  const auto ev = events_so_far(run_dir);
  size_t resumed_at = 0;
  for (size_t i = 0; i < ev.size(); ++i)
    if (ev[i].value("type", "") == "resume") resumed_at = i;
  ASSERT_GT(resumed_at, 0u);
  for (size_t i = resumed_at; i < ev.size(); ++i)
    EXPECT_FALSE(ev[i].value("type", "") == "candidate_start" && ev[i].value("candidate_id", "") == "r1_c0");
  auto summary = json::parse(e2e::slurp(run_dir / "summary.json"));
  EXPECT_EQ(summary.value("candidates", -1), 2) << summary.dump(2);
  EXPECT_EQ(summary.value("verified", -1), 2) << summary.dump(2);
  // r1_c0's reflexion died with the first session; r2_c1's (run or re-run now) is there once.
  std::multiset<std::string> reflexions;
  for (const auto& r : db.list_reflexions()) reflexions.insert(r.program_id.value_or("?"));
  EXPECT_EQ(reflexions.count("r1_c0"), 0u);
  EXPECT_LE(reflexions.count("r2_c1"), 1u);
}
