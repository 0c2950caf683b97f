// The run summary's rules, values in and values out, and the one GPU-busy formula.
#include <gtest/gtest.h>

#include "platform/search/summary.hpp"
#include "platform/store/sessions.hpp"

using namespace kagent;
using namespace kagent::search;

namespace {

int next_seq = 0;

store::program_record prog(const std::string& id, const std::string& status, std::optional<double> ms = std::nullopt,
                           const std::string& cause = "") {
  store::program_record p;
  p.id = id;
  p.status = status;
  p.time_ms = ms;
  p.code = "code " + id;
  p.round = id == "initial" ? 0 : 1;
  if (!cause.empty()) p.failure_cause = cause;
  p.seq = ++next_seq;
  return p;
}

store::llm_usage_row usage(const std::string& purpose, const std::string& model, int calls, int failed) {
  store::llm_usage_row u;
  u.purpose = purpose;
  u.model = model;
  u.calls = calls;
  u.failed_calls = failed;
  u.tokens_in = 100 * calls;
  u.tokens_out = 10 * calls;
  u.cost_usd = 0.5 * calls;
  return u;
}

summary_facts a_run() {
  summary_facts f;
  f.programs = {prog("initial", "verified", 10.0),        prog("r1_c0", "verified", 4.0),
                prog("r1_c1", "failed", 3.0, "duplicate"), prog("r1_c2", "failed", std::nullopt, "verification"),
                prog("r1_c3", "verified", 25.0),           prog("r2_c4", "pending"),
                prog("r2_c5", "verified", 4.0)};
  f.programs[1].floor_pct = 61.5;
  f.llm_usage = {usage("optimize", "m1", 4, 1), usage("reflexion", "m1", 2, 0), usage("optimize", "m2", 1, 0)};
  f.provider_of = {{"m2", "openai"}};
  f.default_provider = "anthropic";
  f.initial_ms = 10.0;
  f.eager_ms = 8.0;
  f.compile_ms = -1;
  f.diverged = {"r1_c3"};
  f.spreads = {{"r1_c0", 0.7}};
  f.sessions = nlohmann::json::array({{{"wall_s", 100.0}, {"device_s", 50.0}, {"devices", 2}}});
  f.session_wall_s = 100.0;
  return f;
}

} // namespace

TEST(Summary, TheAnswerIsTheFastestVerifiedKernelOfTheWholeRunAndTheEarlierOfATie) {
  auto s = summarize({}, a_run());
  EXPECT_TRUE(s.success);
  EXPECT_EQ(s.run_state, "finished");
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->id, "r1_c0") << "r2_c5 ties at 4.0 ms but came later";
  EXPECT_EQ(s.best_floor_pct, 61.5);
  auto j = s.to_json();
  EXPECT_DOUBLE_EQ(j["speedup_vs_initial"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j["speedup_vs_eager"].get<double>(), 2.0);
  EXPECT_FALSE(j.contains("speedup_vs_compile")) << "no torch.compile time, no ratio";
  EXPECT_TRUE(j["compile_ms"].is_null());
  EXPECT_FALSE(j.contains("error"));
  EXPECT_TRUE(j["references_cached_at"].is_null()) << "timed in the run: nothing from the cache";
  auto facts = a_run();
  facts.references_cached_at = "2026-12-06T10:11:54Z";
  EXPECT_EQ(summarize({}, facts).to_json()["references_cached_at"], "2026-12-06T10:11:54Z");
}

TEST(Summary, CountsLeaveOutTheStartingKernelAndADuplicateIsNoFailure) {
  auto s = summarize({}, a_run());
  EXPECT_EQ(s.candidates, 6);
  EXPECT_EQ(s.verified, 3);
  EXPECT_EQ(s.duplicates, 1);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.pending, 1);
  EXPECT_EQ(s.failures_by_cause, (std::map<std::string, std::int64_t>{{"duplicate", 1}, {"verification", 1}}));
  EXPECT_EQ(s.diverged, 1u);
  // A failed starting kernel is no failed candidate either.
  auto f = a_run();
  f.programs[0].status = "failed";
  f.programs[0].failure_cause = "verification";
  auto t = summarize({}, f);
  EXPECT_EQ(t.failed, 1);
  EXPECT_EQ(t.verified, 3);
  EXPECT_EQ(t.failures_by_cause.at("verification"), 2) << "by cause counts every program, as program.db does";
}

