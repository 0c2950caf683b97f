// Issue 14, "keep the GPU fed behind a slow LLM": the manager records a candidate when it is measured
// (candidate_measured, before its reflexion) and the pipeline's candidate_result later only adds the
// reflexion. A real actor system with scripted fake gpu workers: each measured candidate tells the
// manager so at once, as a real candidate does through its worker, and its reflexion comes back only
// after a delay (a slow LLM). The fakes log, in order, what the manager asked of them and when each
// pipeline ended, and look at program.db and the published best when a reflexion comes back.
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <filesystem>
#include <fstream>
#include <mutex>

#include "actors/manager.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/run_directory.hpp"
#include "tests/support/actor_system.hpp"
#include "tests/support/manager_context.hpp"

using namespace kagent;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

using reflected_atom = caf::atom_constant<caf::atom("reflected")>;
using fail_atom = caf::atom_constant<caf::atom("fail")>;

/// How long a measured candidate's reflexion takes.
constexpr auto kReflexion = 700ms;

/// How a candidate ends. `after` (measured candidates only): "reflexion" (its result with the
/// reflexion), "timeout" (its deadline ends it during the reflexion), "crash" (its worker dies then).
struct outcome {
  bool ok;
  double ms;
  std::string hash;
  std::string cause;  ///< a failure before the measurement (no candidate_measured)
  std::string after = "reflexion";
};
using script = std::map<std::string, outcome>;

struct fake_log {
  std::mutex m;
  std::vector<std::string> seq;  ///< "spec r1_c0@0", "measured r1_c0", "profile baseline r1_c0", "result r1_c0", ...
  std::map<std::string, std::string> status_at_reflexion;  ///< program.db's status when the reflexion came back
  std::map<std::string, double> best_at_reflexion;         ///< the published best then
  std::map<std::string, int> specs;                        ///< how often each candidate was dispatched
  int spawned = 0;
  void add(const std::string& s) {
    std::lock_guard<std::mutex> g(m);
    seq.push_back(s);
  }
};

struct fake_state {
  static inline const char* name = "fake_gpu_worker";
  std::map<std::string, caf::response_promise> pending;
  std::map<std::string, candidate_result> results;
  std::map<std::string, candidate_spec> specs;
};

store::attempt_record attempt_of(const candidate_spec& spec, double ms) {
  store::attempt_record a;
  a.round_num = spec.round;
  a.bottleneck_category = "memory";
  a.time_after_ms = ms;
  a.passed_verification = true;
  return a;
}

store::reflexion_record reflexion_of(const candidate_spec& spec) {
  store::reflexion_record r;
  r.round_num = spec.round;
  r.reasoning = "reflexion on " + spec.id;
  r.lessons = {"lesson of " + spec.id};
  return r;
}

caf::behavior fake_gpu_worker(caf::stateful_actor<fake_state>* self, int index, caf::actor manager,
                              std::shared_ptr<fake_log> log, std::shared_ptr<const script> plan, context_ptr ctx) {
  return {
      [=](const evaluate& e) {
        log->add(std::string("evaluate ") + to_string(e.mode));
        evaluation r;
        r.candidate_id = e.candidate_id;
        r.verified = r.benchmarked = true;
        r.time_ms = 10.0;
        r.code_hash = "h-init";
        r.wall_s = 0.5;
        return r;
      },
      [=](const profile& p) {
        log->add("profile " + p.label + " " + p.candidate_id);
        profile_result r;  // not available: no profile is kept, so the best always gets its final profile
        r.candidate_id = p.candidate_id;
        r.profile.label = p.label;
        r.profile.platform = "nvidia";
        return r;
      },
      [=](const candidate_spec& spec) -> caf::result<candidate_result> {
        {
          std::lock_guard<std::mutex> g(log->m);
          log->seq.push_back("spec " + spec.id + "@" + std::to_string(index));
          ++log->specs[spec.id];
        }
        const auto& o = plan->at(spec.id);
        candidate_result r;
        r.candidate_id = spec.id;
        r.parent_id = spec.parent_id;
        r.round = spec.round;
        r.gpu_id = index;
        r.model = spec.model;
        r.code = "# kernel " + spec.id + "\n";
        r.device_s = 0.25;
        r.llm_s = 1.0;
        self->state.specs[spec.id] = spec;
        self->state.pending[spec.id] = self->make_response_promise();
        if (!o.cause.empty()) {
          r.failure_cause = parse_failure_kind(o.cause);
          r.error = "scripted " + o.cause;
          self->state.results[spec.id] = r;
          self->delayed_send(self, 20ms, fail_atom::value, spec.id);
          return self->state.pending[spec.id];
        }
        r.ok = true;
        r.time_ms = o.ms;
        r.code_hash = o.hash;
        r.attempt = {attempt_of(spec, o.ms)};
        self->state.results[spec.id] = r;
        // As a real candidate: dedup, then (measured, before the reflexion) candidate_measured.
        self->request(manager, caf::infinite, dedup_query{spec.id, o.hash}).then([=](const dedup_answer&) {
          log->add("measured " + spec.id);
          self->send(manager, candidate_measured{self->state.results[spec.id]});
          self->delayed_send(self, kReflexion, reflected_atom::value, spec.id);
        });
        return self->state.pending[spec.id];
      },
      [=](fail_atom, const std::string& id) {
        log->add("result " + id);
        self->state.pending[id].deliver(self->state.results[id]);
        self->state.pending.erase(id);
      },
      [=](reflected_atom, const std::string& id) {
        const auto& o = plan->at(id);
        {
          // What the run knows of this candidate when its reflexion comes back.
          auto db = store::program_db::open(fs::path(ctx->run_path) / "program.db", store::program_db::mode::read_only);
          auto p = db.get_program(id);
          std::lock_guard<std::mutex> g(log->m);
          log->status_at_reflexion[id] = p ? p->status : "none";
          log->best_at_reflexion[id] = ctx->recorded_best_ms->load();
          log->seq.push_back("result " + id);
        }
        const auto& spec = self->state.specs[id];
        if (o.after == "crash") {
          self->quit(caf::sec::runtime_error);
          return;
        }
        if (o.after == "timeout") {
          self->state.pending[id].deliver(
              ended_without_result(spec, index, failure_kind::timeout, "candidate exceeded candidate_timeout_s=60"));
        } else {
          auto r = self->state.results[id];
          r.reflexion = {reflexion_of(spec)};
          r.llm_s += 1.5;  // the reflexion's wait
          self->state.pending[id].deliver(r);
        }
        self->state.pending.erase(id);
      },
      [=](mode_atom, analysis_mode) {},
      [=](interrupt_atom, int) { return true; },
  };
}

