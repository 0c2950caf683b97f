#include "platform/report/html_report.hpp"

#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/store/util.hpp"
#include "tests/report/report_fixture.hpp"
#include "platform/common/files.hpp"

namespace kagent::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class HtmlReport : public test::scratch_dir {};

/// The text between `from` and the next occurrence of `to` (or the end).
std::string section(const std::string& html, const std::string& from, const std::string& to) {
  const auto a = html.find(from);
  if (a == std::string::npos) return "";
  const auto b = html.find(to, a + from.size());
  return html.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

void expect_self_contained(const std::string& html) {
  // Nothing is fetched: no script, no stylesheet link, no src/href/url() that leaves the page.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  std::regex attr(R"re((src|href|xlink:href)\s*=\s*["']?([^"' >]*))re", std::regex::icase);
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attr); it != std::sregex_iterator(); ++it)
    EXPECT_EQ((*it)[2].str().rfind('#', 0), 0u) << "external reference: " << it->str();
  EXPECT_EQ(html.find("http"), std::string::npos) << "a URL in the page";
  for (const char* bad : {">inf", ">nan", "inf ms", "nan ms", ">-1<", "-nan"}) EXPECT_THAT(html, Not(HasSubstr(bad))) << bad;
}

TEST_F(HtmlReport, FinishedRunHasChartsLineageDiffTablesAndEscapedCode) {
  const auto run = test::make_finished_run(dir_);
  const auto path = write_report_html(run);
  EXPECT_EQ(path, run / "report.html");
  const auto html = test::slurp(path);
  expect_self_contained(html);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_THAT(html, HasSubstr("</html>"));

  // Summary table, status.
  EXPECT_THAT(html, HasSubstr("Finished: best kernel r2_c1 at 1.000 ms (2.00x vs the starting kernel)"));
  EXPECT_THAT(html, HasSubstr("<td>best kernel (r2_c1)</td><td class=\"num\">1.000 ms</td>"));
  EXPECT_THAT(html, HasSubstr("<td>PyTorch eager</td><td class=\"num\">3.000 ms</td><td class=\"num\">3.00x</td>"));
  EXPECT_THAT(html, HasSubstr("<th>devices in synthetic mode</th><td>gpu1</td>"));
  EXPECT_THAT(html, HasSubstr("<th>GPU busy</th><td>6% (12.5 device-s over 2 device(s))</td>"));
  // The achieved share of the hardware floor, for the verified kernels (fastest table and lineage).
  const auto top = section(html, "id=\"top\"", "</table>");
  EXPECT_THAT(top, HasSubstr("% of hardware floor</th>"));
  EXPECT_THAT(top, HasSubstr("<td class=\"num\">45.0</td>"));  // r2_c1: 0.45 ms floor / 1.0 ms
  EXPECT_THAT(top, HasSubstr("<td class=\"num\">25.0</td>"));  // r1_c1: 0.45 / 1.8

  // Two charts: each with the best-so-far step line, markers for the 3 verified and 2 failed candidates.
  EXPECT_EQ(std::count(html.begin(), html.end(), '\0'), 0);
  const auto by_candidates = section(html, "Best time over candidates", "</svg>");
  ASSERT_FALSE(by_candidates.empty());
  EXPECT_THAT(by_candidates, HasSubstr("class=\"best\""));
  EXPECT_THAT(by_candidates, HasSubstr("class=\"reference\""));
  auto count = [](const std::string& s, const std::string& what) {
    std::size_t n = 0;
    for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(by_candidates, "<circle class=\"point\""), 3u);
  EXPECT_EQ(count(by_candidates, "<path class=\"fail\""), 2u);
  EXPECT_THAT(by_candidates, HasSubstr("<title>r1_c2: failed (verification)</title>"));
  EXPECT_THAT(html, HasSubstr("Best time over wall-clock time"));
  // Wall-clock (with phases), candidates, and the roofline of the verified kernels.
  EXPECT_EQ(count(html, "<svg class=\"chart"), 3u);
  EXPECT_EQ(count(html, "<svg class=\"chart wallclock\""), 1u);
  EXPECT_EQ(count(html, "<svg class=\"chart roofline\""), 1u);

  // Lineage: initial -> r1_c0 -> r2_c1 in that order, with times and speed-ups.
  const auto lin = section(html, "<div class=\"lineage\">", "</div>");
  const auto p0 = lin.find("<b>initial</b>"), p1 = lin.find("<b>r1_c0</b>"), p2 = lin.find("<b>r2_c1</b>");
  ASSERT_NE(p0, std::string::npos);
  ASSERT_NE(p1, std::string::npos);
  ASSERT_NE(p2, std::string::npos);
  EXPECT_LT(p0, p1);
  EXPECT_LT(p1, p2);
  EXPECT_THAT(lin, HasSubstr("<b>r1_c0</b><br>1.500 ms &middot; 1.33x"));
  EXPECT_THAT(lin, HasSubstr("<b>r2_c1</b><br>1.000 ms &middot; 2.00x"));
  EXPECT_THAT(lin, Not(HasSubstr("r1_c1")));

  // The diff of the best kernel against the starting kernel, escaped.
  const auto diff = section(html, "<pre class=\"diff\">", "</pre>");
  ASSERT_FALSE(diff.empty());
  EXPECT_THAT(diff, HasSubstr("<span class=\"file\">--- initial</span><span class=\"file\">+++ r2_c1</span>"));
  EXPECT_THAT(diff, HasSubstr("<span class=\"del\">-    tl.store(y_ptr + offs, x * 2, mask=mask)</span>"));
  EXPECT_THAT(diff, HasSubstr("<span class=\"add\">+    tl.store(y_ptr + offs, x + x, mask=mask)</span>"));
  EXPECT_THAT(diff, HasSubstr("<span class=\"add\">+    x = tl.load(x_ptr + offs, mask=mask, eviction_policy=&quot;evict_first&quot;)</span>"));
  EXPECT_THAT(diff, HasSubstr("<span class=\"ctx\">     mask = offs &lt; n</span>"));
  EXPECT_THAT(diff, HasSubstr("<span class=\"hunk\">@@ "));
  EXPECT_THAT(html, HasSubstr("3 line(s) removed, 3 added."));
  // Kernel text never reaches the page unescaped.
  EXPECT_THAT(html, Not(HasSubstr("offs < n")));
  EXPECT_THAT(html, HasSubstr("# starting kernel &lt;/pre&gt; &amp; friends"));

  // Failures, escaped error text; LLM usage per purpose and model; notable events.
  EXPECT_THAT(html, HasSubstr("<td>timeout</td><td class=\"num\">1</td>"));
  EXPECT_THAT(html, HasSubstr("<td>verification</td><td class=\"num\">1</td>"));
  EXPECT_THAT(html, HasSubstr("mismatch at &lt;script&gt;alert(1)&lt;/script&gt; index 3 &amp; 4 second line"));
  EXPECT_THAT(html, HasSubstr("<td>optimize</td><td>claude-opus-4.5</td><td class=\"num\">2</td><td class=\"num\">1</td>"
                              "<td class=\"num\">2000</td><td class=\"num\">1000</td><td class=\"num\">$0.0200</td>"));
  EXPECT_THAT(html, HasSubstr("gpu1: synthetic analysis from now on: rocprofv3 timed out"));
}

