#include "platform/store/node_scratch.hpp"

#include <fmt/format.h>

#include <cctype>
#include <system_error>

#include "platform/common/files.hpp"
#include "platform/store/util.hpp"

namespace kagent::store {

namespace fs = std::filesystem;

namespace {

/// A relative path that stays inside the directory it is joined to.
bool stays_inside(const fs::path& rel) { return !rel.empty() && !rel.is_absolute() && *rel.begin() != ".."; }

bool skipped_dir(const fs::path& p) {
  const auto n = p.filename().string();
  return n == "triton" || n == ".triton_cache" || n == "tmp" || n == "__pycache__";
}

std::string size_text(std::uintmax_t bytes) {
  return bytes >= (1u << 20) && bytes % (1u << 20) == 0 ? fmt::format("{} MiB", bytes >> 20)
                                                        : fmt::format("{} bytes", bytes);
}

} // namespace

fs::path node_work_dir(const fs::path& run_root, const std::string& relative) {
  fs::path rel = fs::path(relative).lexically_normal();
  if (!stays_inside(rel)) {
    const auto last = rel.filename();
    rel = fs::path("elsewhere") / (last.empty() || last == ".." || last == "." ? fs::path("unnamed") : last);
  }
  return run_root / rel;
}

file_stamps stamp_files(const fs::path& dir) {
  file_stamps out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && skipped_dir(it->path())) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    out[fs::relative(it->path(), dir, ec).string()] = {it->file_size(ec), it->last_write_time(ec)};
  }
  return out;
}

std::vector<shipped_file> files_written_since(const fs::path& dir, const file_stamps& before,
                                              std::uintmax_t max_file_bytes, std::uintmax_t max_reply_bytes) {
  std::vector<shipped_file> out;
  std::uintmax_t total = 0;
  for (const auto& [rel, stamp] : stamp_files(dir)) {
    if (auto it = before.find(rel); it != before.end() && it->second == stamp) continue;
    std::string bytes;
    try {
      bytes = read_file(dir / rel);
    } catch (const std::exception&) {
      continue;  // gone since the walk
    }
    const bool too_big = bytes.size() > max_file_bytes;
    if (too_big || total + bytes.size() > max_reply_bytes) {
      out.push_back({rel + ".omitted.txt",
                     fmt::format("{} ({} bytes, sha256 {}) stayed on the node: over the {} limit of {}\n", rel,
                                 bytes.size(), sha256_hex(bytes), size_text(too_big ? max_file_bytes : max_reply_bytes),
                                 too_big ? "one file" : "one reply")});
      continue;
    }
    total += bytes.size();
    out.push_back({rel, std::move(bytes)});
  }
  return out;
}

size_t write_shipped_files(const fs::path& work_dir, const std::vector<shipped_file>& files) {
  size_t written = 0;
  for (const auto& f : files) {
    const auto rel = fs::path(f.path).lexically_normal();
    if (!stays_inside(rel)) continue;  // never outside the work_dir
    try {
      fs::create_directories((work_dir / rel).parent_path());
      write_file_atomic(work_dir / rel, f.bytes);
      ++written;
    } catch (const std::exception&) {
    }
  }
  return written;
}

node_scratch_run open_node_scratch_run(const fs::path& scratch, const std::string& run_id, int n,
                                       const std::string& input_code, const std::string& problem_code,
                                       const std::string& test_code) {
  std::string safe;
  for (char c : run_id) safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  node_scratch_run run{scratch / fmt::format("{}-{}", safe.empty() ? "run" : safe, n)};
  fs::create_directories(run.kernel_dir());
  fs::create_directories(run.run_dir());
  write_file_atomic(run.kernel_dir() / "input.py", input_code);
  write_file_atomic(run.kernel_dir() / "problem.py", problem_code);
  write_file_atomic(run.kernel_dir() / "test.py", test_code);
  return run;
}

void remove_node_scratch_run(const node_scratch_run& run) {
  std::error_code ec;
  fs::remove_all(run.dir, ec);
}

} // namespace kagent::store
