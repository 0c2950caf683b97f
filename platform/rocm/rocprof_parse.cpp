#include "platform/rocm/rocprof_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "platform/common/errors.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/common/text.hpp"
#include "platform/common/files.hpp"

namespace kagent {

namespace {

const char* const no_usable_csv = "rocprof completed without a usable CSV";
const char* const no_counter_rows = "rocprof PMC CSV has no counter rows";

std::optional<long long> parse_int(const std::string& text) {
  std::string s = trim(text);
  if (s.empty()) return std::nullopt;
  long long v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc{} && ptr == s.data() + s.size()) return v;
  if (auto d = parse_number(s)) return static_cast<long long>(*d);
  return std::nullopt;
}

std::string dims(const csv_table& t, const std::vector<std::string>& row, const char* base) {
  std::string b = base;
  int x = t.column({b + "_X"}), y = t.column({b + "_Y"}), z = t.column({b + "_Z"});
  if (x >= 0 && y >= 0 && z >= 0) return t.cell(row, x) + "x" + t.cell(row, y) + "x" + t.cell(row, z);
  int one = t.column({b});
  return one >= 0 ? t.cell(row, one) : "";
}

int kernel_column(const csv_table& t) { return t.column({"Kernel_Name", "KernelName", "Kernel-Name", "kernel_name"}); }
int dispatch_column(const csv_table& t) { return t.column({"Dispatch_Id", "Dispatch_ID", "DispatchId", "Index"}); }

// Columns of a wide PMC file that describe the dispatch rather than count anything.
bool is_descriptive_column(const std::string& name) {
  static const std::set<std::string> known{
      "guid", "kind", "index", "correlation_id", "dispatch_id", "agent_id", "queue_id", "process_id", "thread_id",
      "stream_id", "grid_size", "grid_size_x", "grid_size_y", "grid_size_z", "kernel_id", "kernel_name",
      "kernelname", "workgroup_size", "workgroup_size_x", "workgroup_size_y", "workgroup_size_z", "lds_block_size",
      "group_segment_size", "private_segment_size", "scratch_size", "vgpr_count", "arch_vgpr_count",
      "accum_vgpr_count", "sgpr_count", "start_timestamp", "end_timestamp", "counter_name", "counter_value",
      "gpu-id", "gpu_id", "queue-id", "queue-index", "pid", "tid", "grd", "wgr", "lds", "scr", "arch_vgpr",
      "accum_vgpr", "sgpr", "wave_size", "sig", "obj", "dispatchns", "beginns", "endns", "completens"};
  std::string l;
  for (char c : name) l.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return known.count(l) > 0;
}

} // namespace

std::vector<kernel_stat> parse_kernel_stats(const std::string& csv_text) {
  auto t = parse_csv_table(csv_text);
  if (t.header.empty()) throw run_error(no_usable_csv);
  int avg = t.column({"AverageNs"});
  // A Duration(ns) column alone is not a stats file of rocprofv3 (SPEC §14 A.9).
  if (avg < 0) throw run_error("rocprof stats CSV has no AverageNs");
  int name = t.column({"Name", "Kernel_Name", "KernelName"});
  int total = t.column({"TotalDurationNs"});
  int calls = t.column({"Calls"});
  if (name < 0) throw run_error("rocprof stats CSV has no Name column");
  std::vector<kernel_stat> out;
  for (const auto& row : t.rows) {
    kernel_stat s;
    s.name = trim(t.cell(row, name));
    if (s.name.empty()) continue;
    s.average_ns = parse_number(t.cell(row, avg)).value_or(0);
    s.calls = parse_number(t.cell(row, calls)).value_or(0);
    s.total_ns = total >= 0 ? parse_number(t.cell(row, total)).value_or(0) : s.average_ns * s.calls;
    out.push_back(std::move(s));
  }
  if (out.empty()) throw run_error(no_usable_csv);
  return out;
}