// summary.json's device seconds (every session) and, of them, the kernel directory's test.py runs.
TEST_F(HtmlReport, GpuBusyNamesTheUsersTestShareOfTheDeviceTime) {
  const auto run = test::make_finished_run(dir_);
  auto summary = nlohmann::json::parse(test::slurp(run / "summary.json"));
  summary["gpu_busy_pct"] = 66.0;
  summary["device_s"] = 19.6;
  summary["user_test_s"] = 3.5;
  kagent::store::write_file_atomic(run / "summary.json", summary.dump());
  EXPECT_THAT(test::slurp(write_report_html(run)),
              HasSubstr("<th>GPU busy</th><td>66% (19.6 device-s over 2 device(s); the kernel directory&#39;s test.py "
                        "3.5 s of it)</td>"));
  summary["user_test_s"] = 0;
  kagent::store::write_file_atomic(run / "summary.json", summary.dump());
  EXPECT_THAT(test::slurp(write_report_html(run)), HasSubstr("<th>GPU busy</th><td>66% (19.6 device-s over 2 device(s))</td>"));
}

TEST_F(HtmlReport, FailedRunWithoutBestOrCandidatesStillRenders) {
  const auto run = test::make_failed_run(dir_);
  const auto html = test::slurp(write_report_html(run));
  expect_self_contained(html);
  EXPECT_THAT(html, HasSubstr("Run failed: Initial kernel failed correctness verification: max abs diff 1e9 &gt; atol"));
  EXPECT_THAT(html, HasSubstr("No verified kernel: there is no best kernel to trace."));
  EXPECT_THAT(html, HasSubstr("No best kernel: nothing to compare."));
  EXPECT_THAT(html, HasSubstr("no candidates"));
  EXPECT_THAT(html, HasSubstr("<td>verification</td><td class=\"num\">1</td>"));
  EXPECT_THAT(html, HasSubstr("No LLM calls recorded."));
  EXPECT_THAT(html, HasSubstr("error: initial kernel failed verification"));
  EXPECT_THAT(html, testing::ContainsRegex("<td>best kernel</td><td class=\"num\">n/a</td><td class=\"num\">n/a</td>"));
}

