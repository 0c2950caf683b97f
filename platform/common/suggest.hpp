#pragma once
// "Did you mean ...?" for a mistyped flag, subcommand, strategy name or config key.
#include <optional>
#include <string>
#include <vector>

namespace kagent {

/// Levenshtein distance (insert, delete, substitute; an adjacent swap counts as one).
std::size_t edit_distance(const std::string& a, const std::string& b);

/// The candidate nearest to `word`, if it is close enough to be a typo: at most 1 edit for words of
/// up to 4 characters, 2 up to 8, else 3 (and never more than half the word), the first on a tie.
/// Case is ignored; a candidate equal to `word` is not a suggestion.
std::optional<std::string> nearest(const std::string& word, const std::vector<std::string>& candidates);

/// " (did you mean 'X'?)" (with `quote` around X) or "" when nothing is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         const std::string& quote = "'");

}  // namespace kagent
