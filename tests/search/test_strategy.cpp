#include <gtest/gtest.h>

#include "platform/search/strategy.hpp"

using namespace kagent;

namespace {
program_entry prog(const std::string& id, double t, const std::string& hash = "", const std::string& code = "") {
  return {id, "initial", code.empty() ? "code " + id : code, t, 1, hash};
}
run_config beam(int n, int m) {
  run_config c;
  c.strategy = "beam_search";
  c.strategy_cfg.num_top_kernels = n;
  c.strategy_cfg.num_bottlenecks = m;
  return c;
}
} // namespace

TEST(Beam, FirstRoundExpandsTheInitialKernelOncePerDirection) {  // SPEC §14 B.110
  auto s = make_strategy(beam(2, 3), "m");
  s->initialize(prog("initial", 5.0));
  auto c = s->select_candidates(1);
  ASSERT_EQ(c.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c[static_cast<size_t>(i)].parent.id, "initial");
    EXPECT_EQ(c[static_cast<size_t>(i)].bottleneck_id, i + 1);
  }
  EXPECT_EQ(s->directions_needed(), 3);  // B.83
}

TEST(Beam, KeepsTheFastestNAndDedupsByHash) {  // B.88
  auto s = make_strategy(beam(2, 1), "m");
  s->initialize(prog("initial", 5.0, "h0"));
  s->update_with_results({prog("a", 3.0, "h1"), prog("b", 2.0, "h1"), prog("c", 4.0, "h2")}, 1);
  auto c = s->select_candidates(2);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].parent.id, "b");  // fastest of the two with hash h1
  EXPECT_EQ(c[1].parent.id, "c");  // a is a duplicate of b
  EXPECT_EQ(s->best()->id, "b");
}

TEST(Beam, IdenticalCodeWithoutHashIsADuplicate) {
  auto r = rank_and_dedup({prog("a", 2.0, "", "same"), prog("b", 1.0, "", "same"), prog("c", 3.0)});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].id, "b");
}

TEST(Beam, ExtensionsMultiplyModelsAndSamples) {
  auto cfg = beam(2, 2);
  cfg.strategy_cfg.models = {"m1", "m2"};
  cfg.strategy_cfg.samples_per_prompt = 2;
  auto s = make_strategy(cfg, "m");
  s->initialize(prog("initial", 5.0));
  EXPECT_EQ(s->select_candidates(1).size(), 1u * 2 * 2 * 2);
}

TEST(Beam, TerminatesAtMaxRoundsAndStateRoundTrips) {
  auto s = make_strategy(beam(2, 1), "m");
  s->initialize(prog("initial", 5.0));
  s->update_with_results({prog("a", 3.0)}, 1);
  EXPECT_FALSE(s->should_terminate(1, 2));
  EXPECT_TRUE(s->should_terminate(2, 2));
  auto t = make_strategy(beam(2, 1), "m");
  t->load_state(s->save_state(), {prog("initial", 5.0), prog("a", 3.0)});
  EXPECT_EQ(t->best()->id, "a");
}

TEST(Greedy, StopsAfterMaxNoImprovementAndFailedRoundsDoNotCount) {
  run_config c;
  c.strategy = "greedy";
  c.strategy_cfg.max_no_improvement = 2;
  auto s = make_strategy(c, "m");
  s->initialize(prog("initial", 5.0));
  s->update_with_results({prog("a", 4.0)}, 1);  // improvement
  EXPECT_EQ(s->best()->id, "a");
  s->update_with_results({}, 2);  // a failed round: counter untouched
  EXPECT_FALSE(s->should_terminate(2, 10));
  s->update_with_results({prog("b", 4.5)}, 3);
  EXPECT_FALSE(s->should_terminate(3, 10));
  s->update_with_results({prog("c", 4.0)}, 4);  // equal is not strictly faster
  EXPECT_TRUE(s->should_terminate(4, 10));
  EXPECT_EQ(s->select_candidates(5).front().parent.id, "a");
}

TEST(Greedy, ADuplicateOfTheBestIsNoImprovement) {
  run_config c;
  c.strategy = "greedy";
  c.strategy_cfg.max_no_improvement = 1;
  auto s = make_strategy(c, "m");
  s->initialize(prog("initial", 5.0, "h"));
  s->update_with_results({prog("dup", 1.0, "h")}, 1);
  EXPECT_EQ(s->best()->id, "initial");
  EXPECT_TRUE(s->should_terminate(1, 10));
}
