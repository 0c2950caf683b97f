// The search ledger's rules, values in and values out: no actor system, no program.db file. A small
// `book` below commits what the manager commits (a pending row and its plan when a candidate is
// planned, the verdict when it finishes), so that --resume can be replayed from those records.
#include <gtest/gtest.h>

#include "platform/search/ledger.hpp"
#include "platform/store/util.hpp"

using namespace kagent;
using namespace kagent::search;

namespace {

run_config beam(int n, int m, const std::string& schedule = "rounds") {
  run_config c;
  c.strategy = "beam_search";
  c.strategy_cfg.num_top_kernels = n;
  c.strategy_cfg.num_bottlenecks = m;
  c.strategy_cfg.schedule = schedule;
  c.max_rounds = 3;
  return c;
}

run_config greedy_cfg(int max_no_improvement = 2) {
  run_config c;
  c.strategy = "greedy";
  c.strategy_cfg.max_no_improvement = max_no_improvement;
  c.max_rounds = 8;
  return c;
}

ledger make(const run_config& c, double divergence = 50.0) {
  return ledger(make_strategy(c, "m"), {c.max_rounds, divergence, c.strategy_cfg.schedule == "async"});
}

program_entry initial(double ms = 10.0, const std::string& hash = "h-initial") {
  return {"initial", "", "code initial", ms, 0, hash};
}

finished ok(const std::string& id, double ms, const std::string& hash) {
  return {id, true, ms, "code " + id, hash, std::nullopt, ""};
}
finished failed(const std::string& id, const std::string& cause) { return {id, false, -1, "code " + id, "", parse_failure_kind(cause), "boom"}; }

/// What program.db holds after the manager's commits.
struct book {
  std::vector<store::program_record> programs;
  std::map<std::string, nlohmann::json> plans;
  int round_done = 0;
  std::set<std::string> diverged;

  explicit book(const program_entry& init) {
    store::program_record r;
    r.id = "initial";
    r.status = store::program_status::verified;
    r.code = init.code;
    r.time_ms = init.time_ms;
    r.code_hash = init.code_hash;
    programs.push_back(r);
  }
  void plan(const std::vector<planned>& ps) {
    for (const auto& p : ps) {
      store::program_record r;
      r.id = p.id;
      r.parent_id = p.parent.id;
      r.round = p.round;
      programs.push_back(r);
      plans[p.id] = plan_to_json(p);
    }
  }
  void result(const finished& f, const judgement& j) {
    for (auto& r : programs) {
      if (r.id != f.id) continue;
      r.code = f.code;
      r.code_hash = j.code_hash;
      r.status = j.ok ? store::program_status::verified : store::program_status::failed;
      if (!j.ok) r.failure_cause = to_string(j.failure_cause.value_or(failure_kind::unknown));
      if (j.ok || (j.failure_cause == failure_kind::duplicate && f.time_ms >= 0)) r.time_ms = f.time_ms;
    }
    if (j.diverged) diverged.insert(f.id);
  }
};

std::vector<std::string> ids(const std::vector<planned>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) out.push_back(p.id);
  return out;
}

} // namespace

