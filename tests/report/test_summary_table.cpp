#include "platform/report/summary_table.hpp"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kagent::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

json full_summary() {
  return {{"success", true},
          {"strategy", "amd"},
          {"search", "beam_search"},
          {"kernel_dir", "examples/matvec"},
          {"eager_ms", 4.0},
          {"compile_ms", 3.0},
          {"initial_ms", 2.0},
          {"best_ms", 1.0},
          {"best_program_id", "r3_c2"},
          {"best_kernel_path", "/runs/x/output/best_kernel.py"},
          {"run_dir", "/runs/x"},
          {"rounds", 3},
          {"candidates", 24},
          {"verified", 20},
          {"failed", 4},
          {"failures_by_cause", {{"timeout", 1}, {"verification", 3}}},
          {"llm", {{"calls", 26}, {"failed_calls", 1}, {"tokens_in", 123456}, {"tokens_out", 7890}, {"cost_usd", 0.42}}},
          {"analysis_mode", {{"0", "profiled"}, {"1", "synthetic"}}},
          {"wall_s", 723.0}};
}

TEST(SummaryTable, ShowsTimesSpeedupsCountsFailuresLlmAndSyntheticDevices) {
  const auto t = format_summary_table(full_summary());
  EXPECT_THAT(t, HasSubstr("== kagent-actors summary: amd (beam_search) on examples/matvec"));
  EXPECT_THAT(t, testing::ContainsRegex("PyTorch eager +4.000 ms +4.00x"));
  EXPECT_THAT(t, testing::ContainsRegex("torch.compile +3.000 ms +3.00x"));
  EXPECT_THAT(t, testing::ContainsRegex("starting kernel +2.000 ms +2.00x"));
  EXPECT_THAT(t, testing::ContainsRegex("best kernel \\(r3_c2\\) +1.000 ms +1.00x"));
  EXPECT_THAT(t, HasSubstr("rounds 3  candidates 24  verified 20  failed 4  wall time 12:03"));
  EXPECT_THAT(t, HasSubstr("failures by cause: verification=3, timeout=1"));  // most frequent first
  EXPECT_THAT(t, HasSubstr("LLM: 26 calls (1 failed), 123456 tokens in, 7890 tokens out, est. $0.4200"));
  EXPECT_THAT(t, HasSubstr("devices in synthetic mode: gpu1"));
  EXPECT_THAT(t, HasSubstr("best kernel: /runs/x/output/best_kernel.py"));
  EXPECT_THAT(t, Not(HasSubstr("FAILED")));
  EXPECT_THAT(t, Not(HasSubstr("n/a")));
  EXPECT_THAT(t, Not(HasSubstr("device time")));  // summary.json without device_s: no line
}

TEST(SummaryTable, DeviceTimePerCandidateBusyAndTheUsersTestShare) {
  auto s = full_summary();
  s["device_s"] = 19.64;
  s["gpu_busy_pct"] = 66.1;
  s["user_test_s"] = 3.5;
  EXPECT_THAT(format_summary_table(s),
              HasSubstr("device time: 19.6 s, 0.82 s per candidate, GPU busy 66%, of it the kernel directory's "
                        "test.py 3.5 s\n"));
  s["user_test_s"] = 0;  // no test.py ran (user_test: never), or a summary of an older run
  EXPECT_THAT(format_summary_table(s), HasSubstr("device time: 19.6 s, 0.82 s per candidate, GPU busy 66%\n"));
  s["user_test_s"] = 25.0;  // more than the device time: not believed
  EXPECT_THAT(format_summary_table(s), Not(HasSubstr("test.py")));
  s["device_s"] = -1;
  EXPECT_THAT(format_summary_table(s), Not(HasSubstr("device time")));
}

TEST(SummaryTable, LaunchConstantVariantsGetALineOnlyWhenAnyRan) {
  auto s = full_summary();
  EXPECT_THAT(format_summary_table(s), Not(HasSubstr("variants")));
  s["variants"] = {{"run", 0}, {"verified", 0}};
  EXPECT_THAT(format_summary_table(s), Not(HasSubstr("variants")));
  s["variants"] = {{"run", 17}, {"verified", 15}};
  EXPECT_THAT(format_summary_table(s), HasSubstr("  launch-constant variants: 17 run, 15 verified\n"));
  s["best_tune"] = "BLOCK_K 512->1024";
  EXPECT_THAT(format_summary_table(s),
              HasSubstr("  launch-constant variants: 17 run, 15 verified; the best is one (BLOCK_K 512->1024)\n"));
}

