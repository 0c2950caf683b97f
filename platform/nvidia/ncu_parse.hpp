#pragma once
// Parsing of `ncu --csv --page raw` output (SPEC §5.2 with §14 B.85, B.86): comment lines
// (`==PROF==`, `==WARNING==`, `==ERROR==`) skipped, header, units row dropped, thousands separators
// and '%' stripped, "n/a" absent. The kernel is chosen by name and its last dispatch taken — never
// "the last row of the table", which on real output is a PyTorch at:: kernel.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "platform/profile_core/roofline.hpp"

namespace kagent {

struct ncu_row {
  std::optional<long long> id;      ///< the "ID" column: launch order
  std::string kernel_name;
  std::string grid_size;            ///< the "Grid Size" column as printed: "(16384, 1, 1)"
  /// With --nvtx: the push/pop ranges open at the launch, as printed ("" without --nvtx):
  /// `"<default domain>:kagent_measured:none:..."  "<default domain>:kagent_kernel:k0:none:..."`
  std::string nvtx;
  metric_map metrics;               ///< metric columns whose value parsed as a number
};

struct ncu_table {
  std::vector<std::string> columns;
  std::map<std::string, std::string> units;  ///< from the units row, when present
  std::vector<ncu_row> rows;
};

/// Throws run_error "ncu CSV has no header (no 'Kernel Name' column)" when no header is found.
ncu_table parse_ncu_csv(const std::string& text);

struct ncu_selection {
  std::string kernel_name;
  std::optional<long long> id;   ///< ID of the chosen launch
  int dispatch_count = 0;        ///< launches of that kernel in the table
  bool chosen_by_name = false;   ///< false: busiest non-at:: kernel
  /// The requested metrics (ncu_metric_list()) of the chosen launch, flat, rounded to 3 places: what
  /// the roofline and prompts use. Real raw pages add ~100 launch__/nvlink__/numa__ columns.
  metric_map metrics;
  metric_map all_metrics;        ///< every numeric metric column of that launch
};

/// With `kernel`: rows whose name equals it (or is it followed by '(' — a demangled signature);
/// the greatest ID wins. Without: the busiest kernel whose name lacks "at::" (total
/// gpu__time_duration.sum, else sm__cycles_active.avg), then its last dispatch. Throws run_error
/// "ncu CSV has no kernel rows" / "ncu CSV has no dispatch of kernel '<name>'" / "ncu CSV lists no
/// kernel outside at::".
ncu_selection select_ncu_kernel(const ncu_table& t, const std::optional<std::string>& kernel = std::nullopt);

/// When `output` shows the counter-permission error (ERR_NVGPUCTRPERM, "permission", "profiling
/// permissions", "requires root", "access denied"), the message telling the user how to fix it.
std::optional<std::string> ncu_permission_error(const std::string& output, bool used_sudo);

/// The error for a failed ncu run: the permission message when it applies, else
/// "ncu failed with return code N: <first 500 characters of output>".
std::string ncu_failure_message(int exit_code, const std::string& output, bool used_sudo);

/// Reads the log file: missing -> "ncu completed without a CSV (<path>)"; under 100 bytes ->
/// "ncu CSV is likely empty (<path>)"; "No kernels were profiled" -> a message naming the filter.
ncu_table load_ncu_csv(const std::string& path, const std::string& kernel_filter = "");

/// The kernel harness/batch_marker.py launches before each kernel of a profile batch.
inline constexpr const char* batch_marker_kernel = "kagent_batch_marker";

/// The rows of a profile batch (profile_wrapper.py --batch), told apart by kernel: in launch order
/// (ID), the rows after the marker whose grid is (i + 1, 1, 1), up to the next marker, are kernel i's
/// (markers themselves dropped). Returns `count` tables with the batch's columns and units; a kernel
/// whose marker never ran (the batch died before it) or whose marker is followed by no row gets an
/// empty table. Rows before the first marker (the inputs' creation) belong to no kernel.
std::vector<ncu_table> split_ncu_batch(const ncu_table& t, size_t count);

/// The nested NVTX range harness/profile_wrapper.py opens around each kernel's measured call in a
/// batch: kagent_kernel:<ID> (inside kagent_measured).
inline constexpr const char* nvtx_kernel_range_prefix = "kagent_kernel:";

/// The ID of the kagent_kernel:<ID> range in a row's NVTX cell; nullopt when the launch was in none.
std::optional<std::string> nvtx_kernel_range(const std::string& nvtx);

/// The rows of a standby profile batch (profile_wrapper.py --standby, ncu filtered to the
/// kagent_measured range): kernel i's rows are the launches inside its range kagent_kernel:ids[i], in
/// launch order. A kernel with no launch in its range (it failed, or the batch died before it) gets
/// an empty table; rows in no known range belong to no kernel.
std::vector<ncu_table> split_ncu_by_range(const ncu_table& t, const std::vector<std::string>& ids);

/// `--kernel-name` for a batch: the marker and each distinct name, exactly
/// (`regex:^(kagent_batch_marker|a|b)$`, regex metacharacters escaped); "" when a name is unknown
/// (then every launch is profiled and each kernel's rows are chosen by the busiest-kernel rule).
std::string ncu_batch_filter(const std::vector<std::string>& kernel_names);

void to_json(nlohmann::json& j, const ncu_selection& s);

} // namespace kagent
