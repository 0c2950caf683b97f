#include "platform/report/progress.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kagent::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

// A rounds run with two devices, 100 s in: round 2 of 10, one verified and one failed candidate,
// one still running, two LLM calls, gpu1 synthetic.
progress_state rounds_run() {
  progress_state st;
  update(st, "run_start", {{"strategy", "amd"}, {"search", "beam_search"}, {"devices", {0, 1}}, {"max_rounds", 10},
                           {"schedule", "rounds"}}, 1000);
  update(st, "initial", {{"initial_ms", 2.0}, {"eager_ms", 3.0}, {"best_ms", 2.0}}, 1005);
  update(st, "round_start", {{"round", 2}, {"max_rounds", 10}, {"candidates", 3}}, 1010);
  for (const char* id : {"r2_c0", "r2_c1", "r2_c2"})
    update(st, "candidate_start", {{"candidate_id", id}, {"round", 2}, {"gpu_id", 0}}, 1011);
  update(st, "candidate_result", {{"candidate_id", "r2_c0"}, {"ok", true}, {"time_ms", 1.0}, {"best_ms", 1.0},
                                  {"device_s", 20.0}, {"llm_s", 40.0}}, 1050);
  update(st, "candidate_result", {{"candidate_id", "r2_c1"}, {"ok", false}, {"time_ms", nullptr},
                                  {"failure_cause", "verification"}, {"device_s", 10.0}}, 1060);
  update(st, "llm_call", {{"purpose", "optimize"}, {"tokens_in", 1000}, {"tokens_out", 200}, {"cost_usd", 0.02}, {"ok", true}}, 1020);
  update(st, "llm_call", {{"purpose", "optimize"}, {"tokens_in", 250}, {"tokens_out", 50}, {"cost_usd", 0.01}, {"ok", false}}, 1030);
  update(st, "mode_change", {{"gpu_id", 1}, {"mode", "synthetic"}, {"reason", "rocprofv3 timed out"}}, 1070);
  return st;
}

TEST(ProgressLine, ShowsRoundCandidatesBestGpuBusyLlmAndModes) {
  const auto st = rounds_run();
  const auto line = format_progress_line(st, 1100);
  EXPECT_THAT(line, HasSubstr("01:40 round 2/10"));
  EXPECT_THAT(line, HasSubstr("1 ok, 1 failed, 1 running"));
  EXPECT_THAT(line, HasSubstr("best 1.000 ms (2.00x)"));
  EXPECT_THAT(line, HasSubstr("GPU 15%"));  // 30 device-s over 100 s x 2 devices
  EXPECT_THAT(line, HasSubstr("LLM 1.5k tok $0.0300"));
  EXPECT_THAT(line, HasSubstr("gpu1: synthetic"));
  EXPECT_LE(line.size(), progress_line_columns);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(st.llm().calls, 2);
  EXPECT_EQ(st.llm().failed_calls, 1);
}

TEST(ProgressLine, BeforeAnythingIsKnownEverySlotSaysNa) {
  progress_state st;
  update(st, "run_start", json::object(), 0);
  const auto line = format_progress_line(st, 10);
  EXPECT_THAT(line, HasSubstr("initial kernel"));
  EXPECT_THAT(line, HasSubstr("best n/a"));
  EXPECT_THAT(line, HasSubstr("GPU n/a"));
  EXPECT_THAT(line, Not(HasSubstr("inf")));
  EXPECT_THAT(line, Not(HasSubstr("nan")));
}

TEST(ProgressLine, FieldsOfTheWrongTypeAreIgnored) {
  progress_state st;
  update(st, "run_start", {{"devices", "two"}, {"max_rounds", "ten"}, {"schedule", 3}}, 0);
  update(st, "initial", {{"initial_ms", "fast"}, {"best_ms", -1}}, 1);
  update(st, "round_start", {{"round", nullptr}, {"candidates", "3"}}, 2);
  update(st, "candidate_result", json::array({1, 2}), 3);
  update(st, "candidate_result", {{"ok", "yes"}, {"time_ms", "1"}, {"device_s", -5}}, 4);
  update(st, "mode_change", {{"mode", "synthetic"}}, 5);  // no gpu id: nothing to show
  update(st, "llm_call", {{"run_totals", "x"}}, 6);
  update(st, "something_new", "text", 7);
  EXPECT_EQ(st.failed, 2);
  EXPECT_FALSE(st.best_ms);
  EXPECT_TRUE(st.modes.empty());
  const auto line = format_progress_line(st, 8);
  EXPECT_THAT(line, HasSubstr("0 ok, 2 failed"));
  EXPECT_THAT(line, HasSubstr("GPU n/a"));
}

