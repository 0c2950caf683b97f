// The manager's protocol in a real actor system, with no Python harness: scripted fake gpu workers
// (spawned through the manager's gpu_worker_factory) answer the starting kernel's evaluation and each
// candidate_spec by a script, ask the manager dedup_query as real candidates do, and one of them dies
// mid-candidate. The LLM is the replay provider (parent analyses ask it for directions).
#include <gtest/gtest.h>

#include <caf/all.hpp>

#include <algorithm>
#include <atomic>
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

using deliver_atom = caf::atom_constant<caf::atom("deliver")>;


/// What the fake workers saw, in the order the manager's messages arrived (all workers together).
struct protocol_log {
  std::mutex m;
  std::vector<std::string> seq;               ///< "evaluate initial@0", "spec r1_c0@1", "result r1_c0", ...
  std::vector<candidate_spec> specs;
  std::map<std::string, std::string> dedup;   ///< candidate -> duplicate_of as the manager answered
  int spawned = 0;
  int in_flight = 0, max_in_flight = 0;
  void add(const std::string& s) {
    std::lock_guard<std::mutex> g(m);
    seq.push_back(s);
  }
};

/// The script: how each candidate ends. "crash" kills the worker that holds it.
struct outcome {
  bool ok;
  double ms;
  std::string hash;
  std::string cause;
};
const std::map<std::string, outcome> kScript{
    {"r1_c0", {true, 5.0, "hA", ""}},
    {"r1_c1", {true, 8.0, "h-init", ""}},  // compiles to the starting kernel: a duplicate
    {"r2_c2", {true, 3.0, "hB", ""}},      // the same compiled code as r2_c5
    {"r2_c3", {false, -1, "", "crash"}},
    {"r2_c4", {false, -1, "", "verification"}},
    {"r2_c5", {true, 3.2, "hB", ""}},
};

struct fake_state {
  static inline const char* name = "fake_gpu_worker";
  std::map<std::string, caf::response_promise> pending;
  std::map<std::string, candidate_result> results;
};

caf::behavior fake_gpu_worker(caf::stateful_actor<fake_state>* self, int index, caf::actor manager,
                              std::shared_ptr<protocol_log> log) {
  return {
      [=](const evaluate& e) {
        log->add(std::string("evaluate ") + to_string(e.mode) + "@" + std::to_string(index));
        evaluation r;
        r.candidate_id = e.candidate_id;
        r.verified = r.benchmarked = true;
        r.time_ms = 10.0;
        r.eager_ms = 12.0;
        r.compile_ms = 11.0;
        r.code_hash = "h-init";
        r.wall_s = 0.5;
        return r;
      },
      [=](const profile& p) {
        log->add("profile " + p.label + " " + p.candidate_id + "@" + std::to_string(index));
        profile_result r;
        r.candidate_id = p.candidate_id;
        r.profile.label = p.label;
        r.profile.platform = "noop";
        return r;
      },
      [=](const candidate_spec& spec) -> caf::result<candidate_result> {
        {
          std::lock_guard<std::mutex> g(log->m);
          log->seq.push_back("spec " + spec.id + "@" + std::to_string(index));
          log->specs.push_back(spec);
          log->max_in_flight = std::max(log->max_in_flight, ++log->in_flight);
        }
        const auto& o = kScript.at(spec.id);
        if (o.cause == "crash") {
          self->quit(caf::sec::runtime_error);
          return caf::sec::runtime_error;
        }
        candidate_result r;
        r.candidate_id = spec.id;
        r.parent_id = spec.parent_id;
        r.round = spec.round;
        r.ok = o.ok;
        r.code = "# kernel " + spec.id + "\n";
        r.time_ms = o.ok ? o.ms : not_measured;
        r.code_hash = o.hash;
        if (!o.ok) r.failure_cause = parse_failure_kind(o.cause);
        r.error = o.ok ? "" : "scripted " + o.cause;
        r.model = spec.model;
        r.device_s = 0.25;
        self->state.results[spec.id] = r;
        self->state.pending[spec.id] = self->make_response_promise();
        if (!o.ok) {
          self->delayed_send(self, 20ms, deliver_atom::value, spec.id);
        } else {
          // As a real candidate does before its profile: is this compiled code known?
          self->request(manager, caf::infinite, dedup_query{spec.id, o.hash})
              .then([=](const dedup_answer& a) {
                {
                  std::lock_guard<std::mutex> g(log->m);
                  log->dedup[spec.id] = a.duplicate_of;
                }
                self->delayed_send(self, 20ms, deliver_atom::value, spec.id);
              });
        }
        return self->state.pending[spec.id];
      },
      [=](deliver_atom, const std::string& id) {
        {
          std::lock_guard<std::mutex> g(log->m);
          log->seq.push_back("result " + id);
          --log->in_flight;
        }
        self->state.pending[id].deliver(self->state.results[id]);
        self->state.pending.erase(id);
      },
      [=](mode_atom, analysis_mode) {},
      [=](interrupt_atom, int) { return true; },
  };
}