TEST(Ledger, PlansARoundWithRunWideIdsAndKnowsWhenItIsDone) {
  auto l = make(beam(2, 3));
  l.start(initial());
  auto r1 = l.plan_round(1);
  EXPECT_EQ(ids(r1), (std::vector<std::string>{"r1_c0", "r1_c1", "r1_c2"}));
  for (size_t i = 0; i < r1.size(); ++i) {
    EXPECT_EQ(r1[i].parent.id, "initial");
    EXPECT_EQ(r1[i].direction, static_cast<int>(i) + 1);
    EXPECT_EQ(r1[i].round, 1);
  }
  EXPECT_EQ(l.outstanding(), 3u);
  EXPECT_FALSE(l.round_done());
  l.record(ok("r1_c0", 8.0, "h0"));
  l.record(failed("r1_c1", "verification"));
  EXPECT_FALSE(l.round_done());
  l.record(ok("r1_c2", 6.0, "h2"));
  EXPECT_TRUE(l.round_done());
  auto closed = l.end_round();
  ASSERT_TRUE(closed.best);
  EXPECT_EQ(closed.best->id, "r1_c2");
  EXPECT_FALSE(closed.terminate);
  // Round 2 expands the beam (r1_c2, r1_c0) and numbers on from where round 1 stopped.
  auto r2 = l.plan_round(2);
  ASSERT_EQ(r2.size(), 6u);
  EXPECT_EQ(r2.front().id, "r2_c3");
  EXPECT_EQ(r2.front().parent.id, "r1_c2");
  EXPECT_EQ(r2.back().parent.id, "r1_c0");
  EXPECT_EQ(l.next_candidate(), 9);
}

TEST(Ledger, ANewBestIsDecidedAgainstEverythingKnownBeforeIt) {  // SPEC §14 B.81
  auto l = make(beam(2, 3));
  l.start(initial(10.0));
  l.plan_round(1);
  auto a = l.record(ok("r1_c0", 8.0, "ha"));
  EXPECT_TRUE(a.new_best);
  EXPECT_DOUBLE_EQ(a.best_ms, 8.0);
  auto b = l.record(ok("r1_c1", 9.0, "hb"));  // faster than the initial kernel, slower than r1_c0
  EXPECT_FALSE(b.new_best);
  EXPECT_DOUBLE_EQ(b.best_ms, 8.0);
  auto c = l.record(failed("r1_c2", "crash"));
  EXPECT_FALSE(c.new_best);
  EXPECT_DOUBLE_EQ(c.best_ms, 8.0);
  ASSERT_TRUE(l.best());
  EXPECT_EQ(l.best()->id, "r1_c0");  // before the round is closed, its results count
}

TEST(Ledger, SameCompiledCodeAsAVerifiedKernelOrAnEarlierClaimIsADuplicate) {  // B.88
  auto l = make(beam(2, 3));
  l.start(initial(10.0, "h-initial"));
  l.plan_round(1);
  // The starting kernel's code under another wrapper that compiles to the same kernel.
  auto d = l.record(ok("r1_c0", 5.0, "h-initial"));
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.failure_cause, failure_kind::duplicate);
  EXPECT_EQ(d.error, "same compiled code as initial");
  EXPECT_FALSE(d.new_best) << "a duplicate never becomes the best, however lucky its timing";
  EXPECT_FALSE(d.fed) << "beam search would let a luckier timing displace the original";
  // Two identical siblings in flight: the first to ask claims the hash; the later one is its duplicate.
  EXPECT_EQ(l.duplicate_of("h-new", "r1_c1"), "");
  l.claim("h-new", "r1_c1");
  EXPECT_EQ(l.duplicate_of("h-new", "r1_c2"), "r1_c1");
  EXPECT_EQ(l.duplicate_of("h-new", "r1_c1"), "") << "a candidate is not its own duplicate";
  auto first = l.record(ok("r1_c1", 7.0, "h-new"));
  EXPECT_TRUE(first.ok);
  auto second = l.record(ok("r1_c2", 6.5, "h-new"));
  EXPECT_FALSE(second.ok);
  EXPECT_EQ(second.error, "same compiled code as r1_c1");
  EXPECT_EQ(l.duplicate_of("", "x"), "") << "no hash, no dedup";
}

TEST(Ledger, AClaimOfACandidateThatFailedIsReleased) {
  auto l = make(beam(2, 2));
  l.start(initial());
  l.plan_round(1);
  l.claim("h", "r1_c0");
  l.record(failed("r1_c0", "benchmark"));
  EXPECT_EQ(l.duplicate_of("h", "r1_c1"), "");
  EXPECT_TRUE(l.record(ok("r1_c1", 4.0, "h")).ok);
}

