// The search tree, the candidate details, the roofline and phase charts, the running state and
// the top list of report.html, checked on the page's text.
#include <fmt/format.h>

#include <fstream>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/report/html_report.hpp"
#include "platform/report/program_tree.hpp"
#include "platform/report/run_charts.hpp"
#include "platform/store/util.hpp"
#include "tests/report/report_fixture.hpp"
#include "platform/common/files.hpp"

namespace kagent::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class ReportTree : public test::scratch_dir {};

std::string between(const std::string& html, const std::string& from, const std::string& to) {
  const auto a = html.find(from);
  if (a == std::string::npos) return "";
  const auto b = html.find(to, a + from.size());
  return html.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

/// The tree node (<a class="tnode ...">...</a>) of `id` inside `html`.
std::string node_of(const std::string& html, const std::string& id) {
  const std::regex re("<a class=\"tnode[^\"]*\" href=\"#cand-" + id + "\"><b>" + id + "</b>.*?</a>");
  std::smatch m;
  return std::regex_search(html, m, re) ? m.str() : "";
}

/// One candidate's details block.
std::string details_of(const std::string& html, const std::string& id) {
  return between(html, "<details class=\"cand\" id=\"cand-" + id + "\">", "</div></details>");
}

TEST_F(ReportTree, TheTreeHoldsEveryProgramOnceUnderItsParent) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  const auto tree = between(html, "<ul class=\"tree\">", "</div>");
  ASSERT_FALSE(tree.empty());
  for (const char* id : {"initial", "r1_c0", "r1_c1", "r1_c2", "r2_c0", "r2_c1", "r2_c2", "r2_c3"})
    EXPECT_EQ(count(tree, std::string("href=\"#cand-") + id + "\""), 1u) << id;
  // initial is the only root; r2_c1 is nested in r1_c0's list, r2_c3 in r1_c1's.
  EXPECT_EQ(tree.find("<li>"), tree.find("<li><a class=\"tnode verified on-path\" href=\"#cand-initial\""));
  const auto r1c0 = tree.find("#cand-r1_c0"), r2c1 = tree.find("#cand-r2_c1"), r1c1 = tree.find("#cand-r1_c1");
  EXPECT_LT(r1c0, r2c1);
  EXPECT_LT(r2c1, r1c1);
  EXPECT_THAT(tree.substr(r1c0, r2c1 - r1c0), HasSubstr("<ul>"));
  EXPECT_THAT(tree.substr(r1c1), HasSubstr("#cand-r2_c3"));
}

TEST_F(ReportTree, TheBestPathIsOutlinedAndNodesShowTimeSpreadAndStatus) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  for (const char* id : {"initial", "r1_c0", "r2_c1"}) EXPECT_THAT(node_of(html, id), HasSubstr(" on-path")) << id;
  for (const char* id : {"r1_c1", "r2_c0", "r2_c2"}) EXPECT_THAT(node_of(html, id), Not(HasSubstr("on-path"))) << id;
  EXPECT_THAT(node_of(html, "r2_c1"), HasSubstr("<span class=\"badge\">best</span>"));
  EXPECT_THAT(node_of(html, "r2_c1"), HasSubstr("1.000 ms"));
  EXPECT_THAT(node_of(html, "r2_c3"), HasSubstr("3.500 ms (IQR 3.2%)"));
  EXPECT_THAT(node_of(html, "r2_c3"), HasSubstr("verified, diverged"));
  EXPECT_THAT(node_of(html, "r2_c3"), HasSubstr("class=\"tnode verified diverged\""));
}