TEST(ProgressLine, ParentAnalysisDeviceTimeCountsAsGpuBusy) {
  progress_state st;
  update(st, "run_start", {{"devices", {0}}}, 0);
  update(st, "analysis", {{"parent_id", "initial"}, {"device_s", 4.0}}, 1);
  update(st, "candidate_result", {{"ok", true}, {"time_ms", 1.0}, {"device_s", 1.0}}, 2);
  EXPECT_THAT(format_progress_line(st, 10), HasSubstr("GPU 50%"));
}

TEST(ProgressLine, TheStartingKernelsEvaluationCountsAsGpuBusy) {
  // On the H200 a short run's line said "GPU 59%" while summary.json said 100 %: the 36 s of the
  // starting kernel's evaluation were counted by the summary only.
  progress_state st;
  update(st, "run_start", {{"devices", {0}}}, 0);
  update(st, "initial", {{"initial_ms", 2.0}, {"device_s", 6.0}}, 6);
  update(st, "candidate_result", {{"ok", true}, {"time_ms", 1.0}, {"device_s", 2.0}}, 8);
  EXPECT_THAT(format_progress_line(st, 10), HasSubstr("GPU 80%"));
}

// The starting kernel's test.py and reference timings come later than its time (start_checked, while its
// analysis waits for the LLM): their device time counts, and their line names the references.
TEST(ProgressLine, TheStartingKernelsLaterChecksCountAsGpuBusyAndNameTheReferences) {
  progress_state st;
  update(st, "run_start", {{"devices", {0}}}, 0);
  update(st, "initial", {{"initial_ms", 2.0}, {"device_s", 4.0}}, 4);
  auto first = format_log_line(st, "initial", {{"initial_ms", 2.0}, {"device_s", 4.0}}, 4);
  ASSERT_TRUE(first);
  EXPECT_THAT(*first, HasSubstr("starting kernel 2.000 ms"));
  EXPECT_THAT(*first, Not(HasSubstr("eager")));
  const nlohmann::json checked{{"eager_ms", 3.0}, {"compile_ms", 1.5}, {"user_test", "passed"}, {"device_s", 4.0}};
  update(st, "start_checked", checked, 10);
  EXPECT_THAT(format_progress_line(st, 10), HasSubstr("GPU 80%"));
  auto line = format_log_line(st, "start_checked", checked, 10);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("test.py passed, PyTorch eager 3.000 ms, torch.compile 1.500 ms"));
  EXPECT_THAT(*line, Not(HasSubstr("cache")));
  // Read from the reference cache (a run before this one timed them): the line says so, and when.
  nlohmann::json cached = checked;
  cached["references_cached_at"] = "2026-12-06T10:11:54Z";
  auto from_cache = format_log_line(st, "start_checked", cached, 10);
  ASSERT_TRUE(from_cache);
  EXPECT_THAT(*from_cache, HasSubstr("torch.compile 1.500 ms (from the reference cache, timed 2026-12-06T10:11:54Z)"));
}

TEST(ProgressLine, TheInitialPhaseShowsItsCurrentStep) {
  progress_state st;
  update(st, "run_start", {{"devices", {0}}, {"max_rounds", 3}}, 0);
  EXPECT_THAT(format_progress_line(st, 1), HasSubstr("initial kernel"));
  update(st, "initial_step", {{"step", "loading problem.py"}}, 1);
  EXPECT_THAT(format_progress_line(st, 2), HasSubstr("initial: loading problem.py"));
  update(st, "initial_step", {{"step", "timing it, PyTorch eager and torch.compile"}}, 5);
  EXPECT_THAT(format_progress_line(st, 6), HasSubstr("initial: timing it, PyTorch eager and torch.compile"));
  update(st, "initial", {{"initial_ms", 2.0}}, 20);
  EXPECT_THAT(format_progress_line(st, 21), HasSubstr("initial done"));
  update(st, "initial_step", {{"step", "profiling and diagnosing the starting kernel"}}, 21);
  EXPECT_THAT(format_progress_line(st, 22), HasSubstr("initial: profiling and diagnosing"));
  update(st, "round_start", {{"round", 1}, {"candidates", 2}}, 30);
  EXPECT_THAT(format_progress_line(st, 31), HasSubstr("round 1/3"));
}

