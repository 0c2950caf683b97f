#pragma once
// A run's files on a node of a multi-node run (README "Many nodes"): the node keeps the run's kernel
// directory and the device work's files in a scratch directory only while the run's manager is
// linked, and sends back every file the work wrote; the manager writes them into its run directory.
// Nothing here lets a path leave its directory: work_dirs travel relative to the run directory and
// are mapped (and shipped files written) strictly inside the directory they belong to.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kagent::store {

/// A file the device work wrote, as it travels from a node back to its manager (path relative to the
/// request's work_dir).
struct shipped_file {
  std::string path;
  std::string bytes;
};

/// Where a manager's work_dir, relative to its run directory ("candidates/r1_c0"), lives under a
/// node's `run_root`. An absolute path, an empty one or one that climbs out ("../x") lands in
/// `run_root/elsewhere/<its last component>`, never outside run_root.
std::filesystem::path node_work_dir(const std::filesystem::path& run_root, const std::string& relative);

/// Size and modification time of every regular file under `dir`, by relative path; Triton's caches,
/// tmp/ and __pycache__/ are not walked (they are the evaluators' own, not the run's files).
using file_stamps = std::map<std::string, std::pair<std::uintmax_t, std::filesystem::file_time_type>>;
file_stamps stamp_files(const std::filesystem::path& dir);

/// The files under `dir` written or changed since `before`, to send back. None is dropped silently: a
/// file over `max_file_bytes`, or one that would take the reply past `max_reply_bytes`, travels as
/// `<path>.omitted.txt` stating its size, sha256 and the limit it broke.
std::vector<shipped_file> files_written_since(const std::filesystem::path& dir, const file_stamps& before,
                                              std::uintmax_t max_file_bytes = 8u << 20,
                                              std::uintmax_t max_reply_bytes = 48u << 20);

/// The manager's side: writes each shipped file atomically under `work_dir`; a path that is absolute,
/// empty or climbs out of work_dir is skipped. Returns how many were written.
size_t write_shipped_files(const std::filesystem::path& work_dir, const std::vector<shipped_file>& files);

/// A run opened on a node: `<scratch>/<run id, made safe>-<n>/` with the kernel directory in
/// `kernel/` (input.py, problem.py, test.py) and the run's mirror of the manager's run directory in
/// `run/`.
struct node_scratch_run {
  std::filesystem::path dir;
  std::filesystem::path kernel_dir() const { return dir / "kernel"; }
  std::filesystem::path run_dir() const { return dir / "run"; }
};
node_scratch_run open_node_scratch_run(const std::filesystem::path& scratch, const std::string& run_id, int n,
                                       const std::string& input_code, const std::string& problem_code,
                                       const std::string& test_code);

/// Removes a run's scratch directory (a node keeps nothing once the run is closed); errors ignored.
void remove_node_scratch_run(const node_scratch_run& run);

} // namespace kagent::store