struct reflexion_case {
  fs::path root = fs::temp_directory_path() / ("kagent-reflexion-" + std::to_string(::getpid()));
  std::shared_ptr<run_context> ctx = std::make_shared<run_context>();
  std::shared_ptr<fake_log> log = std::make_shared<fake_log>();
  std::shared_ptr<const script> plan;
  int code = -1;
  nlohmann::json summary;
  std::vector<nlohmann::json> events;

  reflexion_case(script s, int rounds) : plan(std::make_shared<const script>(std::move(s))) {
    test::fill_scripted_context(*ctx, root, "reflexion", rounds);
    ctx->cfg.profile = "parents";
    ctx->cfg.platform.profiler = "nvidia";  // parents and the best are profiled (by the fakes)
  }
  ~reflexion_case() { fs::remove_all(root); }

  /// Device 1 as another node's (its worker's death is the node's loss).
  void second_device_on_a_node() {
    ctx->device_ids = {0, 100};
    ctx->remote_devices = {remote_device{100, "nodeA", 0, "fake", device_actor_type{}}};
  }

  void run() {
    auto l = log;
    auto p = plan;
    context_ptr cp{ctx};
    gpu_worker_factory fakes = [l, p, cp](caf::event_based_actor* manager, int index, int, llm_api, device_actor_type) {
      {
        std::lock_guard<std::mutex> g(l->m);
        ++l->spawned;
      }
      return manager->spawn(fake_gpu_worker, index, caf::actor{manager}, l, p, cp);
    };
    ASSERT_TRUE(test::run_manager_to_the_end(cp, fakes, code, summary)) << "the manager never finished";
    std::ifstream f(fs::path(ctx->run_path) / "events.jsonl");
    std::string line;
    while (std::getline(f, line)) events.push_back(nlohmann::json::parse(line));
  }

  size_t position(const std::string& what) const {
    for (size_t i = 0; i < log->seq.size(); ++i)
      if (log->seq[i] == what) return i;
    return log->seq.size();
  }
  size_t last_result() const {
    size_t last = 0;
    for (size_t i = 0; i < log->seq.size(); ++i)
      if (log->seq[i].rfind("result ", 0) == 0) last = i;
    return last;
  }
  std::vector<nlohmann::json> events_of(const std::string& type) const {
    std::vector<nlohmann::json> out;
    for (const auto& e : events)
      if (e.value("type", "") == type) out.push_back(e);
    return out;
  }
  size_t event_index(const std::string& type, const std::string& id = "") const {
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].value("type", "") == type && (id.empty() || events[i].value("candidate_id", "") == id)) return i;
    return events.size();
  }
  std::string dump() const {
    std::string s;
    for (const auto& x : log->seq) s += x + "\n";
    return s;
  }
};

} // namespace