TEST(Ledger, VerdictsKeepTheCandidatesCauseAndFillWhatIsMissing) {
  auto l = make(beam(2, 2));
  l.start(initial());
  l.plan_round(1);
  auto j = l.record({"r1_c0", false, -1, "x = 1\n", "", std::nullopt, "no reply"});
  EXPECT_EQ(j.failure_cause, failure_kind::unknown);
  EXPECT_EQ(j.error, "no reply");
  EXPECT_EQ(j.code_hash, store::sha256_hex("x = 1\n")) << "without a compiled-code hash, the code's own";
  EXPECT_THROW(l.record(failed("r1_c0", "crash")), std::logic_error) << "recorded twice";
  EXPECT_THROW(l.record(failed("r9_c9", "crash")), std::logic_error) << "never planned";
}

TEST(Ledger, ADivergedKernelIsVerifiedButNeverAParentOfBeamSearch) {  // SPEC §4.3
  auto l = make(beam(3, 1), 50.0);
  l.start(initial(10.0));
  l.plan_round(1);
  auto j = l.record(ok("r1_c0", 15.5, "slow"));  // 55 % slower than its parent
  EXPECT_TRUE(j.ok);
  EXPECT_TRUE(j.diverged);
  EXPECT_FALSE(j.fed);
  EXPECT_EQ(l.diverged(), (std::set<std::string>{"r1_c0"}));
  l.end_round();
  for (const auto& p : l.plan_round(2)) EXPECT_NE(p.parent.id, "r1_c0");
  // 50 % slower is still within the threshold.
  auto m = make(beam(3, 1), 50.0);
  m.start(initial(10.0));
  m.plan_round(1);
  EXPECT_FALSE(m.record(ok("r1_c0", 15.0, "ok")).diverged);
}

TEST(Ledger, GreedySeesMeasuredDuplicatesAndDivergedKernelsAsRoundsWithoutImprovement) {  // SPEC §2.4
  auto l = make(greedy_cfg(2), 50.0);
  l.start(initial(10.0, "h0"));
  ASSERT_EQ(l.plan_round(1).size(), 1u);
  auto dup = l.record(ok("r1_c0", 9.0, "h0"));
  EXPECT_EQ(dup.failure_cause, failure_kind::duplicate);
  EXPECT_TRUE(dup.fed);
  EXPECT_FALSE(l.end_round().terminate);
  l.plan_round(2);
  auto slow = l.record(ok("r2_c1", 30.0, "h-slow"));
  EXPECT_TRUE(slow.diverged);
  EXPECT_TRUE(slow.fed);
  EXPECT_TRUE(l.end_round().terminate) << "two rounds without improvement";
  // A failed round does not count (the LLM gave nothing).
  auto g = make(greedy_cfg(1));
  g.start(initial());
  g.plan_round(1);
  g.record(failed("r1_c0", "llm"));
  EXPECT_FALSE(g.end_round().terminate);
}

TEST(Ledger, AsyncExpandsEachCombinationOnceAndStopsAtMaxRounds) {
  auto c = beam(1, 2, "async");
  c.max_rounds = 2;
  auto l = make(c);
  ASSERT_TRUE(l.async());
  l.start(initial(10.0));
  auto first = l.plan_more();
  EXPECT_EQ(ids(first), (std::vector<std::string>{"r1_c0", "r1_c1"}));
  EXPECT_TRUE(l.plan_more().empty()) << "planned already";
  auto j = l.record(ok("r1_c0", 5.0, "a"));
  EXPECT_TRUE(j.fed);
  EXPECT_EQ(l.round(), 1);
  // r1_c0 entered the beam of one at once: its two directions are planned as generation 2.
  auto second = l.plan_more();
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].parent.id, "r1_c0");
  EXPECT_EQ(second[0].round, 2);
  EXPECT_EQ(second[0].id, "r2_c2");
  l.record(failed("r1_c1", "crash"));
  l.record(ok("r2_c2", 4.0, "b"));
  // r2_c2 is of generation max_rounds: it is not expanded.
  EXPECT_TRUE(l.plan_more().empty());
  EXPECT_FALSE(l.async_done());
  l.record(failed("r2_c3", "crash"));
  EXPECT_TRUE(l.plan_more().empty());
  EXPECT_TRUE(l.async_done());
  EXPECT_EQ(l.best()->id, "r2_c2");
  // Greedy has no async schedule.
  auto g = greedy_cfg();
  g.strategy_cfg.schedule = "async";
  EXPECT_FALSE(make(g).async());
}