TEST_F(HtmlReport, RunWithoutCandidatesShowsTheStartingKernelAsBest) {
  const auto run = test::make_no_candidate_run(dir_);
  const auto html = test::slurp(write_report_html(run));
  expect_self_contained(html);
  EXPECT_THAT(html, HasSubstr("The best kernel is the starting kernel: no change."));
  EXPECT_THAT(html, HasSubstr("<b>initial</b><br>2.000 ms &middot; 1.00x"));
  EXPECT_THAT(html, HasSubstr("no candidates"));
  EXPECT_THAT(html, HasSubstr("<td>torch.compile</td><td class=\"num\">n/a</td><td class=\"num\">n/a</td>"));
  EXPECT_THAT(html, HasSubstr("No failed candidates."));
}

TEST_F(HtmlReport, ADirectoryWithNothingInItNamesWhatIsMissing) {
  const auto html = test::slurp(write_report_html(dir_));
  expect_self_contained(html);
  EXPECT_THAT(html, HasSubstr("no summary.json (the run did not finish)"));
  EXPECT_THAT(html, HasSubstr("no events.jsonl"));
  EXPECT_THAT(html, HasSubstr("no program.db"));
  EXPECT_THAT(html, HasSubstr("Run failed: the run left no summary"));
}

TEST_F(HtmlReport, WithoutSummaryTheFastestVerifiedProgramIsTheBest) {
  const auto run = test::make_finished_run(dir_);
  fs::remove(run / "summary.json");
  const auto d = load_report_data(run);
  EXPECT_EQ(best_program_id(d), "r2_c1");
  const auto html = render_report_html(d);
  EXPECT_THAT(html, HasSubstr("<b>r2_c1</b><br>1.000 ms &middot; 2.00x"));
}

TEST_F(HtmlReport, TheGivenSummaryWinsOverSummaryJson) {
  const auto run = test::make_finished_run(dir_);
  nlohmann::json s = nlohmann::json::parse(read_file(run / "summary.json"));
  s["strategy"] = "given-strategy";
  const auto html = test::slurp(write_report_html(run, s));
  EXPECT_THAT(html, HasSubstr("kagent-actors: given-strategy (beam_search)"));
}

TEST_F(HtmlReport, LineageFollowsParentsAndStopsAtCycles) {
  std::vector<store::program_record> ps(4);
  ps[0].id = "initial";
  ps[1].id = "a", ps[1].parent_id = "initial";
  ps[2].id = "b", ps[2].parent_id = "a";
  ps[3].id = "loop", ps[3].parent_id = "loop";
  const auto chain = lineage(ps, "b");
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[0].id, "initial");
  EXPECT_EQ(chain[2].id, "b");
  EXPECT_EQ(lineage(ps, "loop").size(), 1u);
  EXPECT_TRUE(lineage(ps, "missing").empty());
}

TEST_F(HtmlReport, AnUnwritableRunDirectoryIsARunError) {
  EXPECT_THROW(write_report_html(dir_ / "does" / "not" / "exist"), run_error);
}

} // namespace
} // namespace kagent::report