TEST(Summary, TopKernelsAreTheFiveFastestVerifiedWithoutTheDivergedOnes) {
  auto f = a_run();
  for (int i = 0; i < 6; ++i) f.programs.push_back(prog("r3_c" + std::to_string(10 + i), "verified", 5.0 + i));
  auto s = summarize({}, f);
  ASSERT_EQ(s.top_kernels.size(), 5u);
  EXPECT_EQ(s.top_kernels[0].program_id, "r1_c0");
  EXPECT_EQ(s.top_kernels[0].spread_pct, 0.7);
  EXPECT_EQ(s.top_kernels[1].program_id, "r2_c5");
  EXPECT_FALSE(s.top_kernels[1].spread_pct);
  EXPECT_EQ(s.top_kernels[4].program_id, "r3_c12");
  for (const auto& t : s.top_kernels) EXPECT_NE(t.program_id, "r1_c3");
  auto j = s.to_json();
  EXPECT_EQ(j["top_kernels"][0]["spread_pct"], 0.7);
  EXPECT_FALSE(j["top_kernels"][1].contains("spread_pct"));
}

TEST(Summary, ASearchInWhichNoCandidateGotAnLlmReplyFailedWithTheFirstLlmError) {
  auto f = a_run();
  f.llm_usage = {usage("optimize", "m1", 3, 3)};
  f.programs[3].failure_cause = "llm";
  f.programs[3].error = "HTTP 401 from https://api.example: invalid key";
  auto s = summarize({}, f);
  EXPECT_FALSE(s.success);
  EXPECT_EQ(s.run_state, "failed");
  EXPECT_EQ(s.error, "no candidate got an LLM reply; the first error: HTTP 401 from https://api.example: invalid key");
  EXPECT_FALSE(s.best);
  EXPECT_TRUE(s.to_json()["best_ms"].is_null());
  // A run that never got past its starting kernel is judged by its own error.
  summary_facts only;
  only.programs = {prog("initial", "failed", std::nullopt, "verification")};
  only.ok = false;
  only.error = "Initial kernel failed correctness verification: max diff 3.0";
  auto o = summarize({}, only);
  EXPECT_EQ(o.error, only.error);
  EXPECT_EQ(o.candidates, 0);
  EXPECT_EQ(o.failed, 0);
}

TEST(Summary, AnInterruptedRunNamesItsBestSoFarButOnlyBeyondTheStartingKernel) {
  auto f = a_run();
  f.interrupted_by = "SIGINT";
  run_identity id;
  id.resume_command = "kagent-actors --resume /runs/x";
  auto s = summarize(id, f);
  EXPECT_FALSE(s.success);
  EXPECT_EQ(s.run_state, "interrupted");
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->id, "r1_c0");
  auto j = s.to_json();
  EXPECT_TRUE(j["interrupted"].get<bool>());
  EXPECT_EQ(j["interrupted_by"], "SIGINT");
  EXPECT_EQ(j["resume_command"], "kagent-actors --resume /runs/x");
  summary_facts g;
  g.programs = {prog("initial", "verified", 10.0), prog("r1_c0", "pending")};
  g.interrupted_by = "SIGTERM";
  EXPECT_FALSE(summarize({}, g).best) << "the starting kernel is no result of the search";
}

TEST(Summary, LlmUsageIsTotalledPerPurposeAndPerModelWithItsProvider) {
  auto s = summarize({}, a_run());
  EXPECT_EQ(s.llm.calls, 7);
  EXPECT_EQ(s.llm.failed_calls, 1);
  EXPECT_EQ(s.llm.tokens_in, 700);
  EXPECT_DOUBLE_EQ(s.llm.cost_usd, 3.5);
  ASSERT_EQ(s.llm_by_purpose_and_model.size(), 3u);
  ASSERT_EQ(s.llm_by_model.size(), 2u);
  EXPECT_EQ(s.llm_by_model[0].model, "m1");
  EXPECT_EQ(s.llm_by_model[0].provider, "anthropic");
  EXPECT_EQ(s.llm_by_model[0].tally.calls, 6);
  EXPECT_EQ(s.llm_by_model[1].provider, "openai");
  auto j = s.to_json()["llm"];
  EXPECT_EQ(j["by_model"][0]["failed_calls"], 1);
  EXPECT_EQ(j["by_purpose_and_model"][1]["purpose"], "reflexion");
}

TEST(Summary, TotalsCoverEverySessionAndBusyIsOverWallTimesDevices) {
  auto f = a_run();
  f.sessions.push_back({{"wall_s", 50.0}, {"device_s", 50.0}, {"devices", 1}});
  auto s = summarize({}, f);
  EXPECT_EQ(s.totals.sessions, 2);
  EXPECT_DOUBLE_EQ(s.totals.wall_s, 150.0);
  EXPECT_DOUBLE_EQ(s.totals.device_s, 100.0);
  EXPECT_DOUBLE_EQ(s.totals.capacity_s, 250.0);
  ASSERT_TRUE(s.gpu_busy_pct);
  EXPECT_DOUBLE_EQ(*s.gpu_busy_pct, 40.0);
  auto j = s.to_json();
  EXPECT_DOUBLE_EQ(j["gpu_busy_pct"].get<double>(), 40.0);
  EXPECT_EQ(j["sessions"], 2);
}