TEST(SummaryTable, MissingNullAndNonFiniteValuesPrintNa) {
  json s = {{"success", false},
            {"error", "Initial kernel failed correctness verification: boom"},
            {"eager_ms", nullptr},
            {"compile_ms", -1},
            {"initial_ms", std::numeric_limits<double>::infinity()},
            {"best_ms", std::numeric_limits<double>::quiet_NaN()},
            {"candidates", "many"},
            {"llm", {{"calls", nullptr}}}};
  const auto t = format_summary_table(s);
  EXPECT_THAT(t, testing::ContainsRegex("PyTorch eager +n/a +n/a"));
  EXPECT_THAT(t, testing::ContainsRegex("torch.compile +n/a +n/a"));
  EXPECT_THAT(t, testing::ContainsRegex("starting kernel +n/a +n/a"));
  EXPECT_THAT(t, testing::ContainsRegex("best kernel +n/a +n/a"));
  EXPECT_THAT(t, HasSubstr("rounds n/a  candidates n/a  verified n/a  failed n/a  wall time n/a"));
  EXPECT_THAT(t, HasSubstr("LLM: n/a calls (n/a failed), n/a tokens in, n/a tokens out, est. n/a"));
  EXPECT_THAT(t, HasSubstr("failures by cause: none"));
  EXPECT_THAT(t, HasSubstr("devices in synthetic mode: none"));
  EXPECT_THAT(t, HasSubstr("FAILED: Initial kernel failed correctness verification: boom"));
  for (const char* bad : {"inf", "nan", "-1"}) EXPECT_THAT(t, Not(HasSubstr(bad))) << bad;
}

TEST(SummaryTable, AnEmptyOrNonObjectSummaryStillPrintsATable) {
  for (const json& s : {json::object(), json(nullptr), json::array()}) {
    const auto t = format_summary_table(s);
    EXPECT_THAT(t, HasSubstr("== kagent-actors summary: run"));
    EXPECT_THAT(t, HasSubstr("FAILED: the run left no summary"));
    EXPECT_THAT(t, testing::ContainsRegex("best kernel +n/a"));
  }
}

TEST(SummaryTable, SpeedupsFallBackToTheGivenRatiosWhenATimeIsMissing) {
  json s = full_summary();
  s["eager_ms"] = nullptr;
  s["speedup_vs_eager"] = 5.5;
  EXPECT_THAT(format_summary_table(s), testing::ContainsRegex("PyTorch eager +n/a +5.50x"));
}

TEST(SummaryTable, ReferencesFromTheCacheSaySo) {
  json s = full_summary();
  EXPECT_THAT(format_summary_table(s), testing::Not(testing::HasSubstr("(cached)")));
  s["references_cached_at"] = "2026-12-06T10:11:54Z";
  const auto t = format_summary_table(s);
  EXPECT_THAT(t, testing::HasSubstr("PyTorch eager (cached)"));
  EXPECT_THAT(t, testing::HasSubstr("torch.compile (cached)"));
}

TEST(SummaryTable, SyntheticDevicesFromEveryKnownShape) {
  EXPECT_EQ(synthetic_devices_of({{"synthetic_devices", {1, 3}}}), (std::vector<std::string>{"gpu1", "gpu3"}));
  EXPECT_EQ(synthetic_devices_of({{"analysis_modes", {{"2", "synthetic"}, {"3", "profiled"}}}}),
            (std::vector<std::string>{"gpu2"}));
  EXPECT_EQ(synthetic_devices_of({{"synthetic_devices", {"1"}}, {"analysis_mode", {{"1", "synthetic"}}}}),
            (std::vector<std::string>{"gpu1"}));
  EXPECT_TRUE(synthetic_devices_of({{"synthetic_devices", "1"}}).empty());
  // The manager's shape: one object per device, with the reason.
  nlohmann::json manager_shape = {{"synthetic_devices", nlohmann::json::array({{{"gpu_id", 2}, {"reason", "stats pass: timed out"}}})}};
  EXPECT_EQ(synthetic_devices_of(manager_shape), (std::vector<std::string>{"gpu2"}));
}

} // namespace
} // namespace kagent::report
