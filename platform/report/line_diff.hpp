#pragma once
// A line diff (longest common subsequence) and its unified form, for showing how the best kernel
// differs from the starting one. Kernel files are a few hundred lines: after the common head and
// tail are trimmed the quadratic table is small. Past max_cells the changed middle is shown as
// removed then added, which is still a correct (if not minimal) diff.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kagent::report {

enum class diff_op { keep, remove, add };

struct diff_line {
  diff_op op = diff_op::keep;
  std::string text;
  int old_no = 0;  ///< 1-based line in the old text; 0 for an added line
  int new_no = 0;  ///< 1-based line in the new text; 0 for a removed line
};

struct diff_hunk {
  int old_start = 0, old_count = 0;  ///< as in "@@ -old_start,old_count +new_start,new_count @@"
  int new_start = 0, new_count = 0;
  std::vector<diff_line> lines;
  std::string header() const;        ///< "@@ -1,4 +1,5 @@" (a count of 1 is left out, as diff -u does)
};

/// `text` split at '\n'; a final newline does not add an empty line.
std::vector<std::string> split_lines(std::string_view text);

/// Every line of both texts in order, each kept, removed or added; a minimal diff while the
/// changed middle fits `max_cells` table cells.
std::vector<diff_line> line_diff(const std::vector<std::string>& old_lines, const std::vector<std::string>& new_lines,
                                 std::size_t max_cells = 4'000'000);

/// The changes grouped into hunks with `context` unchanged lines around each change.
std::vector<diff_hunk> unified_hunks(const std::vector<diff_line>& diff, int context = 3);

/// A unified diff ("--- old_label", "+++ new_label", hunks); "" when the texts are equal.
std::string unified_diff(std::string_view old_text, std::string_view new_text, std::string_view old_label,
                         std::string_view new_label, int context = 3);

} // namespace kagent::report
