// `kagent-actors runs [RUN_DIR_BASE]`: one line per run directory, newest first: id, strategy, status
// (a `running` run whose lock no process holds is `stopped`: it was killed), best time, speed-up over
// the starting kernel, candidates and start time. Reads only; a missing or corrupt piece leaves a
// `-`/`?` and a note, never an error.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/command.hpp"
#include "app/run_info.hpp"

namespace fs = std::filesystem;

namespace kagent::app {
namespace {

struct runs_options {
  std::string base = ".optimize";
  bool json = false;
};

nlohmann::ordered_json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}
nlohmann::ordered_json opt_json(const std::optional<std::int64_t>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

/// The short note of a row: why something is unknown, or what a stopped run can do.
std::string note_of(const run_info& r) {
  std::vector<std::string> parts;
  for (const auto& p : r.problems)
    if (p.rfind("no summary.json", 0) != 0 || (r.status != "running" && r.status != "stopped")) parts.push_back(p);
  if (r.status == "stopped") parts.push_back("killed: no process holds its lock (kagent-actors --resume " +
                                             r.path.string() + ")");
  if (r.status == "running" && !r.lock.pid.empty()) parts.push_back("pid " + r.lock.pid);
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

int run_runs(const runs_options& o, bool base_given) {
  std::error_code ec;
  const auto st = fs::status(o.base, ec);
  if (!fs::exists(st)) {
    if (base_given) {
      std::cerr << "kagent-actors: error: runs: " << o.base << " does not exist (expected the --run-dir of earlier "
                << "runs, default .optimize)\n";
      return 2;
    }
    if (o.json) std::cout << "[]\n";
    else std::cout << "no runs: " << o.base << " does not exist yet (runs are created there by kagent-actors "
                   << "--kernel-dir DIR)\n";
    return 0;
  }
  if (!fs::is_directory(st)) {
    std::cerr << "kagent-actors: error: runs: " << o.base << " is not a directory (expected the --run-dir of "
              << "earlier runs, default .optimize)\n";
    return 2;
  }
  std::vector<run_info> runs;
  fs::directory_iterator it(o.base, ec), end;
  if (ec) {
    std::cerr << "kagent-actors: error: runs: " << o.base << " cannot be read (" << ec.message() << ")\n";
    return 2;
  }
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    std::error_code e2;
    if (!it->is_directory(e2) || !looks_like_run_dir(it->path())) continue;
    runs.push_back(read_run_info(it->path()));
  }
  std::sort(runs.begin(), runs.end(), [](const run_info& a, const run_info& b) {
    return a.started != b.started ? a.started > b.started : a.id > b.id;
  });

  if (o.json) {
    auto arr = nlohmann::ordered_json::array();
    for (const auto& r : runs) {
      nlohmann::ordered_json j;
      j["run_id"] = r.id;
      j["path"] = r.path.string();
      j["strategy"] = r.strategy.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.strategy);
      j["status"] = r.status;
      j["db_status"] = r.db_status.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.db_status);
      j["lock_held"] = r.lock.held;
      j["best_ms"] = opt_json(r.best_ms);
      j["initial_ms"] = opt_json(r.initial_ms);
      j["speedup_vs_initial"] = opt_json(speedup(r.initial_ms, r.best_ms));
      j["candidates"] = opt_json(r.candidates);
      j["started"] = r.started.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.started);
      j["problems"] = r.problems;
      arr.push_back(j);
    }
    std::cout << arr.dump(2) << "\n";
    return 0;
  }
  if (runs.empty()) {
    std::cout << "no runs under " << o.base << "\n";
    return 0;
  }
  struct row {
    std::vector<std::string> cells;
    std::string note;
  };
  std::vector<row> rows;
  rows.push_back({{"RUN", "STRATEGY", "STATUS", "BEST", "SPEEDUP", "CANDIDATES", "STARTED (UTC)"}, ""});
  for (const auto& r : runs)
    rows.push_back({{r.id, r.strategy.empty() ? "?" : r.strategy, r.status, fmt_ms(r.best_ms),
                     fmt_x(speedup(r.initial_ms, r.best_ms)), r.candidates ? std::to_string(*r.candidates) : "?",
                     r.started.empty() ? "?" : r.started},
                    note_of(r)});
  std::vector<size_t> width(rows.front().cells.size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.cells.size(); ++i) width[i] = std::max(width[i], r.cells[i].size());
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.cells.size(); ++i) {
      const bool right = i == 3 || i == 4 || i == 5;  // numbers
      line += i ? "  " : "";
      line += right ? fmt::format("{:>{}}", r.cells[i], width[i]) : fmt::format("{:<{}}", r.cells[i], width[i]);
    }
    if (!r.note.empty()) line += "  " + r.note;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
  return 0;
}

const register_command runs_command{"runs", [](CLI::App& root, int& exit_code) {
  auto opts = std::make_shared<runs_options>();
  auto* sub = root.add_subcommand("runs", "list the runs under RUN_DIR_BASE (default .optimize), newest first");
  auto* base = sub->add_option("RUN_DIR_BASE", opts->base, "where the run directories are (the runs' --run-dir)")
                   ->capture_default_str();
  sub->add_flag("--json", opts->json, "print a JSON array instead of a table");
  auto* root_dir = root.get_option_no_throw("--run-dir");  // `kagent-actors --run-dir X runs`
  sub->callback([opts, base, root_dir, &exit_code] {
    const bool from_root = base->count() == 0 && root_dir && root_dir->count() > 0;
    if (from_root) opts->base = root_dir->as<std::string>();
    exit_code = run_runs(*opts, base->count() > 0 || from_root);
  });
}};

}  // namespace
}  // namespace kagent::app