struct manager_case {
  fs::path root = fs::temp_directory_path() / ("kagent-manager-" + std::to_string(::getpid()));
  std::shared_ptr<run_context> ctx = std::make_shared<run_context>();
  std::shared_ptr<protocol_log> log = std::make_shared<protocol_log>();

  manager_case() {
    test::fill_scripted_context(*ctx, root, "protocol", 2);
  }
  ~manager_case() { fs::remove_all(root); }

  /// Runs the manager over the fake workers to its end; a run that never ends, or ends with another
  /// exit code than 0, fails the test (the caller stops on HasFailure()).
  nlohmann::json run_to_exit_zero() {
    int code = -1;
    nlohmann::json summary;
    EXPECT_TRUE(test::run_manager_to_the_end(context_ptr{ctx}, fakes(), code, summary)) << "the manager never finished";
    EXPECT_EQ(code, 0) << summary.dump(2);
    return summary;
  }

  gpu_worker_factory fakes() {
    auto l = log;
    return [l](caf::event_based_actor* manager, int index, int, llm_api, device_actor_type) {
      {
        std::lock_guard<std::mutex> g(l->m);
        ++l->spawned;
      }
      return manager->spawn(fake_gpu_worker, index, caf::actor{manager}, l);
    };
  }
};

size_t position(const std::vector<std::string>& seq, const std::string& what) {
  for (size_t i = 0; i < seq.size(); ++i)
    if (seq[i].rfind(what, 0) == 0) return i;
  return seq.size();
}

} // namespace

