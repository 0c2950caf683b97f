#include "platform/common/suggest.hpp"

#include <algorithm>
#include <cctype>

namespace kagent {

namespace {
std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment distance: two rows back are needed for the transposition.
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    prev2.swap(prev);
    prev.swap(cur);
  }
  return prev[m];
}

std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  if (w.empty()) return std::nullopt;
  const std::size_t limit = std::min<std::size_t>(w.size() <= 4 ? 1 : w.size() <= 8 ? 2 : 3, std::max<std::size_t>(1, w.size() / 2));
  std::optional<std::string> best;
  std::size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    const std::string lc = lower(c);
    if (lc == w) continue;
    const std::size_t d = edit_distance(w, lc);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates, const std::string& quote) {
  auto n = nearest(word, candidates);
  return n ? " (did you mean " + quote + *n + quote + "?)" : "";
}

}  // namespace kagent