// (a) A new best is recorded, published and expanded (its parent analysis starts) while its
// reflexion is still out; (b) the final profile of the best starts while the last reflexions are out,
// and the run ends after both; (c) nothing is recorded twice: one program row, one attempt, one
// result event per candidate, and the reflexions that came back attached to their programs.
TEST(RecordBeforeReflexion, ANewBestIsExpandedAndTheBestProfiledWhileReflexionsAreOut) {
  reflexion_case rc(
      {
          {"r1_c0", {true, 5.0, "hA", ""}},             // a new best
          {"r1_c1", {true, 8.0, "h-init", ""}},         // the starting kernel's code: a duplicate
          {"r2_c2", {true, 2.0, "hB", ""}},             // the run's best
          {"r2_c3", {true, 4.0, "hC", "", "timeout"}},  // its deadline ends it during the reflexion
          {"r2_c4", {false, -1, "", "verification"}},   // fails before any measurement
          {"r2_c5", {true, 6.0, "hD", ""}},
      },
      2);
  rc.run();
  ASSERT_EQ(rc.code, 0) << rc.summary.dump(2);
  const auto& log = *rc.log;
  const auto seq = rc.dump();

  // (a) r1_c0 was in program.db, and the best the devices see, before its reflexion came back ...
  EXPECT_EQ(log.status_at_reflexion.at("r1_c0"), "verified") << seq;
  EXPECT_DOUBLE_EQ(log.best_at_reflexion.at("r1_c0"), 5.0) << seq;
  EXPECT_EQ(log.status_at_reflexion.at("r1_c1"), "failed") << seq;  // the duplicate too
  // ... and its parent analysis (the baseline profile) started then too.
  EXPECT_LT(rc.position("profile baseline r1_c0"), rc.position("result r1_c0")) << seq;
  EXPECT_LT(rc.event_index("analysis_start"), rc.events.size());
  // (b) The best (r2_c2, never profiled) gets its final profile while reflexions are still out; the
  // run ends once they and the profile are done.
  const size_t final_profile = rc.position("profile final r2_c2");
  ASSERT_LT(final_profile, log.seq.size()) << seq;
  EXPECT_LT(final_profile, rc.last_result()) << seq;
  const size_t run_end = rc.event_index("run_end");
  ASSERT_LT(run_end, rc.events.size());
  for (size_t i = 0; i < rc.events.size(); ++i)
    if (rc.events[i].value("type", "") == "candidate_end") {
      EXPECT_LT(i, run_end);
    }
  EXPECT_LT(rc.event_index("note"), run_end);

  // (c) Each candidate ran once and was recorded once.
  for (const auto& [id, n] : log.specs) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(log.specs.size(), 6u);
  EXPECT_EQ(rc.summary["candidates"], 6);
  EXPECT_EQ(rc.summary["verified"], 4);  // r1_c0, r2_c2, r2_c3 (recorded before its timeout), r2_c5
  EXPECT_EQ(rc.summary["duplicates"], 1);
  EXPECT_EQ(rc.summary["failed"], 1);
  EXPECT_EQ(rc.summary["failures_by_cause"].size(), 2u) << rc.summary.dump(2);  // no timeout among them
  EXPECT_EQ(rc.summary["failures_by_cause"]["verification"], 1);
  EXPECT_EQ(rc.summary["failures_by_cause"]["duplicate"], 1);
  // Device time counted once: the starting kernel's two steps (its evaluation, then its checks), 0.5 s
  // each, and 0.25 s per candidate.
  EXPECT_DOUBLE_EQ(rc.summary["device_s"].get<double>(), 2.5);
  EXPECT_EQ(rc.summary["best_program_id"], "r2_c2");
  EXPECT_DOUBLE_EQ(rc.summary["best_ms"].get<double>(), 2.0);

  auto db = store::program_db::open(fs::path(rc.ctx->run_path) / "program.db", store::program_db::mode::read_only);
  const auto programs = db.list_programs();
  EXPECT_EQ(programs.size(), 7u);  // the starting kernel and six candidates
  for (const auto& p : programs) EXPECT_NE(p.status, "pending") << p.id;
  EXPECT_EQ(db.get_program("r2_c3")->status, "verified");
  EXPECT_EQ(db.get_program("r1_c1")->failure_cause.value_or(""), "duplicate");
  std::multiset<std::string> attempts, reflexions;
  for (const auto& a : db.list_attempts()) attempts.insert(a.program_id.value_or("?"));
  for (const auto& r : db.list_reflexions()) {
    reflexions.insert(r.program_id.value_or("?"));
    EXPECT_EQ(r.reasoning, "reflexion on " + r.program_id.value_or("?"));
  }
  EXPECT_EQ(attempts, (std::multiset<std::string>{"r1_c0", "r1_c1", "r2_c2", "r2_c3", "r2_c5"}));
  // r2_c3's reflexion never came back.
  EXPECT_EQ(reflexions, (std::multiset<std::string>{"r1_c0", "r1_c1", "r2_c2", "r2_c5"}));

  // One candidate_result per candidate; one candidate_end per candidate recorded before its reflexion.
  EXPECT_EQ(rc.events_of("candidate_result").size(), 6u);
  std::set<std::string> pending, ended;
  for (const auto& e : rc.events_of("candidate_result"))
    if (e.value("reflexion_pending", false)) pending.insert(e.value("candidate_id", ""));
  for (const auto& e : rc.events_of("candidate_end")) {
    ended.insert(e.value("candidate_id", ""));
    const auto id = e.value("candidate_id", "");
    EXPECT_EQ(e.value("reflexion", true), id != "r2_c3") << e.dump();
    if (id == "r2_c3") {
      EXPECT_NE(e.value("error", "").find("candidate_timeout_s"), std::string::npos) << e.dump();
    }
  }
  EXPECT_EQ(pending, (std::set<std::string>{"r1_c0", "r1_c1", "r2_c2", "r2_c3", "r2_c5"}));
  EXPECT_EQ(ended, pending);
  EXPECT_EQ(rc.events_of("candidate_end").size(), 5u);
}