TEST(ProgressLine, AfterAResumeTimeCountsAndGpuBusyAreTheRunsTotals) {
  // Session 1: 100 s on 1 device, 50 device-s; session 2 starts (run_start) and says so (resume).
  progress_state st;
  update(st, "run_start", {{"devices", {0}}, {"max_rounds", 3}}, 0);
  update(st, "candidate_result", {{"candidate_id", "r1_c0"}, {"ok", true}, {"time_ms", 1.0}, {"device_s", 50.0}}, 90);
  update(st, "run_start", {{"devices", {0}}, {"max_rounds", 3}}, 5000);  // a day later, say
  update(st, "resume", {{"from_round", 2}, {"pending", 1}, {"verified", 3}, {"failed", 2}, {"duplicates", 1},
                        {"prior", {{"sessions", 1}, {"wall_s", 100.0}, {"device_s", 50.0}, {"capacity_s", 100.0}}}},
         5000);
  update(st, "candidate_result", {{"candidate_id", "r2_c0"}, {"ok", true}, {"time_ms", 0.5}, {"device_s", 50.0}}, 5100);
  const auto line = format_progress_line(st, 5100);
  EXPECT_THAT(line, HasSubstr("03:20 round 2/3"));  // 100 s before + 100 s now, not 5100 s
  EXPECT_THAT(line, HasSubstr("4 ok, 2 failed, 1 dup"));  // the run's counts, not this session's
  EXPECT_THAT(line, HasSubstr("GPU 50%"));  // (50 + 50) device-s over 200 s
  const auto l = format_log_line(st, "resume", {{"from_round", 2}, {"pending", 1}, {"prior", {{"sessions", 1}}}}, 5000);
  ASSERT_TRUE(l);
  EXPECT_THAT(*l, HasSubstr("(session 2; so far"));
}

TEST(ProgressLine, WithoutCandidateStartRunningIsTheRoundsRemainder) {
  progress_state st;
  update(st, "run_start", {{"devices", {0}}, {"max_rounds", 3}}, 0);
  update(st, "round_start", {{"round", 1}, {"max_rounds", 3}, {"candidates", 4}}, 1);
  update(st, "candidate_result", {{"candidate_id", "r1_c0"}, {"ok", true}, {"time_ms", 1.0}}, 2);
  EXPECT_EQ(st.running(), 3);
  EXPECT_THAT(format_progress_line(st, 3), HasSubstr("1 ok, 0 failed, 3 running"));
}

TEST(ProgressLine, AsyncScheduleShowsCandidateProgressAndSlots) {
  progress_state st;
  update(st, "run_start", {{"schedule", "async"}, {"devices", {0, 1}}, {"max_candidates", 40}, {"slots", 8}}, 0);
  update(st, "candidate_start", {{"candidate_id", "c1"}, {"round", 1}, {"slot", 0}}, 1);
  update(st, "candidate_start", {{"candidate_id", "c2"}, {"round", 1}, {"slot", 1}}, 1);
  update(st, "candidate_result", {{"candidate_id", "c1"}, {"ok", true}, {"time_ms", 3.0}}, 2);
  const auto line = format_progress_line(st, 3);
  EXPECT_THAT(line, HasSubstr("async 1/40"));
  EXPECT_THAT(line, HasSubstr("1 ok, 0 failed, 1/8 running"));
  progress_state open_ended;
  update(open_ended, "run_start", {{"schedule", "async"}}, 0);
  update(open_ended, "candidate_result", {{"candidate_id", "c1"}, {"round", 3}, {"ok", false}}, 1);
  EXPECT_THAT(format_progress_line(open_ended, 2), HasSubstr("async gen 3"));
}

