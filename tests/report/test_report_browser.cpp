// report.html as a browser shows it: headless Chromium takes a screenshot and dumps the DOM. The
// test is skipped only where no chromium binary exists (scripts/install-deps.sh installs one).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/process/runner.hpp"
#include "platform/report/html_report.hpp"
#include "tests/report/report_fixture.hpp"

namespace kagent::report {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

/// KAGENT_CHROMIUM, else the first of the usual names on PATH; "" when there is none.
std::string find_chromium() {
  if (const char* env = std::getenv("KAGENT_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  if (!path) return "";
  const std::string p = path;
  for (const char* name : {"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}) {
    std::size_t start = 0;
    while (start <= p.size()) {
      const auto end = p.find(':', start);
      const auto dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
      const auto candidate = fs::path(dir.empty() ? "." : dir) / name;
      if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return "";
}

struct png_size {
  std::uint32_t width = 0, height = 0;
};

/// Width and height from the IHDR chunk; nullopt when `bytes` is not a PNG.
std::optional<png_size> png_dimensions(const std::string& bytes) {
  static const std::string signature = "\x89PNG\r\n\x1a\n";
  if (bytes.size() < 24 || bytes.compare(0, 8, signature) != 0 || bytes.compare(12, 4, "IHDR") != 0)
    return std::nullopt;
  auto be32 = [&](std::size_t at) {
    return (std::uint32_t(std::uint8_t(bytes[at])) << 24) | (std::uint32_t(std::uint8_t(bytes[at + 1])) << 16) |
           (std::uint32_t(std::uint8_t(bytes[at + 2])) << 8) | std::uint32_t(std::uint8_t(bytes[at + 3]));
  };
  return png_size{be32(16), be32(20)};
}

class ReportInBrowser : public test::scratch_dir {
protected:
  void SetUp() override {
    test::scratch_dir::SetUp();
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "no chromium binary on PATH (scripts/install-deps.sh installs it)";
  }

  process_result chromium(const std::vector<std::string>& mode, const fs::path& page) {
    process_spec spec;
    spec.argv = {chromium_, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--user-data-dir=" + (dir_ / "chromium-profile").string(), "--window-size=1280,2000"};
    spec.argv.insert(spec.argv.end(), mode.begin(), mode.end());
    spec.argv.push_back("file://" + fs::absolute(page).string());
    spec.timeout = std::chrono::seconds(120);
    spec.max_output_bytes = 32u << 20;
    return run_process(spec);
  }

  std::string chromium_;
};

TEST_F(ReportInBrowser, ScreenshotHasTheWindowSizeAndIsNotBlank) {
  const auto run = test::make_tree_run(dir_ / "runs");
  const auto page = write_report_html(run);
  const fs::path artifacts = fs::path(KAGENT_BINARY_DIR) / "test-artifacts" / "report";
  fs::create_directories(artifacts);
  const auto shot = artifacts / "report.png";
  fs::remove(shot);
  fs::copy_file(page, artifacts / "report.html", fs::copy_options::overwrite_existing);

  auto r = chromium({"--screenshot=" + shot.string()}, page);
  ASSERT_TRUE(r.started) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
  ASSERT_TRUE(fs::exists(shot)) << r.err;
  const auto png = test::slurp(shot);
  const auto size = png_dimensions(png);
  ASSERT_TRUE(size) << "not a PNG: " << shot;
  EXPECT_EQ(size->width, 1280u);
  EXPECT_EQ(size->height, 2000u);

  // A blank page of the same size compresses to almost nothing; the report's text, tables and
  // charts make its screenshot several times larger.
  const auto blank_page = dir_ / "blank.html";
  std::ofstream(blank_page) << "<!DOCTYPE html><html><body></body></html>\n";
  const auto blank_shot = dir_ / "blank.png";
  r = chromium({"--screenshot=" + blank_shot.string()}, blank_page);
  ASSERT_TRUE(fs::exists(blank_shot)) << r.err;
  const auto blank = test::slurp(blank_shot);
  ASSERT_TRUE(png_dimensions(blank));
  EXPECT_GT(png.size(), 4 * blank.size()) << "report " << png.size() << " bytes, blank page " << blank.size();
}

TEST_F(ReportInBrowser, TheDomHoldsTheChartsTheDiffAndEscapedCode) {
  const auto run = test::make_finished_run(dir_ / "runs");
  const auto page = write_report_html(run);
  const auto r = chromium({"--dump-dom"}, page);
  ASSERT_TRUE(r.started) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
  const auto& dom = r.out;
  // The browser parsed the inline SVG as SVG elements with their paths and markers...
  EXPECT_THAT(dom, HasSubstr("<svg class=\"chart\""));
  EXPECT_THAT(dom, HasSubstr("<path class=\"best\""));
  EXPECT_THAT(dom, HasSubstr("<circle class=\"point\""));
  // ...the diff lines as spans, and the kernel's "<" and "</pre>" as text, not markup.
  EXPECT_THAT(dom, HasSubstr("<span class=\"add\">+    tl.store(y_ptr + offs, x + x, mask=mask)</span>"));
  EXPECT_THAT(dom, HasSubstr("mask = offs &lt; n"));
  EXPECT_THAT(dom, HasSubstr("# starting kernel &lt;/pre&gt; &amp; friends"));
  EXPECT_THAT(dom, HasSubstr("mismatch at &lt;script&gt;alert(1)&lt;/script&gt;"));
  EXPECT_EQ(dom.find("<script"), std::string::npos);
}

TEST_F(ReportInBrowser, TheDomHoldsTheSearchTreeAndTheCandidateDetails) {
  const auto run = test::make_tree_run(dir_ / "runs");
  const auto page = write_report_html(run);
  const auto r = chromium({"--dump-dom"}, page);
  ASSERT_TRUE(r.started) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
  const auto& dom = r.out;
  // The tree as nested lists: r2_c1 is a list item inside the list under r1_c0.
  EXPECT_THAT(dom, HasSubstr("<ul class=\"tree\">"));
  EXPECT_THAT(dom, ::testing::ContainsRegex("href=\"#cand-r1_c0\">.*?</a><ul><li><a class=\"tnode failed\" "
                                            "href=\"#cand-r2_c0\">"));
  EXPECT_THAT(dom, HasSubstr("<a class=\"tnode verified on-path best\" href=\"#cand-r2_c1\">"));
  EXPECT_THAT(dom, HasSubstr("<a class=\"tnode duplicate\" href=\"#cand-r2_c2\">"));
  // One details element per program, closed; the files nested inside.
  for (const char* id : {"initial", "r1_c0", "r1_c1", "r1_c2", "r2_c0", "r2_c1", "r2_c2", "r2_c3"})
    EXPECT_THAT(dom, HasSubstr(std::string("<details class=\"cand\" id=\"cand-") + id + "\"><summary>")) << id;
  EXPECT_THAT(dom, HasSubstr("<details class=\"file\"><summary>1_optimize_reply.txt (115 B)</summary>"));
  // The hostile reply is text inside its <pre>: the parser made no script or img element of it.
  EXPECT_THAT(dom, HasSubstr("&lt;/pre&gt;&lt;script&gt;alert('reply')&lt;/script&gt;&lt;pre&gt;"));
  EXPECT_EQ(dom.find("<script"), std::string::npos);
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  // The charts: phases on the wall-clock chart, bars on the roofline chart.
  EXPECT_THAT(dom, HasSubstr("<rect class=\"phase phase-initial\""));
  EXPECT_THAT(dom, HasSubstr("<rect class=\"bar-sol\""));
  EXPECT_THAT(dom, HasSubstr("<meta charset=\"utf-8\">"));
  EXPECT_EQ(dom.find("http-equiv"), std::string::npos);
}

TEST_F(ReportInBrowser, ARunningRunRendersWithItsRefresh) {
  const auto page = write_report_html(test::make_running_run(dir_ / "runs"));
  const auto r = chromium({"--dump-dom"}, page);
  ASSERT_TRUE(r.started) << r.error;
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\n" << r.err;
  EXPECT_THAT(r.out, HasSubstr("<meta http-equiv=\"refresh\" content=\"30\">"));
  EXPECT_THAT(r.out, HasSubstr("<p class=\"status-running\">Running:"));
  EXPECT_THAT(r.out, HasSubstr("<a class=\"tnode pending\" href=\"#cand-r3_c0\">"));
}

} // namespace
} // namespace kagent::report