std::string choose_profiled_kernel(const std::vector<kernel_stat>& stats) {
  std::vector<std::pair<std::string, double>> totals;
  for (const auto& s : stats) totals.emplace_back(s.name, s.total_ns);
  auto best = busiest_kernel(totals);
  if (!best) throw run_error("rocprof stats CSV lists no kernel outside at:: (nothing to profile)");
  return *best;
}

std::vector<kernel_dispatch> parse_kernel_trace(const std::string& csv_text) {
  auto t = parse_csv_table(csv_text);
  if (t.header.empty()) throw run_error(no_usable_csv);
  int kind = t.column({"Kind"});
  int name = kernel_column(t);
  int start = t.column({"Start_Timestamp", "BeginNs"});
  int end = t.column({"End_Timestamp", "EndNs"});
  if (name < 0 || start < 0 || end < 0)
    throw run_error("rocprof kernel trace lacks Kernel_Name, Start_Timestamp or End_Timestamp");
  int disp = dispatch_column(t);
  int agent = t.column({"Agent_Id", "gpu-id"});
  int lds = t.column({"LDS_Block_Size", "Group_Segment_Size", "lds"});
  int scratch = t.column({"Scratch_Size", "Private_Segment_Size", "scr"});
  int vgpr = t.column({"VGPR_Count", "Arch_VGPR_Count", "arch_vgpr"});
  int sgpr = t.column({"SGPR_Count", "sgpr"});
  std::vector<kernel_dispatch> out;
  for (const auto& row : t.rows) {
    if (kind >= 0) {
      auto k = trim(t.cell(row, kind));
      if (!k.empty() && k != "KERNEL_DISPATCH") continue;
    }
    kernel_dispatch d;
    d.kernel_name = trim(t.cell(row, name));
    if (d.kernel_name.empty()) continue;
    auto s = parse_int(t.cell(row, start));
    auto e = parse_int(t.cell(row, end));
    if (!s || !e) continue;
    d.start_ns = *s;
    d.end_ns = *e;
    if (disp >= 0) d.dispatch_id = parse_int(t.cell(row, disp));
    d.agent = trim(t.cell(row, agent));
    if (lds >= 0) d.lds_bytes = parse_number(t.cell(row, lds));
    if (scratch >= 0) d.scratch_bytes = parse_number(t.cell(row, scratch));
    if (vgpr >= 0) d.vgpr_count = parse_number(t.cell(row, vgpr));
    if (sgpr >= 0) d.sgpr_count = parse_number(t.cell(row, sgpr));
    d.workgroup_size = dims(t, row, "Workgroup_Size");
    d.grid_size = dims(t, row, "Grid_Size");
    out.push_back(std::move(d));
  }
  return out;
}

kernel_dispatch last_dispatch_of(const std::vector<kernel_dispatch>& trace, const std::string& kernel) {
  const kernel_dispatch* best = nullptr;
  for (const auto& d : trace) {
    if (d.kernel_name != kernel) continue;
    // The greatest Dispatch_Id is the latest launch; rows without one fall back to file order.
    if (!best || !d.dispatch_id || !best->dispatch_id || *d.dispatch_id >= *best->dispatch_id) best = &d;
  }
  if (!best) throw run_error("rocprof kernel trace has no dispatch of kernel '" + kernel + "'");
  return *best;
}