TEST_F(ReportTree, DuplicatesAreGreyAndFailuresRedWithTheirCause) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  const auto dup = node_of(html, "r2_c2");
  EXPECT_THAT(dup, HasSubstr("class=\"tnode duplicate\""));
  EXPECT_THAT(dup, HasSubstr("duplicate of r2_c1"));
  EXPECT_THAT(dup, Not(HasSubstr("failed")));
  EXPECT_THAT(node_of(html, "r1_c2"), HasSubstr("class=\"tnode failed\""));
  EXPECT_THAT(node_of(html, "r1_c2"), HasSubstr("failed: verification"));
  EXPECT_THAT(node_of(html, "r2_c0"), HasSubstr("failed: timeout"));
  // The styles: grey for duplicates, red for failures.
  const auto dup_css = between(html, ".tnode.duplicate {", "}");
  const auto fail_css = between(html, ".tnode.failed {", "}");
  EXPECT_THAT(dup_css, HasSubstr("color: #6b7280"));
  EXPECT_THAT(dup_css, Not(HasSubstr("#b3261e")));
  EXPECT_THAT(fail_css, HasSubstr("color: #b3261e"));
}

TEST_F(ReportTree, EveryInPageLinkResolvesToAnAnchor) {
  for (const auto& run : {test::make_tree_run(dir_ / "a"), test::make_running_run(dir_ / "b"),
                          test::make_failed_run(dir_ / "c")}) {
    const auto html = test::slurp(write_report_html(run));
    std::set<std::string> ids;
    const std::regex id_re("\\bid=\"([^\"]+)\"");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), id_re); it != std::sregex_iterator(); ++it)
      EXPECT_TRUE(ids.insert((*it)[1].str()).second) << "duplicate id " << (*it)[1].str();
    const std::regex href_re("href=\"#([^\"]*)\"");
    std::size_t links = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), href_re); it != std::sregex_iterator(); ++it, ++links)
      EXPECT_TRUE(ids.count((*it)[1].str())) << "no anchor for #" << (*it)[1].str() << " in " << run;
    EXPECT_GT(links, 10u);
  }
}

TEST_F(ReportTree, DetailsHoldTheDiffDirectionModelPromptAndEscapedReply) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  const auto d = details_of(html, "r2_c1");
  ASSERT_FALSE(d.empty());
  // The diff against its parent r1_c0 (whose extra comment line the best kernel lacks).
  EXPECT_THAT(d, HasSubstr("<span class=\"file\">--- r1_c0</span><span class=\"file\">+++ r2_c1</span>"));
  EXPECT_THAT(d, HasSubstr("<span class=\"del\">-# r1_c0: wider blocks</span>"));
  EXPECT_THAT(d, HasSubstr("<span class=\"add\">+    tl.store(y_ptr + offs, x + x, mask=mask)</span>"));
  EXPECT_THAT(d, HasSubstr("<th>direction (bottleneck targeted)</th><td>memory</td>"));
  EXPECT_THAT(d, HasSubstr("<th>model</th><td>claude-opus-4.5</td>"));
  EXPECT_THAT(d, HasSubstr("<th>% of peak (SOL)</th><td>71.5%</td>"));
  EXPECT_THAT(d, HasSubstr("<th>% of the hardware floor</th><td>45.0%</td>"));
  EXPECT_THAT(d, HasSubstr("<th>time (median)</th><td>1.000 ms, spread not recorded</td>"));
  EXPECT_THAT(d, HasSubstr("128-wide blocks leave bandwidth unused"));
  EXPECT_THAT(d, HasSubstr("<a href=\"#cand-r1_c0\">r1_c0</a>"));
  // Prompt and reply, in call order, escaped: the reply's </pre><script> stays text.
  const auto prompt = d.find("1_optimize_prompt.txt"), reply = d.find("1_optimize_reply.txt");
  ASSERT_NE(prompt, std::string::npos);
  ASSERT_NE(reply, std::string::npos);
  EXPECT_LT(prompt, reply);
  EXPECT_THAT(d, HasSubstr("Optimize this kernel. PROMPT-MARKER-r2_c1\nx &lt; y &amp;&amp; z"));
  EXPECT_THAT(d, HasSubstr("&lt;/pre&gt;&lt;script&gt;alert(&#39;reply&#39;)&lt;/script&gt;&lt;pre&gt;"));
  EXPECT_THAT(d, Not(HasSubstr("kernel.py (")));  // the code is in the diff, not listed as a file
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_EQ(count(html, "<pre"), count(html, "</pre>"));

  // A failed candidate: its cause, error and the tail of its verification log.
  const auto f = details_of(html, "r1_c2");
  EXPECT_THAT(f, HasSubstr("<th>failure cause</th><td>verification</td>"));
  EXPECT_THAT(f, HasSubstr("mismatch at &lt;script&gt;alert(1)&lt;/script&gt; index 3 &amp; 4\nsecond line"));
  EXPECT_THAT(f, HasSubstr("verify_0.log ("));
  EXPECT_THAT(f, HasSubstr("LAST-LOG-LINE"));
  EXPECT_THAT(f, Not(HasSubstr("FIRST-LOG-LINE")));
  EXPECT_THAT(f, HasSubstr("its last 20 KB"));
  EXPECT_LT(f.find("2_refine_prompt.txt"), f.find("verify_0.log"));
  // A large prompt: its head, and a note that it was cut.
  const auto big = details_of(html, "r1_c0");
  EXPECT_THAT(big, HasSubstr("PROMPT-HEAD"));
  EXPECT_THAT(big, Not(HasSubstr("PROMPT-TAIL-NOT-SHOWN")));
  EXPECT_THAT(big, HasSubstr("Truncated: 20.0 KB of 30.0 KB shown (the start)"));
  // The duplicate: same code as its original's sibling, its details say why it was not kept.
  EXPECT_THAT(details_of(html, "r2_c2"), HasSubstr("same compiled code as r2_c1"));
}