TEST(Ledger, ResumeMidRoundRequeuesThePendingWithTheirIdsAndReachesTheSameEnd) {
  // One run without interruption, and the same run "killed" after two results of round 2.
  auto script = [](ledger& l, book* b, int stop_after) {
    int n = 0;
    l.start(initial(10.0));
    for (int r = 1; r <= 3; ++r) {
      auto ps = l.plan_round(r);
      if (b) b->plan(ps);
      for (const auto& p : ps) {
        if (b && n == stop_after) return false;
        const double ms = 9.0 - r - 0.1 * p.direction - (p.parent.id == "initial" ? 0 : 0.5);
        auto f = ok(p.id, ms, "h-" + p.id);
        auto j = l.record(f);
        if (b) b->result(f, j);
        ++n;
      }
      if (b) b->round_done = r;
      if (l.end_round().terminate) break;
    }
    return true;
  };
  auto whole = make(beam(2, 2));
  ASSERT_TRUE(script(whole, nullptr, -1));

  auto cut = make(beam(2, 2));
  book b(initial(10.0));
  ASSERT_FALSE(script(cut, &b, 4));  // round 1 (2 candidates) and 2 of round 2's 4
  auto resumed = make(beam(2, 2));
  auto plan = resumed.resume(b.programs, b.plans, b.round_done, b.diverged, "m");
  EXPECT_EQ(plan.next, resume_step::dispatch);
  EXPECT_EQ(plan.round_done, 1);
  EXPECT_EQ(plan.pending, 2);
  EXPECT_EQ(ids(plan.requeued), (std::vector<std::string>{"r2_c4", "r2_c5"}));
  EXPECT_TRUE(plan.replanned.empty());
  EXPECT_EQ(resumed.round(), 2);
  EXPECT_EQ(resumed.next_candidate(), 6);
  EXPECT_EQ(resumed.outstanding(), 2u);
  EXPECT_EQ(plan.requeued[0].parent.id, "r1_c0");
  EXPECT_EQ(plan.requeued[0].parent.code, "code r1_c0") << "the parent's code comes from program.db";
  // Finish the round and the run from there: the same best as the uninterrupted run.
  for (const auto& p : plan.requeued) {
    const double ms = 9.0 - p.round - 0.1 * p.direction - (p.parent.id == "initial" ? 0 : 0.5);
    resumed.record(ok(p.id, ms, "h-" + p.id));
  }
  ASSERT_TRUE(resumed.round_done());
  resumed.end_round();
  auto r3 = resumed.plan_round(3);
  EXPECT_EQ(r3.front().id, "r3_c6");
  for (const auto& p : r3) {
    const double ms = 9.0 - p.round - 0.1 * p.direction - (p.parent.id == "initial" ? 0 : 0.5);
    resumed.record(ok(p.id, ms, "h-" + p.id));
  }
  EXPECT_TRUE(resumed.end_round().terminate);
  EXPECT_EQ(resumed.best()->id, whole.best()->id);
  EXPECT_DOUBLE_EQ(resumed.best()->time_ms, whole.best()->time_ms);
}