pmc_counters parse_counter_collection(const std::string& csv_text, const std::string& kernel) {
  auto t = parse_csv_table(csv_text);
  if (t.header.empty() || t.rows.empty()) throw run_error(no_counter_rows);
  pmc_counters out;
  int kcol = kernel_column(t);
  int dcol = dispatch_column(t);
  out.had_kernel_column = kcol >= 0;
  int cname = t.column({"Counter_Name"});
  int cval = t.column({"Counter_Value"});
  out.long_format = cname >= 0 && cval >= 0;

  // Per counter: the dispatch its value comes from, and the value (summed within one dispatch,
  // in case a release prints one row per instance).
  std::map<std::string, std::pair<long long, double>> best;
  bool any_kernel_row = false;
  auto take = [&](const std::string& counter, long long dispatch, double v) {
    if (!out.had_kernel_column) {
      best[counter].second += v;  // no kernel column: every value adds (SPEC §5.4)
      return;
    }
    auto it = best.find(counter);
    if (it == best.end() || dispatch > it->second.first)
      best[counter] = {dispatch, v};
    else if (dispatch == it->second.first)
      it->second.second += v;
  };

  std::vector<int> wide_cols;
  if (!out.long_format)
    for (size_t c = 0; c < t.header.size(); ++c)
      if (!t.header[c].empty() && !is_descriptive_column(t.header[c])) wide_cols.push_back(static_cast<int>(c));

  long long row_no = 0;
  for (const auto& row : t.rows) {
    ++row_no;
    if (out.had_kernel_column) {
      auto k = trim(t.cell(row, kcol));
      if (is_pytorch_kernel(k) || k != kernel) continue;
      any_kernel_row = true;
    }
    long long dispatch = row_no;
    if (dcol >= 0)
      if (auto d = parse_int(t.cell(row, dcol))) dispatch = *d;
    if (out.long_format) {
      auto name = trim(t.cell(row, cname));
      auto v = parse_number(t.cell(row, cval));
      if (!name.empty() && v) take(name, dispatch, *v);
    } else {
      for (int c : wide_cols)
        if (auto v = parse_number(t.cell(row, c))) take(t.header[static_cast<size_t>(c)], dispatch, *v);
    }
  }
  if (best.empty()) {
    if (out.had_kernel_column && !any_kernel_row)
      throw run_error(std::string(no_counter_rows) + " for kernel '" + kernel + "'");
    throw run_error(no_counter_rows);
  }
  for (const auto& [name, dv] : best) {
    out.values[name] = dv.second;
    if (out.had_kernel_column && dcol >= 0) out.dispatch_id = std::max(out.dispatch_id.value_or(dv.first), dv.first);
  }
  return out;
}

