#include "platform/report/line_diff.hpp"

#include <fstream>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/process/runner.hpp"
#include "tests/report/report_fixture.hpp"

namespace kagent::report {
namespace {

using ::testing::ElementsAre;

// Built with append, not "literal" + std::string: g++ 12 -O2 reports a false -Wrestrict on that.
std::string tagged(const char* prefix, long n) {
  std::string s(prefix);
  s.append(std::to_string(n));
  return s;
}

std::string numbered(int from, int to, int changed = -1) {
  std::string s;
  for (int i = from; i <= to; ++i) s.append(tagged(i == changed ? "changed " : "line ", i)).append("\n");
  return s;
}

TEST(LineDiff, EqualTextsHaveNoHunks) {
  EXPECT_EQ(unified_diff("a\nb\n", "a\nb\n", "old", "new"), "");
  EXPECT_TRUE(unified_hunks(line_diff({"a"}, {"a"})).empty());
}

TEST(LineDiff, SplitLinesIgnoresOnlyTheFinalNewline) {
  EXPECT_THAT(split_lines("a\n\nb\n"), ElementsAre("a", "", "b"));
  EXPECT_THAT(split_lines("a"), ElementsAre("a"));
  EXPECT_TRUE(split_lines("").empty());
}

TEST(LineDiff, OneChangedLineGivesOneHunkWithThreeLinesOfContext) {
  const auto d = unified_diff(numbered(1, 10), numbered(1, 10, 5), "initial", "best");
  EXPECT_EQ(d,
            "--- initial\n+++ best\n"
            "@@ -2,7 +2,7 @@\n line 2\n line 3\n line 4\n-line 5\n+changed 5\n line 6\n line 7\n line 8\n");
}

TEST(LineDiff, DistantChangesGetSeparateHunksAndNearOnesMerge) {
  std::string a = numbered(1, 30), b;
  for (int i = 1; i <= 30; ++i) b.append(tagged(i == 3 || i == 25 ? "x" : "line ", i)).append("\n");
  auto hunks = unified_hunks(line_diff(split_lines(a), split_lines(b)));
  ASSERT_EQ(hunks.size(), 2u);
  EXPECT_EQ(hunks[0].header(), "@@ -1,6 +1,6 @@");
  EXPECT_EQ(hunks[1].header(), "@@ -22,7 +22,7 @@");
  b.clear();
  for (int i = 1; i <= 30; ++i) b.append(tagged(i == 3 || i == 9 ? "x" : "line ", i)).append("\n");
  hunks = unified_hunks(line_diff(split_lines(a), split_lines(b)));
  ASSERT_EQ(hunks.size(), 1u);
  EXPECT_EQ(hunks[0].header(), "@@ -1,12 +1,12 @@");
}

TEST(LineDiff, InsertionsAtTheEndsAndIntoAnEmptyFile) {
  EXPECT_EQ(unified_diff("", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -0,0 +1,2 @@\n+a\n+b\n");
  EXPECT_EQ(unified_diff("a\nb\n", "", "o", "n"), "--- o\n+++ n\n@@ -1,2 +0,0 @@\n-a\n-b\n");
  EXPECT_EQ(unified_diff("b\n", "a\nb\n", "o", "n"), "--- o\n+++ n\n@@ -1 +1,2 @@\n+a\n b\n");
}

// Both sides rebuilt from the diff, and as few changed lines as GNU diff finds with --minimal.
class LineDiffAgainstGnu : public test::scratch_dir {};

TEST_F(LineDiffAgainstGnu, RandomEditsReproduceBothSidesWithMinimalChanges) {
  std::mt19937 rng(7);
  for (int round = 0; round < 25; ++round) {
    std::vector<std::string> a, b;
    const int n = 5 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) a.push_back(tagged("l", rng() % 6));
    b = a;
    for (int k = 0; k < 6; ++k) {
      const auto pos = rng() % (b.size() + 1);
      switch (rng() % 3) {
        case 0: b.insert(b.begin() + static_cast<long>(pos), tagged("n", rng() % 4)); break;
        case 1: if (pos < b.size()) b.erase(b.begin() + static_cast<long>(pos)); break;
        default: if (pos < b.size()) b[pos] = tagged("m", rng() % 4);
      }
    }
    const auto d = line_diff(a, b);
    std::vector<std::string> old_side, new_side;
    int changes = 0;
    for (const auto& l : d) {
      if (l.op != diff_op::add) old_side.push_back(l.text);
      if (l.op != diff_op::remove) new_side.push_back(l.text);
      changes += l.op != diff_op::keep;
    }
    EXPECT_EQ(old_side, a);
    EXPECT_EQ(new_side, b);

    auto write = [&](const std::filesystem::path& p, const std::vector<std::string>& lines) {
      std::ofstream out(p);
      for (const auto& l : lines) out << l << "\n";
    };
    write(dir_ / "a", a);
    write(dir_ / "b", b);
    process_spec spec;
    spec.argv = {"diff", "--minimal", "-U0", (dir_ / "a").string(), (dir_ / "b").string()};
    const auto r = run_process(spec);
    ASSERT_TRUE(r.started) << r.error;
    int gnu_changes = 0;
    for (const auto& l : split_lines(r.out))
      if ((l[0] == '+' && l.rfind("+++", 0) != 0) || (l[0] == '-' && l.rfind("---", 0) != 0)) ++gnu_changes;
    EXPECT_EQ(changes, gnu_changes) << "round " << round;
  }
}

TEST(LineDiff, PastTheCellLimitTheMiddleIsReplacedWhole) {
  const auto d = line_diff({"same", "a", "b", "c", "end"}, {"same", "b", "x", "end"}, 4);
  std::string ops;
  for (const auto& l : d) ops += l.op == diff_op::keep ? '=' : l.op == diff_op::remove ? '-' : '+';
  EXPECT_EQ(ops, "=---++=");
  const auto minimal = line_diff({"same", "a", "b", "c", "end"}, {"same", "b", "x", "end"});
  ops.clear();
  for (const auto& l : minimal) ops += l.op == diff_op::keep ? '=' : l.op == diff_op::remove ? '-' : '+';
  EXPECT_EQ(ops, "=-=-+=");
}

} // namespace
} // namespace kagent::report