// A candidate recorded before its reflexion counts as done at once and keeps its slot (running) until
// its candidate_end; its reflexion's LLM time comes with the end.
TEST(ProgressLine, ACandidateRecordedBeforeItsReflexionRunsUntilItsEnd) {
  progress_state st;
  update(st, "run_start", {{"schedule", "async"}, {"devices", {0}}, {"num_workers", 4}}, 0);
  update(st, "candidate_start", {{"candidate_id", "c1"}, {"round", 1}}, 1);
  update(st, "candidate_result", {{"candidate_id", "c1"}, {"ok", true}, {"time_ms", 3.0}, {"new_best", true},
                                  {"device_s", 1.0}, {"llm_s", 20.0}, {"reflexion_pending", true}}, 2);
  EXPECT_THAT(format_progress_line(st, 3), HasSubstr("1 ok, 0 failed, 1/4 running"));
  EXPECT_THAT(format_progress_line(st, 3), HasSubstr("best 3.000 ms"));
  update(st, "candidate_end", {{"candidate_id", "c1"}, {"reflexion", true}, {"device_s", 0.0}, {"llm_s", 15.0}}, 4);
  EXPECT_THAT(format_progress_line(st, 5), HasSubstr("1 ok, 0 failed, 0/4 running"));
  EXPECT_EQ(st.ok, 1);
  EXPECT_DOUBLE_EQ(st.llm_s, 35.0);
  EXPECT_DOUBLE_EQ(st.device_s, 1.0);
  // Shown with --verbose only.
  EXPECT_FALSE(format_log_line(st, "candidate_end", {{"candidate_id", "c1"}, {"reflexion", true}}, 5, false));
  auto line = format_log_line(st, "candidate_end", {{"candidate_id", "c1"}, {"reflexion", false}, {"error", "timed out"}}, 5, true);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("c1 done (no reflexion): timed out"));
}

TEST(ProgressLine, LaunchConstantVariantsAreCountedApartFromTheSearchsCandidates) {
  progress_state st;
  update(st, "run_start", {{"schedule", "async"}, {"devices", {0}}, {"num_workers", 4}}, 0);
  update(st, "candidate_start", {{"candidate_id", "r1_c0"}, {"round", 1}}, 1);
  update(st, "candidate_start", {{"candidate_id", "r1_t0"}, {"round", 1}, {"tune", "BLOCK_K 512->1024"}}, 1);
  EXPECT_THAT(format_progress_line(st, 2), HasSubstr("0 ok, 0 failed, 1/4 running"));
  EXPECT_THAT(format_progress_line(st, 2), HasSubstr("variants 0 ok of 0, 1 running"));
  update(st, "candidate_result", {{"candidate_id", "r1_t0"}, {"ok", true}, {"time_ms", 2.5}, {"best_ms", 2.5},
                                  {"device_s", 0.4}}, 3);
  const auto line = format_progress_line(st, 4);
  EXPECT_THAT(line, HasSubstr("0 ok, 0 failed, 1/4 running"));
  EXPECT_THAT(line, HasSubstr("variants 1 ok of 1"));
  EXPECT_THAT(line, Not(HasSubstr("variants 1 ok of 1, ")));
  EXPECT_THAT(line, HasSubstr("best 2.500 ms"));
  EXPECT_DOUBLE_EQ(st.device_s, 0.4);
  // A run without variants has no such part.
  progress_state plain;
  update(plain, "run_start", {{"schedule", "async"}, {"devices", {0}}, {"num_workers", 4}}, 0);
  EXPECT_THAT(format_progress_line(plain, 1), Not(HasSubstr("variants")));
  auto started = format_log_line(st, "candidate_start", {{"candidate_id", "r1_t1"}, {"parent_id", "r1_t0"},
                                                         {"gpu_id", 0}, {"tune", "num_warps 4->8"}}, 5, true);
  ASSERT_TRUE(started);
  EXPECT_THAT(*started, HasSubstr("(parent r1_t0, variant num_warps 4->8)"));
}

TEST(ProgressLine, AutoConcurrencyFollowsConcurrencyEvents) {
  progress_state st;
  update(st, "run_start", {{"schedule", "async"}, {"devices", {0}}, {"num_workers", 4}, {"num_workers_auto", true}}, 0);
  update(st, "candidate_start", {{"candidate_id", "c1"}, {"round", 1}}, 1);
  EXPECT_THAT(format_progress_line(st, 2), HasSubstr("1/4 (auto) running"));
  update(st, "concurrency", {{"num_workers", 29}, {"reason", "auto: 29 (LLM 20.0 s, device 0.75 s per candidate, 1 device)"}}, 3);
  EXPECT_THAT(format_progress_line(st, 4), HasSubstr("1/29 (auto) running"));
  progress_state fixed;
  update(fixed, "run_start", {{"schedule", "async"}, {"num_workers", 6}}, 0);
  update(fixed, "candidate_start", {{"candidate_id", "c1"}, {"round", 1}}, 1);
  EXPECT_THAT(format_progress_line(fixed, 2), HasSubstr("1/6 running"));
}