// A worker that dies while its candidate reflects: the candidate stays as recorded (no actor_down
// over a verified program, nothing run again); only its reflexion is lost.
TEST(RecordBeforeReflexion, AWorkerLostDuringAReflexionLeavesTheCandidateAsRecorded) {
  reflexion_case rc({{"r1_c0", {true, 5.0, "hA", "", "crash"}}, {"r1_c1", {true, 7.0, "hB", ""}}}, 1);
  rc.run();
  ASSERT_EQ(rc.code, 0) << rc.summary.dump(2);
  const auto& log = *rc.log;
  EXPECT_EQ(log.spawned, 3) << rc.dump();  // the dead worker was replaced
  for (const auto& [id, n] : log.specs) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(rc.summary["candidates"], 2);
  EXPECT_EQ(rc.summary["verified"], 2);
  EXPECT_EQ(rc.summary["failed"], 0);
  EXPECT_TRUE(rc.summary["failures_by_cause"].empty()) << rc.summary.dump(2);
  EXPECT_EQ(rc.summary["best_program_id"], "r1_c0");
  auto db = store::program_db::open(fs::path(rc.ctx->run_path) / "program.db", store::program_db::mode::read_only);
  EXPECT_EQ(db.get_program("r1_c0")->status, "verified");
  const auto reflexions = db.list_reflexions();
  ASSERT_EQ(reflexions.size(), 1u);
  EXPECT_EQ(reflexions[0].program_id.value_or(""), "r1_c1");
  EXPECT_EQ(rc.events_of("candidate_result").size(), 2u);
  ASSERT_EQ(rc.events_of("candidate_end").size(), 2u);
  for (const auto& e : rc.events_of("candidate_end"))
    if (e.value("candidate_id", "") == "r1_c0") {
      EXPECT_FALSE(e.value("reflexion", true));
      EXPECT_NE(e.value("error", "").find("gpu worker failed"), std::string::npos) << e.dump();
    }
}

// A node lost while its candidate reflects: the candidate is not sent back to the queue (it is
// recorded), and the run goes on with the devices left.
TEST(RecordBeforeReflexion, ANodeLostDuringAReflexionDoesNotRunItsRecordedCandidateAgain) {
  reflexion_case rc({{"r1_c0", {true, 5.0, "hA", ""}}, {"r1_c1", {true, 7.0, "hB", "", "crash"}}}, 1);
  rc.second_device_on_a_node();
  rc.run();
  ASSERT_EQ(rc.code, 0) << rc.summary.dump(2);
  const auto& log = *rc.log;
  EXPECT_EQ(log.spawned, 2) << rc.dump();  // a node's device is not respawned
  EXPECT_EQ(log.specs.at("r1_c1"), 1) << rc.dump();
  EXPECT_EQ(rc.summary["candidates"], 2);
  EXPECT_EQ(rc.summary["verified"], 2);
  EXPECT_TRUE(rc.summary["failures_by_cause"].empty()) << rc.summary.dump(2);
  const auto down = rc.events_of("node_down");
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].value("requeued", -1), 0);
  EXPECT_EQ(rc.events_of("candidate_end").size(), 2u);
  auto db = store::program_db::open(fs::path(rc.ctx->run_path) / "program.db", store::program_db::mode::read_only);
  EXPECT_EQ(db.get_program("r1_c1")->status, "verified");
  EXPECT_EQ(db.list_reflexions().size(), 1u);
}