TEST(Ledger, ResumeCompletesARoundWhosePlanningWasCutOff) {
  auto l = make(beam(2, 2));
  book b(initial(10.0));
  l.start(initial(10.0));
  auto r1 = l.plan_round(1);
  b.plan(r1);
  for (const auto& p : r1) {
    auto f = ok(p.id, 8.0 - p.direction, "h-" + p.id);
    b.result(f, l.record(f));
  }
  b.round_done = 1;
  l.end_round();
  auto r2 = l.plan_round(2);
  ASSERT_EQ(r2.size(), 4u);
  // The kill landed after r2_c2's plan and r2_c3's row, before r2_c3's plan was committed.
  b.plan({r2[0]});
  store::program_record orphan;
  orphan.id = r2[1].id;
  orphan.parent_id = r2[1].parent.id;
  orphan.round = 2;
  b.programs.push_back(orphan);

  auto resumed = make(beam(2, 2));
  auto plan = resumed.resume(b.programs, b.plans, b.round_done, b.diverged, "m");
  EXPECT_EQ(plan.next, resume_step::dispatch);
  EXPECT_EQ(ids(plan.requeued), (std::vector<std::string>{"r2_c2"}));
  // The rest of round 2 is planned again, the first under the orphan row's id.
  EXPECT_EQ(ids(plan.replanned), (std::vector<std::string>{"r2_c3", "r2_c4", "r2_c5"}));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(plan.replanned[i].parent.id, r2[i + 1].parent.id);
    EXPECT_EQ(plan.replanned[i].direction, r2[i + 1].direction);
  }
  EXPECT_EQ(resumed.outstanding(), 4u);
  EXPECT_EQ(resumed.next_candidate(), 6);
}

// Greedy expands the same best again in the next round when nothing improved: the same parent,
// direction, model and sample as the round before. A kill between round 2's row and its plan must
// still plan round 2 again (found by E2eReflexion under load: the resumed run ended with r2_c1 pending).
TEST(Ledger, ResumeReplansAGreedyRoundWhoseParentAndDirectionAnEarlierRoundPlannedToo) {
  auto l = make(greedy_cfg(3));
  book b(initial(10.0));
  l.start(initial(10.0));
  auto r1 = l.plan_round(1);
  ASSERT_EQ(r1.size(), 1u);
  b.plan(r1);
  auto f = ok(r1[0].id, 10.0, "h-same-time");  // no improvement: the starting kernel stays the best
  b.result(f, l.record(f));
  b.round_done = 1;
  l.end_round();
  auto r2 = l.plan_round(2);
  ASSERT_EQ(r2.size(), 1u);
  ASSERT_EQ(r2[0].parent.id, "initial");
  ASSERT_EQ(r2[0].direction, r1[0].direction);
  store::program_record orphan;  // its row, not its plan
  orphan.id = r2[0].id;
  orphan.parent_id = r2[0].parent.id;
  orphan.round = 2;
  b.programs.push_back(orphan);

  auto resumed = make(greedy_cfg(3));
  auto plan = resumed.resume(b.programs, b.plans, b.round_done, b.diverged, "m");
  EXPECT_EQ(plan.next, resume_step::dispatch);
  EXPECT_EQ(ids(plan.replanned), (std::vector<std::string>{"r2_c1"}));
  EXPECT_EQ(resumed.outstanding(), 1u);
}

