#include "platform/report/line_diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace kagent::report {

std::string diff_hunk::header() const {
  // diff -u writes a one-line range as its start alone.
  auto range = [](int start, int count) { return count == 1 ? std::to_string(start) : fmt::format("{},{}", start, count); };
  return fmt::format("@@ -{} +{} @@", range(old_start, old_count), range(new_start, new_count));
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      out.emplace_back(text.substr(pos));
      break;
    }
    out.emplace_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

std::vector<diff_line> line_diff(const std::vector<std::string>& a, const std::vector<std::string>& b,
                                 std::size_t max_cells) {
  std::size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  std::size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) ++tail;
  const std::size_t n = a.size() - head - tail, m = b.size() - head - tail;

  std::vector<diff_line> out;
  out.reserve(a.size() + b.size());
  int ia = 0, ib = 0;  // lines of a and b emitted so far
  auto keep = [&](std::size_t i) { out.push_back({diff_op::keep, a[i], ++ia, ++ib}); };
  auto remove = [&](std::size_t i) { out.push_back({diff_op::remove, a[i], ++ia, 0}); };
  auto add = [&](std::size_t j) { out.push_back({diff_op::add, b[j], 0, ++ib}); };

  for (std::size_t i = 0; i < head; ++i) keep(i);
  if (n > 0 && m > 0 && (n + 1) * (m + 1) <= max_cells) {
    // L[i][j]: LCS length of a[head+i..head+n) and b[head+j..head+m).
    const std::size_t w = m + 1;
    std::vector<std::uint32_t> L((n + 1) * w, 0);
    for (std::size_t i = n; i-- > 0;)
      for (std::size_t j = m; j-- > 0;)
        L[i * w + j] = a[head + i] == b[head + j] ? L[(i + 1) * w + j + 1] + 1
                                                  : std::max(L[(i + 1) * w + j], L[i * w + j + 1]);
    std::size_t i = 0, j = 0;
    while (i < n && j < m) {
      if (a[head + i] == b[head + j]) {
        keep(head + i);
        ++i, ++j;
      } else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) {
        remove(head + i++);
      } else {
        add(head + j++);
      }
    }
    while (i < n) remove(head + i++);
    while (j < m) add(head + j++);
  } else {
    for (std::size_t i = 0; i < n; ++i) remove(head + i);
    for (std::size_t j = 0; j < m; ++j) add(head + j);
  }
  for (std::size_t k = 0; k < tail; ++k) keep(a.size() - tail + k);
  return out;
}

std::vector<diff_hunk> unified_hunks(const std::vector<diff_line>& d, int context) {
  std::vector<diff_hunk> hunks;
  const int size = static_cast<int>(d.size());
  context = std::max(0, context);
  int k = 0;
  while (k < size) {
    while (k < size && d[k].op == diff_op::keep) ++k;
    if (k == size) break;
    // A hunk runs from `context` lines before the first change to `context` lines after the last
    // change that is separated from the next one by at most 2*context unchanged lines.
    const int begin = std::max(0, k - context);
    int end = k;  // one past the last change so far
    int scan = k;
    while (scan < size) {
      if (d[scan].op != diff_op::keep) {
        end = scan + 1;
        ++scan;
        continue;
      }
      int run = scan;
      while (run < size && d[run].op == diff_op::keep) ++run;
      if (run == size || run - scan > 2 * context) break;
      scan = run;
    }
    const int stop = std::min(size, end + context);
    diff_hunk h;
    for (int x = begin; x < stop; ++x) {
      const auto& l = d[x];
      if (l.op != diff_op::add) ++h.old_count;
      if (l.op != diff_op::remove) ++h.new_count;
      h.lines.push_back(l);
    }
    // Start lines: the first line of each side within the hunk; for an empty side, the line
    // before it (diff's convention, 0 at the top of the file).
    auto first_old = std::find_if(h.lines.begin(), h.lines.end(), [](const diff_line& l) { return l.old_no > 0; });
    auto first_new = std::find_if(h.lines.begin(), h.lines.end(), [](const diff_line& l) { return l.new_no > 0; });
    auto before = [&](bool old_side) {
      int last = 0;
      for (int x = 0; x < begin; ++x) last = std::max(last, old_side ? d[x].old_no : d[x].new_no);
      return last;
    };
    h.old_start = h.old_count > 0 && first_old != h.lines.end() ? first_old->old_no : before(true);
    h.new_start = h.new_count > 0 && first_new != h.lines.end() ? first_new->new_no : before(false);
    hunks.push_back(std::move(h));
    k = stop;
  }
  return hunks;
}

std::string unified_diff(std::string_view old_text, std::string_view new_text, std::string_view old_label,
                         std::string_view new_label, int context) {
  const auto hunks = unified_hunks(line_diff(split_lines(old_text), split_lines(new_text)), context);
  if (hunks.empty()) return "";
  std::string out = fmt::format("--- {}\n+++ {}\n", old_label, new_label);
  for (const auto& h : hunks) {
    out += h.header() + "\n";
    for (const auto& l : h.lines)
      out += (l.op == diff_op::keep ? ' ' : l.op == diff_op::remove ? '-' : '+') + l.text + "\n";
  }
  return out;
}

} // namespace kagent::report