TEST_F(ReportTree, OnlyARunningRunRefreshesItself) {
  const auto running = test::slurp(write_report_html(test::make_running_run(dir_ / "running")));
  EXPECT_THAT(running, HasSubstr("<meta http-equiv=\"refresh\" content=\"30\">"));
  EXPECT_THAT(running, HasSubstr("state <b class=\"run-state\">running</b>"));
  EXPECT_THAT(running, HasSubstr("<p class=\"status-running\">Running: 4 candidate(s) verified, 3 failed, 1 pending"));
  EXPECT_THAT(running, HasSubstr("best so far r2_c1 at 1.000 ms"));
  EXPECT_THAT(running, Not(HasSubstr("Run failed")));
  EXPECT_THAT(running, Not(HasSubstr(">-0<")));
  EXPECT_THAT(node_of(running, "r3_c0"), HasSubstr("class=\"tnode pending\""));
  EXPECT_THAT(running, Not(HasSubstr("<script")));

  const auto finished_run = test::make_tree_run(dir_ / "finished");
  const auto finished = test::slurp(write_report_html(finished_run));
  EXPECT_THAT(finished, Not(HasSubstr("http-equiv")));
  EXPECT_THAT(finished, HasSubstr("state <b class=\"run-state\">finished</b>"));
  const auto failed = test::slurp(write_report_html(test::make_failed_run(dir_ / "failed")));
  EXPECT_THAT(failed, Not(HasSubstr("http-equiv")));
  EXPECT_THAT(failed, HasSubstr("state <b class=\"run-state\">failed</b>"));

  auto s = nlohmann::json::parse(read_file(finished_run / "summary.json"));
  s["success"] = false;
  s["run_state"] = "interrupted";
  s["interrupted"] = true;
  s["interrupted_by"] = "SIGINT";
  s["resume_command"] = "kagent-actors --resume " + finished_run.string();
  const auto interrupted = test::slurp(write_report_html(finished_run, s));
  EXPECT_THAT(interrupted, Not(HasSubstr("http-equiv")));
  EXPECT_THAT(interrupted, HasSubstr("state <b class=\"run-state\">interrupted</b>"));
  EXPECT_THAT(interrupted, HasSubstr("Interrupted by SIGINT"));
  EXPECT_THAT(interrupted, HasSubstr("Resume with <code>kagent-actors --resume "));
}