TEST(ProgressLine, ManySyntheticGpusAreCountedAndTheLineStaysWithin120Columns) {
  progress_state st;
  update(st, "run_start", {{"devices", {0, 1, 2, 3, 4, 5, 6, 7}}, {"max_rounds", 1000}}, 0);
  update(st, "initial", {{"initial_ms", 123456.789}}, 1);
  update(st, "round_start", {{"round", 999}, {"candidates", 64}}, 2);
  for (int g = 0; g < 8; ++g) update(st, "mode_change", {{"gpu_id", g}, {"mode", "synthetic"}}, 3);
  update(st, "llm_call", {{"tokens_in", 123456789012}, {"tokens_out", 1}, {"cost_usd", 12345.678}}, 4);
  const auto line = format_progress_line(st, 360000);
  // Too long for one line: the LLM tally goes first, and the modes stay visible at the end.
  EXPECT_THAT(line, testing::EndsWith(" | GPU n/a | 8 GPUs synthetic"));
  EXPECT_THAT(line, Not(HasSubstr("LLM")));
  EXPECT_THAT(line, HasSubstr("round 999/1000"));
  EXPECT_LE(line.size(), progress_line_columns);
  // Narrower still: the middle is cut, the modes stay.
  const auto narrow = format_progress_line(st, 360000, 60);
  EXPECT_THAT(narrow, testing::EndsWith("... | 8 GPUs synthetic"));
  EXPECT_THAT(narrow, HasSubstr("round 999/1000"));
  EXPECT_LE(narrow.size(), 60u);
}

TEST(ProgressLine, ANodesDevicesGoByTheirNamesAndALostNodeIsCounted) {
  progress_state st;
  update(st, "run_start", {{"strategy", "cpu"}, {"devices", {0, 100, 101}}, {"max_rounds", 2},
                           {"device_labels", {{"100", "nodeA/gpu0"}, {"101", "nodeB/gpu0"}, {"x", "junk"}}}}, 1000);
  update(st, "round_start", {{"round", 1}, {"max_rounds", 2}, {"candidates", 3}}, 1001);
  auto started = format_log_line(st, "candidate_start", {{"candidate_id", "r1_c1"}, {"gpu_id", 100}, {"parent_id", "initial"}},
                                 1002, true);
  ASSERT_TRUE(started);
  EXPECT_THAT(*started, HasSubstr("r1_c1 started on nodeA/gpu0"));
  const json down = {{"device", "nodeA/gpu0"}, {"gpu_id", 100}, {"reason", "remote_link_unreachable"}, {"requeued", 1},
                     {"devices_left", 2}};
  update(st, "node_down", down, 1010);
  auto line = format_log_line(st, "node_down", down, 1010, false);
  ASSERT_TRUE(line) << "a lost node is said even without --verbose";
  EXPECT_THAT(*line, HasSubstr("nodeA/gpu0 lost with its node (remote_link_unreachable): 1 candidate back in the queue, "
                               "2 devices left"));
  EXPECT_THAT(format_progress_line(st, 1020), HasSubstr("1 of 3 devices lost"));
  update(st, "mode_change", {{"gpu_id", 101}, {"mode", "synthetic"}}, 1030);
  EXPECT_THAT(format_progress_line(st, 1040, 200), HasSubstr("nodeB/gpu0: synthetic"));
}

TEST(ProgressLine, BestOnlyImprovesAndRunEndIsShown) {
  progress_state st;
  update(st, "initial", {{"initial_ms", 2.0}}, 0);
  update(st, "candidate_result", {{"ok", true}, {"time_ms", 1.5}}, 1);
  update(st, "candidate_result", {{"ok", true}, {"time_ms", 1.8}, {"best_ms", 1.8}}, 2);
  EXPECT_EQ(st.best_ms, 1.5);
  update(st, "run_end", {{"success", false}, {"error", "boom"}}, 3);
  EXPECT_THAT(format_progress_line(st, 4), HasSubstr("FAILED"));
}