TEST(ManagerProtocol, RoundsDedupAWorkerDeathAndTheSummaryWithScriptedWorkers) {
  manager_case mc;
  int code = -1;
  nlohmann::json summary;
  ASSERT_TRUE(test::run_manager_to_the_end(context_ptr{mc.ctx}, mc.fakes(), code, summary))
      << "the manager never finished";
  const auto& log = *mc.log;
  ASSERT_EQ(code, 0) << summary.dump(2);

  // The starting kernel is evaluated first, on the first device, before anything is planned.
  ASSERT_FALSE(log.seq.empty());
  EXPECT_EQ(log.seq.front(), "evaluate initial@0");
  // Its test.py and reference timings run on the same device while its analysis waits for the LLM,
  // once, and no candidate goes out before they are done: every prompt has PyTorch eager's time.
  const size_t checks = position(log.seq, "evaluate start_checks@0");
  ASSERT_NE(checks, log.seq.size());
  EXPECT_LT(checks, position(log.seq, "spec "));
  EXPECT_EQ(std::count(log.seq.begin(), log.seq.end(), "evaluate start_checks@0"), 1);
  // Round barrier: no round-2 candidate goes out before every round-1 result is in.
  const size_t first_r2 = position(log.seq, "spec r2_");
  EXPECT_LT(position(log.seq, "result r1_c0"), first_r2);
  EXPECT_LT(position(log.seq, "result r1_c1"), first_r2);
  // num_workers: never more than 2 candidates in flight, spread over both devices.
  EXPECT_LE(log.max_in_flight, 2);
  EXPECT_NE(position(log.seq, "spec r1_c0@0"), log.seq.size());
  EXPECT_NE(position(log.seq, "spec r1_c1@1"), log.seq.size());
  // Every candidate carries its parent's analysis (asked for once per parent, before dispatch).
  ASSERT_EQ(log.specs.size(), 6u);
  for (const auto& s : log.specs) {
    ASSERT_TRUE(s.baseline) << s.id;
    EXPECT_EQ(s.baseline->source, "llm") << s.id;
    EXPECT_EQ(s.num_bottlenecks, 2);
    EXPECT_TRUE(s.worker_id == 0 || s.worker_id == 1) << s.id;
    EXPECT_DOUBLE_EQ(s.eager_ms, 12.0) << s.id;
  }
  // Dedup: the starting kernel's code is known; of two identical siblings the first to ask claims it.
  EXPECT_EQ(log.dedup.at("r1_c1"), "initial");
  EXPECT_EQ(log.dedup.at("r1_c0"), "");
  // Round 2: the starting kernel's candidates (r2_c4, r2_c5) go out while r1_c0, a new parent, is
  // still being analysed; so r2_c5 claims hB first and r2_c2, the same code, is its duplicate.
  EXPECT_LT(position(log.seq, "spec r2_c4"), position(log.seq, "spec r2_c2"));
  EXPECT_LT(position(log.seq, "spec r2_c5"), position(log.seq, "spec r2_c2"));
  EXPECT_EQ(log.dedup.at("r2_c5"), "");
  EXPECT_EQ(log.dedup.at("r2_c2"), "r2_c5");
  // The dead worker was replaced once, and its candidate recorded as actor_down.
  EXPECT_EQ(log.spawned, 3);

  EXPECT_TRUE(summary["success"].get<bool>());
  EXPECT_EQ(summary["rounds"], 2);
  EXPECT_EQ(summary["candidates"], 6);
  EXPECT_EQ(summary["verified"], 2);
  EXPECT_EQ(summary["duplicates"], 2);
  EXPECT_EQ(summary["failed"], 2);
  EXPECT_EQ(summary["failures_by_cause"]["actor_down"], 1);
  EXPECT_EQ(summary["failures_by_cause"]["verification"], 1);
  // The first of two identical kernels is the original, even when the duplicate timed faster.
  EXPECT_DOUBLE_EQ(summary["best_ms"].get<double>(), 3.2);
  EXPECT_EQ(summary["best_program_id"], "r2_c5");
  EXPECT_DOUBLE_EQ(summary["speedup_vs_initial"].get<double>(), 10.0 / 3.2);

  auto db = store::program_db::open(fs::path(mc.ctx->run_path) / "program.db", store::program_db::mode::read_only);
  for (const auto& p : db.list_programs()) EXPECT_NE(p.status, "pending") << p.id;
  EXPECT_EQ(db.get_program("r2_c3")->failure_cause.value_or(""), "actor_down");
  EXPECT_EQ(db.get_program("r1_c1")->error.value_or(""), "same compiled code as initial");
  EXPECT_EQ(db.get_state(store::state_key::round_done).value_or(""), "2");
  std::ifstream events(fs::path(mc.ctx->run_path) / "events.jsonl");
  std::string line, all;
  while (std::getline(events, line)) all += line + "\n";
  EXPECT_NE(all.find("\"gpu worker respawned\""), std::string::npos);
  EXPECT_NE(all.find("\"run_end\""), std::string::npos);
}