TEST_F(ReportTree, TheTopListLeavesDivergedKernelsOut) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  const auto top = between(html, "<h2 id=\"top\">", "<h2 ");
  EXPECT_THAT(top, HasSubstr("1 diverged kernel(s) left out"));
  EXPECT_THAT(top, HasSubstr("#cand-r2_c1"));
  EXPECT_THAT(top, HasSubstr("#cand-r1_c1"));
  EXPECT_THAT(top, Not(HasSubstr("r2_c3")));
  EXPECT_THAT(top, Not(HasSubstr("r2_c2")));  // the duplicate is not verified
  const auto d = load_report_data(test::make_tree_run(dir_ / "again"));
  EXPECT_EQ(diverged_ids(d), (std::set<std::string>{"r2_c3"}));
}

TEST_F(ReportTree, LlmUsageIsShownPerModel) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_)));
  const auto by_model = between(html, "<table class=\"llm-by-model\">", "</table>");
  EXPECT_THAT(by_model, HasSubstr("<td>claude-opus-4.5</td><td class=\"num\">3</td><td class=\"num\">1</td>"
                                  "<td class=\"num\">3000</td><td class=\"num\">1500</td><td class=\"num\">$0.0300</td>"
                                  "<td class=\"num\">100%</td>"));
}

TEST_F(ReportTree, TheRooflineChartShowsTheVerifiedKernelsOrSaysThereIsNoData) {
  const auto html = test::slurp(write_report_html(test::make_tree_run(dir_ / "a")));
  const auto chart = between(html, "<svg class=\"chart roofline\"", "</svg>");
  ASSERT_FALSE(chart.empty());
  EXPECT_THAT(chart, HasSubstr("<title>r2_c1: 71.5% of peak</title>"));
  EXPECT_THAT(chart, HasSubstr("<title>r2_c1: 45.0% of the hardware floor</title>"));
  EXPECT_THAT(chart, HasSubstr("<a href=\"#cand-r2_c1\">"));
  // Fastest first.
  EXPECT_LT(chart.find("#cand-r2_c1"), chart.find("#cand-r1_c0"));
  EXPECT_LT(chart.find("#cand-r1_c0"), chart.find("#cand-r2_c3"));
  const auto none = test::slurp(write_report_html(test::make_failed_run(dir_ / "b")));
  EXPECT_THAT(none, HasSubstr("No profile data"));
  EXPECT_THAT(none, Not(HasSubstr("<svg class=\"chart roofline\"")));
}

/// A run whose initial phase takes 10 of its 12 minutes: the rounds must not be squashed.
report_data long_initial_phase() {
  report_data d;
  d.run_id = "long-initial";
  auto at = [](int s) { return fmt::format("2026-01-01T00:{:02d}:{:02d}Z", s / 60, s % 60); };
  d.events.push_back(nlohmann::json{{"type", "run_start"}, {"ts", at(0)}});
  d.events.push_back(nlohmann::json{{"type", "initial"}, {"ts", at(590)}, {"initial_ms", 2.0}});
  d.events.push_back(nlohmann::json{{"type", "round_start"}, {"ts", at(600)}, {"round", 1}});
  d.events.push_back(nlohmann::json{{"type", "candidate_result"}, {"ts", at(630)}, {"candidate_id", "r1_c0"}, {"ok", true}, {"time_ms", 1.5}});
  d.events.push_back(nlohmann::json{{"type", "round_start"}, {"ts", at(660)}, {"round", 2}});
  d.events.push_back(nlohmann::json{{"type", "candidate_result"}, {"ts", at(700)}, {"candidate_id", "r2_c0"}, {"ok", true}, {"time_ms", 1.2}});
  d.events.push_back(nlohmann::json{{"type", "run_end"}, {"ts", at(720)}, {"success", true}});
  return d;
}

