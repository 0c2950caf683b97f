#include "platform/nvidia/ncu_parse.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <string_view>

#include "platform/common/errors.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/common/files.hpp"

namespace kagent {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_comment_line(const std::string& line) {
  auto b = line.find_first_not_of(" \t");
  return b != std::string::npos && line[b] == '=';
}

// A units row sits right under the header: no launch ID and no kernel name, and cells like "%",
// "byte", "nsecond", "inst", "cycle", "block", "register/thread".
bool looks_like_units_row(const std::vector<std::string>& row, int id_col, int name_col) {
  auto cell = [&](int c) { return c >= 0 && static_cast<size_t>(c) < row.size() ? row[static_cast<size_t>(c)] : std::string{}; };
  if (!cell(id_col).empty() && parse_number(cell(id_col))) return false;
  if (!cell(name_col).empty()) return false;
  return true;
}

} // namespace

ncu_table parse_ncu_csv(const std::string& text) {
  std::string csv;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!is_comment_line(line)) csv += line + "\n";
  auto records = parse_csv_records(csv);
  size_t h = 0;
  int name_col = -1;
  for (; h < records.size(); ++h) {
    auto it = std::find(records[h].begin(), records[h].end(), "Kernel Name");
    if (it != records[h].end()) {
      name_col = static_cast<int>(it - records[h].begin());
      break;
    }
  }
  if (name_col < 0) throw run_error("ncu CSV has no header (no 'Kernel Name' column)");
  ncu_table t;
  t.columns = records[h];
  int id_col = -1;
  if (auto it = std::find(t.columns.begin(), t.columns.end(), "ID"); it != t.columns.end())
    id_col = static_cast<int>(it - t.columns.begin());
  int grid_col = -1;
  if (auto it = std::find(t.columns.begin(), t.columns.end(), "Grid Size"); it != t.columns.end())
    grid_col = static_cast<int>(it - t.columns.begin());
  // With --nvtx: the push/pop ranges open at the launch, one quoted "<domain>:<name>:..." each.
  int nvtx_col = -1;
  for (size_t c = 0; c < t.columns.size(); ++c)
    if (t.columns[c].rfind("thread Domain:Push/Pop_Range", 0) == 0) nvtx_col = static_cast<int>(c);
  size_t r = h + 1;
  if (r < records.size() && looks_like_units_row(records[r], id_col, name_col)) {
    for (size_t c = 0; c < t.columns.size() && c < records[r].size(); ++c)
      if (!records[r][c].empty()) t.units[t.columns[c]] = records[r][c];
    ++r;
  }
  for (; r < records.size(); ++r) {
    const auto& rec = records[r];
    if (rec == t.columns) continue;  // a second process repeats the header
    ncu_row row;
    row.kernel_name = static_cast<size_t>(name_col) < rec.size() ? rec[static_cast<size_t>(name_col)] : "";
    if (row.kernel_name.empty()) continue;
    if (grid_col >= 0 && static_cast<size_t>(grid_col) < rec.size()) row.grid_size = rec[static_cast<size_t>(grid_col)];
    if (nvtx_col >= 0 && static_cast<size_t>(nvtx_col) < rec.size()) row.nvtx = rec[static_cast<size_t>(nvtx_col)];
    if (id_col >= 0 && static_cast<size_t>(id_col) < rec.size())
      if (auto v = parse_number(rec[static_cast<size_t>(id_col)])) row.id = static_cast<long long>(*v);
    for (size_t c = 0; c < t.columns.size() && c < rec.size(); ++c) {
      const auto& col = t.columns[c];
      // Metric columns are named unit__counter...; the fixed columns (ID, Block Size, ...) are not.
      if (col.find("__") == std::string::npos || col.rfind("device__attribute_", 0) == 0) continue;
      if (auto v = parse_number(rec[c])) row.metrics[col] = *v;
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

namespace {

/// The x extent of a "Grid Size" cell ("(3, 1, 1)" -> 3); nullopt when it does not read as one.
std::optional<long long> grid_x(const std::string& cell) {
  const auto b = cell.find_first_of("0123456789");
  if (b == std::string::npos) return std::nullopt;
  const auto e = cell.find_first_not_of("0123456789", b);
  const auto digits = cell.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (digits.size() > 12) return std::nullopt;
  return std::stoll(digits);
}

} // namespace

namespace {

/// `count` empty tables with `t`'s columns and units: one per kernel of a batch.
std::vector<ncu_table> empty_parts(const ncu_table& t, size_t count) {
  std::vector<ncu_table> out(count);
  for (auto& k : out) {
    k.columns = t.columns;
    k.units = t.units;
  }
  return out;
}

/// `t`'s rows in launch order (ID).
std::vector<const ncu_row*> in_launch_order(const ncu_table& t) {
  std::vector<const ncu_row*> rows;
  for (const auto& r : t.rows) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const ncu_row* a, const ncu_row* b) {
    return a->id.value_or(0) < b->id.value_or(0);
  });
  return rows;
}

} // namespace