TEST(LogLine, SignificantEventsGetOneLineEachOthersOnlyWhenVerbose) {
  auto st = rounds_run();
  const json failed = {{"candidate_id", "r2_c2"}, {"gpu_id", 1}, {"ok", false}, {"failure_cause", "timeout"},
                       {"error", "timed out\nafter 30 s"}};
  update(st, "candidate_result", failed, 1080);
  auto line = format_log_line(st, "candidate_result", failed, 1080);
  ASSERT_TRUE(line);
  EXPECT_EQ(*line, "[01:20] r2_c2 (gpu1): failed (timeout): timed out after 30 s [1 ok, 2 failed]");

  const json ok = {{"candidate_id", "r2_c3"}, {"gpu_id", 0}, {"ok", true}, {"time_ms", 0.5}, {"new_best", true}};
  update(st, "candidate_result", ok, 1090);
  line = format_log_line(st, "candidate_result", ok, 1090);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("r2_c3 (gpu0): 0.5000 ms NEW BEST, best 0.5000 ms (4.00x)"));

  const json mode = {{"gpu_id", 1}, {"mode", "synthetic"}, {"reason", "rocprofv3 exited 1"}};
  line = format_log_line(st, "mode_change", mode, 1095);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("gpu1: synthetic analysis from now on: rocprofv3 exited 1"));

  const json start = {{"candidate_id", "r2_c4"}, {"gpu_id", 0}, {"parent_id", "initial"}};
  EXPECT_FALSE(format_log_line(st, "candidate_start", start, 1096));
  EXPECT_FALSE(format_log_line(st, "llm_call", json::object(), 1096));
  line = format_log_line(st, "candidate_start", start, 1096, true);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("r2_c4 started on gpu0 (parent initial)"));

  line = format_log_line(st, "error", {{"what", "gpu worker down"}, {"gpu_id", 1}}, 1097);
  ASSERT_TRUE(line);
  EXPECT_THAT(*line, HasSubstr("error: gpu worker down {\"gpu_id\":1}"));
}

TEST(ProgressLine, FitsTheTerminalLessOneColumn) {
  EXPECT_EQ(progress_columns(80, nullptr), 79u);
  EXPECT_EQ(progress_columns(0, "100"), 99u);      // no window size: COLUMNS
  EXPECT_EQ(progress_columns(0, "wide"), 79u);     // neither: 80 columns
  EXPECT_EQ(progress_columns(0, nullptr), 79u);
  EXPECT_EQ(progress_columns(300, nullptr), progress_line_columns);
  EXPECT_EQ(progress_columns(5, nullptr), progress_line_min_columns);
}

TEST(ProgressLine, ANarrowTerminalLosesTheLlmTallyAndBusyFigureBeforeTheCounts) {
  progress_state st;
  update(st, "run_start", {{"devices", {0, 1, 2, 3}}, {"max_rounds", 10}, {"num_workers", 32}}, 0);
  update(st, "round_start", {{"round", 2}, {"candidates", 12}}, 5);
  update(st, "candidate_start", {{"candidate_id", "r2_c0"}}, 6);
  update(st, "candidate_result", {{"candidate_id", "r2_c0"}, {"ok", true}, {"time_ms", 0.1234}, {"device_s", 2.0}}, 7);
  update(st, "llm_call", {{"tokens_in", 123456}, {"tokens_out", 7890}, {"cost_usd", 12.5}}, 8);
  const auto wide = format_progress_line(st, 3725);
  ASSERT_GT(wide.size(), 79u) << wide;  // else the test shows nothing
  for (std::size_t cols : {79u, 60u, 40u, 24u}) {
    const auto line = format_progress_line(st, 3725, cols);
    EXPECT_LE(line.size(), cols) << line;
  }
  const auto at80 = format_progress_line(st, 3725, 79);
  EXPECT_THAT(at80, HasSubstr("round 2/10"));
  EXPECT_THAT(at80, HasSubstr("1 ok"));
  EXPECT_THAT(at80, HasSubstr("best 0.1234 ms"));
}

} // namespace
} // namespace kagent::report