TEST_F(ReportTree, TheWallClockChartMarksThePhasesAndStartsAtTheRounds) {
  const auto html = render_report_html(long_initial_phase());
  const auto chart = between(html, "<svg class=\"chart wallclock\"", "</svg>");
  ASSERT_FALSE(chart.empty());
  EXPECT_EQ(count(chart, "class=\"phase phase-initial\""), 1u);
  EXPECT_EQ(count(chart, "class=\"phase phase-a\""), 1u);
  EXPECT_EQ(count(chart, "class=\"phase phase-b\""), 1u);
  EXPECT_EQ(count(chart, "<line class=\"phase-line\""), 2u);  // the rounds' starts (the initial phase's is off the axis)
  EXPECT_THAT(chart, HasSubstr("<title>r1: 10:00 - 11:00</title>"));
  EXPECT_THAT(chart, HasSubstr("axis from 09:56: the initial phase before it is left out"));
  EXPECT_THAT(chart, HasSubstr(">r2</text>"));
  EXPECT_THAT(chart, Not(HasSubstr(">00:00</text>")));
  EXPECT_EQ(count(chart, "<circle class=\"point\""), 2u);

  // A short initial phase keeps the axis at zero.
  EXPECT_EQ(legible_x_from(10, 1000), 0);
  EXPECT_NEAR(legible_x_from(600, 720), 600 - 0.03 * 120, 1e-9);
  EXPECT_EQ(legible_x_from(0, 100), 0);
}

TEST(ProgramTree, OrphansAndCyclesBecomeRootsAndNothingIsLost) {
  std::vector<store::program_record> ps(6);
  ps[0].id = "initial";
  ps[1].id = "a", ps[1].parent_id = "initial";
  ps[2].id = "b", ps[2].parent_id = "a";
  ps[3].id = "orphan", ps[3].parent_id = "gone";
  ps[4].id = "x", ps[4].parent_id = "y";
  ps[5].id = "y", ps[5].parent_id = "x";
  const auto t = build_program_tree(ps);
  EXPECT_EQ(t.roots, (std::vector<std::size_t>{0, 3, 4}));
  EXPECT_EQ(t.children[0], (std::vector<std::size_t>{1}));
  EXPECT_EQ(t.children[1], (std::vector<std::size_t>{2}));
  EXPECT_EQ(t.children[4], (std::vector<std::size_t>{5}));
  EXPECT_TRUE(t.children[5].empty());
  std::size_t reached = 0;
  std::vector<std::size_t> stack = t.roots;
  while (!stack.empty()) {
    const auto k = stack.back();
    stack.pop_back();
    ++reached;
    for (auto c : t.children[k]) stack.push_back(c);
  }
  EXPECT_EQ(reached, ps.size());
}

TEST(CandidateAnchor, DistinctIdsGetDistinctSafeAnchors) {
  EXPECT_EQ(candidate_anchor("r1_c0"), "cand-r1_c0");
  EXPECT_EQ(candidate_anchor("a b"), "cand-a-20b");
  EXPECT_NE(candidate_anchor("a b"), candidate_anchor("a-20b"));
  EXPECT_EQ(candidate_anchor("\"><x"), "cand--22-3e-3cx");
}

TEST_F(ReportTree, CandidateFilesAreCutOnCharacterBoundariesAndWithinTheBudget) {
  const auto dir = dir_ / "c";
  fs::create_directories(dir);
  // 'é' is two bytes; the 20 KB cut falls in the middle of one.
  std::string text = "x";
  while (text.size() < candidate_file_limit + 100) text += "\xc3\xa9";
  std::ofstream(dir / "1_optimize_reply.txt", std::ios::binary) << text;
  std::ofstream(dir / "2_refine_prompt.txt", std::ios::binary) << std::string("a\0b\x1b[31mc\n", 10);
  std::ofstream(dir / "kernel.py") << "print(1)\n";
  std::size_t budget = candidate_files_budget;
  auto files = read_candidate_files(dir, budget);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, "1_optimize_reply.txt");
  EXPECT_TRUE(files[0].truncated);
  EXPECT_EQ(files[0].text.size() % 2, 1u);  // "x" and whole two-byte characters
  EXPECT_EQ(files[0].text.substr(files[0].text.size() - 2), "\xc3\xa9");
  EXPECT_EQ(files[1].text, "a?b?[31mc\n");
  EXPECT_EQ(budget, candidate_files_budget - candidate_file_limit - 10);
  std::size_t small = 50;
  files = read_candidate_files(dir, small);
  EXPECT_TRUE(files[0].left_out);
  EXPECT_FALSE(files[1].left_out);
}

} // namespace
} // namespace kagent::report
