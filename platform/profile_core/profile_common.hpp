#pragma once
// Pieces both profilers share (a vendor-neutral layer below platform/rocm and platform/nvidia): a CSV table read with libcsv and looked up by column *name* (every
// profiler format has renamed, added and reordered columns between releases), tolerant number
// parsing, and the one kernel-selection rule used everywhere (SPEC §14 B.85).
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kagent {

/// A parsed CSV file: the first record is the header, the rest are rows (possibly ragged).
struct csv_table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;

  /// Index of the first column whose name equals one of `names` (exact first, then ignoring case);
  /// -1 when none is present.
  int column(std::initializer_list<std::string_view> names) const;
  /// The cell, or "" when the row is shorter than the header or `col` is -1.
  const std::string& cell(const std::vector<std::string>& row, int col) const;
};

/// Every record of `text` as fields (RFC 4180 quoting: commas, quotes and newlines inside quotes).
/// Blank lines are skipped. Throws run_error when libcsv reports an error.
std::vector<std::vector<std::string>> parse_csv_records(const std::string& text);

/// The records of `text` with the first one as the header.
csv_table parse_csv_table(const std::string& text);

/// A number as profilers print it: surrounding blanks ignored, thousands separators ("213,152") and
/// a trailing '%' stripped. Empty, "n/a", "N/A", "nan", "-" and non-numbers give nullopt — a value
/// that was not measured is absent, never 0.
std::optional<double> parse_number(std::string_view text);


/// PyTorch's own kernels (dtype conversions, reductions, fills) carry "at::" in their names; they are
/// never the kernel being optimized.
bool is_pytorch_kernel(std::string_view name);

/// is_pytorch_kernel as a profiler's own name filter: an ECMAScript regular expression (a negative
/// lookahead) that matches exactly the names without "at::". ncu takes it as `--kernel-name regex:<it>`.
inline constexpr const char* not_pytorch_kernel_regex = "^(?!.*at::)";

/// The single kernel-selection rule (SPEC §5.4, §14 A.14, B.85): among (name, total time) entries
/// whose name lacks "at::", the largest total; a tie keeps the later entry. Entries with the same
/// name are summed first. nullopt when every entry is a PyTorch kernel (or there is none).
std::optional<std::string> busiest_kernel(const std::vector<std::pair<std::string, double>>& totals);

/// Letters, digits, '-', '_' and '.' are kept; anything else becomes '_' (ids end up in file names).
std::string sanitize_kernel_id(const std::string& id);

/// The default profile budget when the config leaves profile_budget_s at 0: half the candidate's
/// timeout, so that verification and benchmarking keep the other half.
double default_profile_budget_s(double candidate_timeout_s);

} // namespace kagent