// With a profiler and one device, the starting kernel's checks wait for its baseline profile (the LLM's
// diagnosis needs it first), then take the device while the LLM writes the diagnosis.
TEST(ManagerProtocol, TheStartingKernelsChecksRunAfterItsProfileAndBeforeAnyCandidate) {
  manager_case mc;
  mc.ctx->cfg.profile = "parents";
  mc.ctx->cfg.max_rounds = 1;
  mc.ctx->device_ids = {0};
  const auto summary = mc.run_to_exit_zero();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto& seq = mc.log->seq;
  const size_t profile = position(seq, "profile baseline initial@0");
  ASSERT_NE(profile, seq.size());
  EXPECT_LT(position(seq, "evaluate initial@0"), profile);
  EXPECT_LT(profile, position(seq, "evaluate start_checks@0"));
  EXPECT_LT(position(seq, "evaluate start_checks@0"), position(seq, "spec "));
  EXPECT_DOUBLE_EQ(summary["eager_ms"].get<double>(), 12.0);
  EXPECT_DOUBLE_EQ(summary["compile_ms"].get<double>(), 11.0);
}

// With two devices, the starting kernel is profiled on the second while the first runs its checks.
TEST(ManagerProtocol, WithTwoDevicesTheStartingKernelIsProfiledOnTheSecondDuringItsChecks) {
  manager_case mc;
  mc.ctx->cfg.profile = "parents";
  mc.ctx->cfg.max_rounds = 1;
  const auto summary = mc.run_to_exit_zero();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto& seq = mc.log->seq;
  ASSERT_NE(position(seq, "profile baseline initial@1"), seq.size());
  EXPECT_EQ(position(seq, "profile baseline initial@0"), seq.size());
  ASSERT_NE(position(seq, "evaluate start_checks@0"), seq.size());
  EXPECT_LT(position(seq, "evaluate start_checks@0"), position(seq, "spec "));
}

// KAGENT_START_CHECKS=first (side-by-side measurements of the overlap): the checks before the profile.
TEST(ManagerProtocol, StartChecksFirstRunsThemBeforeTheStartingKernelsProfile) {
  manager_case mc;
  mc.ctx->cfg.profile = "parents";
  mc.ctx->cfg.max_rounds = 1;
  mc.ctx->child_env["KAGENT_START_CHECKS"] = "first";
  const auto summary = mc.run_to_exit_zero();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto& seq = mc.log->seq;
  ASSERT_NE(position(seq, "profile baseline initial"), seq.size());
  EXPECT_LT(position(seq, "evaluate start_checks@0"), position(seq, "profile baseline initial"));
  EXPECT_EQ(std::count(seq.begin(), seq.end(), "evaluate start_checks@0"), 1);
}

// A run stopped after its starting kernel was timed but before its checks ended (program.db has the
// verified start and no start_checked) runs them when it is resumed, before any candidate.
TEST(ManagerProtocol, AResumeRunsTheStartingKernelsChecksThatTheEarlierSessionDidNotFinish) {
  manager_case mc;
  mc.ctx->cfg.max_rounds = 1;
  {
    auto db = store::program_db::open(fs::path(mc.ctx->run_path) / "program.db");
    store::program_record init;
    init.id = "initial";
    init.status = store::program_status::verified;
    init.code = mc.ctx->input_code;
    init.time_ms = 10.0;
    init.code_hash = "h-init";
    db.insert_program(init);
    db.set_state_json(store::state_key::initial_ms, 10.0);
    db.set_state_json(store::state_key::eager_ms, nullptr);
  }
  mc.ctx->resume = true;
  const auto summary = mc.run_to_exit_zero();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto& seq = mc.log->seq;
  EXPECT_EQ(position(seq, "evaluate initial@0"), seq.size()) << "the verified start is not evaluated again";
  ASSERT_NE(position(seq, "evaluate start_checks@0"), seq.size());
  EXPECT_LT(position(seq, "evaluate start_checks@0"), position(seq, "spec "));
  EXPECT_DOUBLE_EQ(summary["eager_ms"].get<double>(), 12.0);
  auto db = store::program_db::open(fs::path(mc.ctx->run_path) / "program.db", store::program_db::mode::read_only);
  EXPECT_EQ(db.get_state(store::state_key::start_checked).value_or(""), "1");
}