TEST(Sessions, MalformedEntriesAreLeftOutAndNoCapacityMeansNoBusyFigure) {
  auto t = store::totals_of(nlohmann::json::parse(
      R"([{"wall_s": 10, "device_s": 5, "devices": 4}, "junk", {"wall_s": -1, "device_s": 3},
          {"wall_s": "x", "device_s": 1}, {"wall_s": 2, "device_s": 1}])"));
  EXPECT_EQ(t.sessions, 3);  // a non-numeric time reads as 0 s
  EXPECT_DOUBLE_EQ(t.wall_s, 12.0);
  EXPECT_DOUBLE_EQ(t.device_s, 7.0);
  EXPECT_DOUBLE_EQ(t.capacity_s, 42.0);
  EXPECT_DOUBLE_EQ(t.user_test_s, 0.0);  // sessions of older runs name no test.py time
  EXPECT_EQ(store::totals_of(nlohmann::json::object()).sessions, 0);
  // test.py's seconds are part of a session's device seconds: more than those, or negative, is junk.
  auto tested = store::totals_of(nlohmann::json::parse(
      R"([{"wall_s": 10, "device_s": 5, "user_test_s": 2}, {"wall_s": 10, "device_s": 5, "user_test_s": 6},
          {"wall_s": 10, "device_s": 5, "user_test_s": -1}, {"wall_s": 10, "device_s": 4, "user_test_s": 1.5}])"));
  EXPECT_EQ(tested.sessions, 4);
  EXPECT_DOUBLE_EQ(tested.device_s, 19.0);
  EXPECT_DOUBLE_EQ(tested.user_test_s, 3.5);
  EXPECT_FALSE(store::busy_pct(1.0, 0.0));
  EXPECT_FALSE(store::busy_pct(1.0, -5.0));
  EXPECT_DOUBLE_EQ(*store::busy_pct(3.0, 12.0), 25.0);
}

// The one rule for the answer: the fastest verified, measured kernel (the earlier on a tie), else
// the strategy's best; pending, failed and unmeasured programs never are.
TEST(Summary, AnswerOfIsTheFastestVerifiedMeasuredKernelElseTheStrategysBest) {
  auto prog = [](const std::string& id, const std::string& status, std::optional<double> ms, long seq) {
    store::program_record p;
    p.id = id;
    p.status = status;
    p.time_ms = ms;
    p.seq = seq;
    return p;
  };
  const program_entry fallback{"s", "", "code", 9.0, 1, ""};
  EXPECT_EQ(search::answer_of({}, fallback)->id, "s");
  EXPECT_FALSE(search::answer_of({}, std::nullopt));
  std::vector<store::program_record> ps{prog("initial", "verified", 5.0, 1), prog("a", "failed", 1.0, 2),
                                        prog("b", "verified", std::nullopt, 3), prog("c", "verified", 2.0, 4),
                                        prog("d", "verified", 2.0, 5), prog("e", "pending", 0.5, 6)};
  auto best = search::answer_of(ps, fallback);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->id, "c") << "the earlier of two equal times";
  EXPECT_EQ(best->time_ms, 2.0);
}

TEST(Summary, LaunchConstantVariantsAreCountedAndABestVariantSaysWhatItChanges) {
  auto f = a_run();
  auto t0 = prog("r1_t0", "verified", 3.5);
  t0.bottleneck = "tune: BLOCK_K 512->1024";
  auto t1 = prog("r1_t1", "failed", std::nullopt, "verification");
  t1.bottleneck = "tune: num_warps 4->8";
  f.programs.push_back(t0);
  f.programs.push_back(t1);
  auto s = summarize({}, f);
  EXPECT_EQ(s.variants, 2);
  EXPECT_EQ(s.variants_verified, 1);
  ASSERT_TRUE(s.best);
  EXPECT_EQ(s.best->id, "r1_t0");
  EXPECT_EQ(s.best_tune, "BLOCK_K 512->1024");
  auto j = s.to_json();
  EXPECT_EQ(j["variants"], nlohmann::json({{"run", 2}, {"verified", 1}}));
  EXPECT_EQ(j["best_tune"], "BLOCK_K 512->1024");
  EXPECT_EQ(j["candidates"], 8) << "variants are candidates too";
  // A run without variants says 0 and names no best variant.
  auto plain = summarize({}, a_run()).to_json();
  EXPECT_EQ(plain["variants"]["run"], 0);
  EXPECT_FALSE(plain.contains("best_tune"));
}