TEST(Ledger, ResumeSaysWhatComesNextAtEachBoundary) {
  // Nothing planned yet: round 1.
  {
    book b(initial());
    auto l = make(beam(2, 2));
    auto plan = l.resume(b.programs, b.plans, 0, {}, "m");
    EXPECT_EQ(plan.next, resume_step::start_round);
    EXPECT_EQ(plan.start_round, 1);
  }
  // Round 1 finished and committed as done: round 2.
  book b(initial());
  auto a = make(beam(2, 2));
  a.start(initial());
  auto r1 = a.plan_round(1);
  b.plan(r1);
  for (const auto& p : r1) {
    auto f = ok(p.id, 5.0 + p.direction, "h-" + p.id);
    b.result(f, a.record(f));
  }
  {
    auto l = make(beam(2, 2));
    auto plan = l.resume(b.programs, b.plans, 0, {}, "m");
    EXPECT_EQ(plan.next, resume_step::end_round) << "every candidate of round 1 finished, the round was not closed";
    EXPECT_EQ(l.round(), 1);
    EXPECT_EQ(l.end_round().best->id, "r1_c0");
  }
  {
    auto l = make(beam(2, 2));
    auto plan = l.resume(b.programs, b.plans, 1, {}, "m");
    EXPECT_EQ(plan.next, resume_step::start_round);
    EXPECT_EQ(plan.start_round, 2);
    EXPECT_EQ(l.strategy().best()->id, "r1_c0");
  }
  {
    auto c = beam(2, 2);
    c.max_rounds = 1;
    auto l = make(c);
    EXPECT_EQ(l.resume(b.programs, b.plans, 1, {}, "m").next, resume_step::finish);
  }
  {
    auto l = make(beam(2, 2, "async"));
    EXPECT_EQ(l.resume(b.programs, b.plans, 0, {}, "m").next, resume_step::refill);
    EXPECT_TRUE(l.plan_more().size() > 0);
    EXPECT_EQ(l.plan_more().size(), 0u);
  }
  // A diverged kernel stays out of the beam after the resume, and a duplicate of a kernel verified
  // before the resume is still recognised.
  {
    auto l = make(beam(2, 2));
    l.resume(b.programs, b.plans, 1, {"r1_c0"}, "m");
    EXPECT_EQ(l.strategy().best()->id, "r1_c1");
    EXPECT_EQ(l.duplicate_of("h-r1_c0", "r2_c9"), "r1_c0");
  }
  EXPECT_THROW(make(beam(2, 2)).resume({}, {}, 0, {}, "m"), std::runtime_error);
}

// ---- launch-constant sweeps ----------------------------------------------------------------------

namespace {
program_entry tunable_initial(double ms = 10.0) {
  return {"initial", "", "BLOCK = 128\nf(x, num_warps=4)\n", ms, 0, "h-initial"};
}
finished tuned_ok(const planned& p, double ms) { return {p.id, true, ms, p.code, "h-" + p.id, std::nullopt, ""}; }
} // namespace

TEST(Ledger, TuneVariantsAreOutstandingAndHoldTheRoundUntilTheyEnd) {
  auto l = make(beam(2, 1));
  l.start(tunable_initial());
  auto r1 = l.plan_round(1);
  auto t = l.plan_tune(8, 2);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->id, "r1_t0");
  EXPECT_EQ(t->parent.id, "initial");
  EXPECT_EQ(t->tune_label, "BLOCK 128->64");
  EXPECT_EQ(t->code, "BLOCK = 64\nf(x, num_warps=4)\n");
  EXPECT_EQ(plan_to_json(*t)["tune"], nlohmann::json({{"BLOCK", 64}}));
  l.record(ok(r1[0].id, 9.0, "h0"));
  EXPECT_FALSE(l.round_done());  // the variant is still out
  auto j = l.record(tuned_ok(*t, 7.0));
  EXPECT_TRUE(j.new_best);
  EXPECT_FALSE(j.fed) << "a variant never enters the strategy";
  EXPECT_TRUE(l.round_done());
  // The fastest variant is the run's best, and is itself swept first; the LLM's next round expands
  // the beam it would have without variants.
  auto closed = l.end_round();
  ASSERT_TRUE(closed.best);
  EXPECT_EQ(closed.best->id, "r1_t0");
  ASSERT_TRUE(l.best());
  EXPECT_EQ(l.best()->id, "r1_t0");
  auto r2 = l.plan_round(2);
  for (const auto& p : r2) EXPECT_NE(p.parent.id, "r1_t0") << p.id;
  // A later LLM kernel slower than the variant is no new best.
  EXPECT_FALSE(l.record(ok(r2[0].id, 8.0, "h-r2")).new_best);
  auto next = l.plan_tune(8, 2);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->parent.id, "r1_t0");
  EXPECT_EQ(next->id, "r2_t1");  // planned in round 2, which runs now
}