std::vector<ncu_table> split_ncu_batch(const ncu_table& t, size_t count) {
  auto out = empty_parts(t, count);
  std::optional<size_t> current;
  for (const auto* r : in_launch_order(t)) {
    if (r->kernel_name == batch_marker_kernel) {
      auto x = grid_x(r->grid_size);
      current = x && *x >= 1 && static_cast<size_t>(*x) <= count ? std::optional<size_t>(static_cast<size_t>(*x - 1))
                                                                 : std::nullopt;
      continue;
    }
    if (current) out[*current].rows.push_back(*r);
  }
  return out;
}

std::optional<std::string> nvtx_kernel_range(const std::string& nvtx) {
  static const std::string tag = std::string(":") + nvtx_kernel_range_prefix;
  auto at = nvtx.find(tag);
  if (at == std::string::npos) return std::nullopt;
  at += tag.size();
  auto end = nvtx.find_first_of(":\" ", at);
  std::string id = nvtx.substr(at, end == std::string::npos ? std::string::npos : end - at);
  if (id.empty()) return std::nullopt;
  return id;
}

std::vector<ncu_table> split_ncu_by_range(const ncu_table& t, const std::vector<std::string>& ids) {
  auto out = empty_parts(t, ids.size());
  for (const auto* r : in_launch_order(t)) {
    auto id = nvtx_kernel_range(r->nvtx);
    if (!id) continue;
    auto it = std::find(ids.begin(), ids.end(), *id);
    if (it != ids.end()) out[static_cast<size_t>(it - ids.begin())].rows.push_back(*r);
  }
  return out;
}

std::string ncu_batch_filter(const std::vector<std::string>& kernel_names) {
  std::vector<std::string> names;
  for (const auto& n : kernel_names) {
    if (n.empty()) return "";
    std::string escaped;
    for (char c : n) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) escaped += '\\';
      escaped += c;
    }
    if (std::find(names.begin(), names.end(), escaped) == names.end()) names.push_back(escaped);
  }
  if (names.empty()) return "";
  std::string f = std::string("regex:^(") + batch_marker_kernel;
  for (const auto& n : names) f += "|" + n;
  return f + ")$";
}

