#include "platform/store/run_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "platform/common/errors.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/util.hpp"
#include "platform/common/files.hpp"

namespace kagent::store {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t max_hint_length = 48;
// How many random suffixes create() tries before giving up; two runs started in the same second
// with the same hint collide on 1 in 65536 tries, so more than a handful means something else.
constexpr int max_id_attempts = 64;

std::string sanitize_hint(std::string_view hint) {
  std::string out;
  for (char c : hint) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    const char d = ok ? c : '-';
    if (d == '-' && !out.empty() && out.back() == '-')
      continue;
    out += d;
    if (out.size() >= max_hint_length)
      break;
  }
  // Leading dots would hide the directory; stray separators make ids ugly to type.
  while (!out.empty() && (out.front() == '-' || out.front() == '.'))
    out.erase(out.begin());
  while (!out.empty() && (out.back() == '-' || out.back() == '.'))
    out.pop_back();
  return out.empty() ? std::string("run") : out;
}

std::string sys_error(int err) { return std::strerror(err); }

void require_safe(std::string_view what, std::string_view name) {
  if (!is_safe_name(name))
    throw run_error(fmt::format(
        "invalid {} '{}': expected 1-128 characters of [A-Za-z0-9._-], not '.' or '..'", what, name));
}

void make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw run_error(fmt::format("cannot create directory {}: {}", dir.string(), ec.message()));
}

bool has_sqlite_magic(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char magic[16] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == 16 && std::memcmp(magic, "SQLite format 3", 16) == 0;
}

} // namespace

std::string run_directory::make_run_id(std::string_view hint,
                                       std::chrono::system_clock::time_point now, unsigned suffix) {
  // iso_utc gives "YYYY-MM-DDTHH:MM:SS.mmmZ"; the id keeps the digits to the second.
  const std::string iso = iso_utc(now);
  const std::string stamp = iso.substr(0, 4) + iso.substr(5, 2) + iso.substr(8, 2) + "-" +
                            iso.substr(11, 2) + iso.substr(14, 2) + iso.substr(17, 2);
  return fmt::format("{}-{}-{:04x}", stamp, sanitize_hint(hint), suffix & 0xffffu);
}

run_directory run_directory::create(const fs::path& base, std::string_view hint,
                                    std::string_view config_yaml) {
  const fs::path abs_base = fs::absolute(base).lexically_normal();
  make_dir(abs_base);

  std::random_device rd;
  std::mt19937 gen(rd());
  std::uniform_int_distribution<unsigned> dist(0, 0xffff);
  fs::path dir;
  std::string id;
  for (int attempt = 0;; ++attempt) {
    if (attempt == max_id_attempts)
      throw run_error(fmt::format("cannot create a run directory under {}: {} ids in a row exist",
                                  abs_base.string(), max_id_attempts));
    id = make_run_id(hint, std::chrono::system_clock::now(), dist(gen));
    dir = abs_base / id;
    // mkdir (not create_directories) so that an existing directory is refused, never reused.
    if (::mkdir(dir.c_str(), 0755) == 0)
      break;
    if (errno != EEXIST)
      throw run_error(fmt::format("cannot create run directory {}: {}", dir.string(), sys_error(errno)));
  }

  try {
    write_file_atomic(dir / "config.yaml", config_yaml);
    const fs::path events = dir / "events.jsonl";
    const int fd = ::open(events.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      throw run_error(fmt::format("cannot create {}: {}", events.string(), sys_error(errno)));
    ::close(fd);
    make_dir(dir / "candidates");
    make_dir(dir / "output");
    // Opening creates the file and its schema; the run is resumable from this point on.
    program_db db = program_db::open(dir / "program.db");
  } catch (...) {
    // The directory is ours and brand new: leave nothing half-made behind.
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    throw;
  }
  return run_directory(dir, id);
}

run_directory run_directory::open_existing(const fs::path& path) {
  const std::string shown = path.string();
  const std::string expected = "expected a directory created by an earlier run, like .optimize/<run_id>/";
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    throw user_error(fmt::format("not a run directory: {} does not exist ({})", shown, expected));
  if (!fs::is_directory(st))
    throw user_error(fmt::format("not a run directory: {} is not a directory ({})", shown, expected));
  for (const char* name : {"config.yaml", "program.db", "events.jsonl"}) {
    if (!fs::is_regular_file(path / name, ec))
      throw user_error(fmt::format("not a run directory: {} has no {} ({})", shown, name, expected));
  }
  if (!has_sqlite_magic(path / "program.db"))
    throw user_error(fmt::format("not a run directory: {} is not an SQLite database",
                                 (path / "program.db").string()));
  const fs::path abs = fs::absolute(path).lexically_normal();
  std::string id = (abs.has_filename() ? abs : abs.parent_path()).filename().string();
  return run_directory(abs.has_filename() ? abs : abs.parent_path(), std::move(id));
}

std::string run_directory::read_config() const { return read_file(config_path()); }

fs::path run_directory::candidate_dir(std::string_view candidate_id) const {
  require_safe("candidate id", candidate_id);
  const fs::path dir = candidates_path() / std::string(candidate_id);
  make_dir(dir);
  return dir;
}

fs::path run_directory::write_candidate_file(std::string_view candidate_id, std::string_view name,
                                             std::string_view text) const {
  require_safe("candidate file name", name);
  const fs::path file = candidate_dir(candidate_id) / std::string(name);
  write_file_atomic(file, text);
  return file;
}

void run_directory::write_best_kernel(std::string_view code) const {
  make_dir(output_path());
  write_file_atomic(best_kernel_path(), code);
}

void run_directory::write_summary(const nlohmann::json& summary) const {
  // nlohmann writes NaN/inf as null, so the file stays strict JSON (SPEC §14 B.108); invalid
  // UTF-8 from an LLM reply is replaced instead of throwing halfway through the run's last step.
  std::string text = summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  write_file_atomic(summary_path(), text);
}

fs::path run_directory::write_file(std::string_view name, std::string_view text) const {
  require_safe("run file name", name);
  // The database and the event log have their own writers; replacing them would lose the run.
  if (name.rfind("program.db", 0) == 0 || name == "events.jsonl")
    throw run_error(fmt::format("write_file: {} is owned by the store and cannot be replaced", name));
  const fs::path file = path_ / std::string(name);
  write_file_atomic(file, text);
  return file;
}

} // namespace kagent::store