TEST(Ledger, EachVariantIsTriedOnceAndTheSweepEnds) {
  auto l = make(beam(1, 1));
  l.start({"initial", "", "f(x, num_warps=1)\n", 10.0, 0, "h"});
  l.plan_round(1);
  // num_warps=1 has 4 values above it in its domain: 2, then 4 and 8 (two and three steps).
  std::vector<std::string> labels;
  while (auto t = l.plan_tune(10, 2)) labels.push_back(t->tune_label);
  EXPECT_EQ(labels, (std::vector<std::string>{"num_warps 1->2", "num_warps 1->4", "num_warps 1->8"}));
  // A kernel with no launch constants gives no variant.
  auto none = make(beam(1, 1));
  none.start({"initial", "", "def kernel_function(x):\n    return x\n", 10.0, 0, "h"});
  EXPECT_FALSE(none.plan_tune(10, 2));
}

TEST(Ledger, ResumeRequeuesAPendingVariantWithItsSourceAndTriesNoVariantTwice) {
  const auto init = tunable_initial();
  book b(init);
  auto l = make(beam(2, 1));
  l.start(init);
  auto r1 = l.plan_round(1);
  b.plan(r1);
  auto t0 = *l.plan_tune(8, 2);
  auto t1 = *l.plan_tune(8, 2);
  b.plan({t0, t1});
  b.result(tuned_ok(t0, 12.0), l.record(tuned_ok(t0, 12.0)));
  // Killed here: r1_c0 and r1_t1 pending.
  auto again = make(beam(2, 1));
  auto plan = again.resume(b.programs, b.plans, 0, b.diverged, "m");
  std::vector<std::string> requeued;
  for (const auto& q : plan.requeued) requeued.push_back(q.id);
  EXPECT_EQ(requeued, (std::vector<std::string>{"r1_c0", "r1_t1"}));
  const auto& q = plan.requeued[1];
  EXPECT_TRUE(q.tuned());
  EXPECT_EQ(q.code, t1.code);
  EXPECT_EQ(q.tune_label, t1.tune_label);
  EXPECT_EQ(q.parent.id, "initial");
  // The next variant is neither of the two already planned, and numbers on.
  auto t2 = again.plan_tune(8, 2);
  ASSERT_TRUE(t2);
  EXPECT_EQ(t2->id, "r1_t2");
  EXPECT_NE(t2->tune_label, t0.tune_label);
  EXPECT_NE(t2->tune_label, t1.tune_label);
  EXPECT_EQ(t2->tune_label, l.plan_tune(8, 2)->tune_label);  // the uninterrupted ledger's next one
}

TEST(Ledger, AVariantWhoseSourceTheRunHasSeenIsNeverRunAndOnlyTheFastestAreSwept) {
  auto l = make(beam(2, 1));
  l.start({"initial", "", "f(x, num_warps=4)\n", 10.0, 0, "h"});
  auto r1 = l.plan_round(1);
  // The LLM's kernel happens to be the starting kernel with num_warps=8.
  l.record({r1[0].id, true, 9.0, "f(x, num_warps=8)\n", "h-llm", std::nullopt, ""});
  auto up = l.plan_tune(2, 1);
  ASSERT_TRUE(up);
  // The fastest is the LLM's kernel (num_warps=8): its step down (4) is the starting kernel, so its
  // first variant is the step up.
  EXPECT_EQ(up->parent.id, r1[0].id);
  EXPECT_EQ(up->tune_label, "num_warps 8->16");
  // top = 1: the starting kernel (the second fastest) is not swept.
  EXPECT_FALSE(l.plan_tune(2, 1));
  auto next = l.plan_tune(2, 2);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->parent.id, "initial");
  EXPECT_EQ(next->tune_label, "num_warps 4->2");  // 4->8 is the LLM's kernel
  EXPECT_FALSE(l.plan_tune(2, 2));
}