metric_map rocm_metrics_from_counters(const std::map<std::string, double>& raw, std::optional<double> duration_ms) {
  static const std::map<std::string, std::string> names{
      {"TCC_HIT_sum", "tcc_hit"},           {"TCC_MISS_sum", "tcc_miss"},
      {"TCC_EA0_RDREQ_sum", "tcc_ea_rdreq"}, {"TCC_EA_RDREQ_sum", "tcc_ea_rdreq"},
      {"TCC_EA0_WRREQ_sum", "tcc_ea_wrreq"}, {"TCC_EA_WRREQ_sum", "tcc_ea_wrreq"},
      {"FETCH_SIZE", "fetch_size_kb"},      {"WRITE_SIZE", "write_size_kb"}};
  metric_map m;
  for (const auto& [k, v] : raw) {
    auto it = names.find(k);
    std::string key;
    if (it != names.end()) {
      key = it->second;
    } else {
      for (char c : k) key.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    m.emplace(key, v);  // the EA0 name (tried first) wins over the EA fallback
  }
  if (duration_ms) m["duration_ms"] = *duration_ms;
  auto get = [&](const char* k) -> std::optional<double> {
    auto it = m.find(k);
    return it == m.end() ? std::nullopt : std::optional<double>(it->second);
  };
  if (auto hit = get("tcc_hit"), miss = get("tcc_miss"); hit && miss && *hit + *miss > 0)
    m["tcc_cache_hit_rate_pct"] = round_to(100.0 * *hit / (*hit + *miss), 2);
  if (auto f = get("fetch_size_kb"), w = get("write_size_kb"); f && w && duration_ms && *duration_ms > 0)
    m["achieved_bandwidth_gbps"] = round_to((*f + *w) * 1024.0 / (*duration_ms * 1e-3) / 1e9, 2);
  // Instruction mix: shares of the counted instructions. Labelled as what they are, never SOL
  // (SPEC §6.2 reviewer correction, §14 A.33, A.34).
  auto valu = get("sq_insts_valu"), salu = get("sq_insts_salu"), rd = get("sq_insts_vmem_rd"),
       wr = get("sq_insts_vmem_wr"), lds = get("sq_insts_lds");
  double total = valu.value_or(0) + salu.value_or(0) + rd.value_or(0) + wr.value_or(0) + lds.value_or(0);
  if (total > 0) {
    if (valu) m["inst_mix_valu_pct"] = round_to(100.0 * *valu / total, 2);
    if (salu) m["inst_mix_salu_pct"] = round_to(100.0 * *salu / total, 2);
    if (rd || wr) m["inst_mix_vmem_pct"] = round_to(100.0 * (rd.value_or(0) + wr.value_or(0)) / total, 2);
    if (lds) m["inst_mix_lds_pct"] = round_to(100.0 * *lds / total, 2);
  }
  return m;
}

rocprof_profile merge_rocprof(const std::vector<kernel_stat>& stats, const std::vector<kernel_dispatch>& trace,
                              const std::vector<std::string>& pmc_csv_texts,
                              const std::optional<std::string>& kernel_override) {
  rocprof_profile p;
  p.kernel_name = kernel_override && !kernel_override->empty() ? *kernel_override : choose_profiled_kernel(stats);
  p.dispatch = last_dispatch_of(trace, p.kernel_name);
  for (const auto& text : pmc_csv_texts) {
    auto c = parse_counter_collection(text, p.kernel_name);
    for (const auto& [k, v] : c.values) p.raw_counters.emplace(k, v);
  }
  p.metrics = rocm_metrics_from_counters(p.raw_counters, p.dispatch.duration_ms());
  return p;
}

rocprof_profile load_rocprof_profile(const std::string& stats_csv, const std::string& trace_csv,
                                     const std::vector<std::string>& pmc_csvs,
                                     const std::optional<std::string>& kernel_override) {
  auto read = [](const std::string& path) {
    try {
      return read_file(path);
    } catch (const run_error&) {
      throw run_error(std::string(no_usable_csv) + " (" + path + " is missing)");
    }
  };
  auto stats = parse_kernel_stats(read(stats_csv));
  auto trace = parse_kernel_trace(read(trace_csv));
  std::vector<std::string> texts;
  for (const auto& p : pmc_csvs) texts.push_back(read(p));
  return merge_rocprof(stats, trace, texts, kernel_override);
}

void to_json(nlohmann::json& j, const kernel_dispatch& d) {
  j = nlohmann::json{{"kernel_name", d.kernel_name},
                     {"dispatch_id", d.dispatch_id ? nlohmann::json(*d.dispatch_id) : nlohmann::json(nullptr)},
                     {"agent", d.agent},
                     {"start_ns", d.start_ns},
                     {"end_ns", d.end_ns},
                     {"duration_ms", d.duration_ms()},
                     {"workgroup_size", d.workgroup_size},
                     {"grid_size", d.grid_size}};
  if (d.lds_bytes) j["lds_bytes"] = *d.lds_bytes;
  if (d.scratch_bytes) j["scratch_bytes"] = *d.scratch_bytes;
  if (d.vgpr_count) j["vgpr_count"] = *d.vgpr_count;
  if (d.sgpr_count) j["sgpr_count"] = *d.sgpr_count;
}

void to_json(nlohmann::json& j, const rocprof_profile& p) {
  j = nlohmann::json{{"kernel_name", p.kernel_name},
                     {"dispatch", p.dispatch},
                     {"metrics", p.metrics},
                     {"_raw_counters", p.raw_counters}};
}

} // namespace kagent