ncu_selection select_ncu_kernel(const ncu_table& t, const std::optional<std::string>& kernel) {
  if (t.rows.empty()) throw run_error("ncu CSV has no kernel rows");
  ncu_selection s;
  auto matches = [](const std::string& name, const std::string& want) {
    return name == want || (name.size() > want.size() && name.compare(0, want.size(), want) == 0 &&
                            name[want.size()] == '(');
  };
  std::string want;
  if (kernel && !kernel->empty()) {
    want = *kernel;
    s.chosen_by_name = true;
  } else {
    bool have_time = std::any_of(t.rows.begin(), t.rows.end(),
                                 [](const ncu_row& r) { return r.metrics.count("gpu__time_duration.sum") > 0; });
    const char* busy_key = have_time ? "gpu__time_duration.sum" : "sm__cycles_active.avg";
    std::vector<std::pair<std::string, double>> totals;
    for (const auto& r : t.rows) {
      auto it = r.metrics.find(busy_key);
      totals.emplace_back(r.kernel_name, it == r.metrics.end() ? 0.0 : it->second);
    }
    auto best = busiest_kernel(totals);
    if (!best) throw run_error("ncu CSV lists no kernel outside at::");
    want = *best;
  }
  const ncu_row* chosen = nullptr;
  for (const auto& r : t.rows) {
    if (s.chosen_by_name ? !matches(r.kernel_name, want) : r.kernel_name != want) continue;
    ++s.dispatch_count;
    // Greatest launch ID = latest launch; rows without an ID fall back to file order.
    if (!chosen || !r.id || !chosen->id || *r.id >= *chosen->id) chosen = &r;
  }
  if (!chosen) throw run_error("ncu CSV has no dispatch of kernel '" + want + "'");
  s.kernel_name = chosen->kernel_name;
  s.id = chosen->id;
  const auto& wanted = ncu_metric_list();
  for (const auto& [k, v] : chosen->metrics) {
    s.all_metrics[k] = round_to(v, 3);
    if (std::find(wanted.begin(), wanted.end(), k) != wanted.end()) s.metrics[k] = round_to(v, 3);
  }
  return s;
}

std::optional<std::string> ncu_permission_error(const std::string& output, bool used_sudo) {
  const std::string l = lower(output);
  bool perm = false;
  for (const char* needle : {"err_nvgpuctrperm", "permission", "profiling permissions", "requires root", "access denied"})
    if (l.find(needle) != std::string::npos) perm = true;
  if (!perm) return std::nullopt;
  if (used_sudo)
    return std::string("ncu has no permission to access NVIDIA GPU performance counters (ERR_NVGPUCTRPERM) even "
                       "under sudo: allow profiling for all users with 'options nvidia "
                       "NVreg_RestrictProfilingToAdminUsers=0' in /etc/modprobe.d/ and reload the driver");
  return std::string("ncu has no permission to access NVIDIA GPU performance counters (ERR_NVGPUCTRPERM): run "
                     "ncu as root by setting KAGENT_NCU_USE_SUDO=1 (passwordless sudo needed), or allow "
                     "profiling for all users with 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in "
                     "/etc/modprobe.d/ and reload the driver (https://developer.nvidia.com/ERR_NVGPUCTRPERM)");
}

std::string ncu_failure_message(int exit_code, const std::string& output, bool used_sudo) {
  if (auto p = ncu_permission_error(output, used_sudo)) return *p;
  return "ncu failed with return code " + std::to_string(exit_code) + ": " + output.substr(0, 500);
}

ncu_table load_ncu_csv(const std::string& path, const std::string& kernel_filter) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw run_error("ncu completed without a CSV (" + path + ")");
  auto text = read_file(path);
  if (text.find("No kernels were profiled") != std::string::npos)
    throw run_error(kernel_filter.empty()
                        ? "ncu profiled no kernel (" + path + ")"
                        : "ncu profiled no kernel: the filter --kernel-name " + kernel_filter +
                              " matched no launch (" + path + ")");
  if (text.size() < 100) throw run_error("ncu CSV is likely empty (" + path + ")");
  return parse_ncu_csv(text);
}

void to_json(nlohmann::json& j, const ncu_selection& s) {
  j = nlohmann::json{{"kernel_name", s.kernel_name},
                     {"id", s.id ? nlohmann::json(*s.id) : nlohmann::json(nullptr)},
                     {"dispatch_count", s.dispatch_count},
                     {"chosen_by_name", s.chosen_by_name},
                     {"metrics", s.metrics},
                     {"all_metrics", s.all_metrics}};
}

} // namespace kagent
