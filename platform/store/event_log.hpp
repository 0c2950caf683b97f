#pragma once
// events.jsonl: the run's timeline, one JSON object per line,
//   {"ts":"2026-12-02T12:15:30.123Z","type":"candidate_result", ...fields}
// Types used by the runtime: run_start, round_start, round_end, candidate_result, error,
// mode_change, llm_usage, run_end (any type is accepted). Each line is written with one write(2)
// on an O_APPEND descriptor, so a line is whole or absent, and a reader (tail -f, the reporter)
// never sees a torn line except after a crash, which the next open repairs.
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kagent::store {

class event_log {
public:
  /// Opens (creating when missing) `path` for appending. If the file ends in a partial line (a
  /// crash mid-write), a newline is added first so that every later line parses on its own.
  /// Throws run_error naming the path.
  explicit event_log(std::filesystem::path path);
  ~event_log();
  event_log(const event_log&) = delete;
  event_log& operator=(const event_log&) = delete;

  /// Appends {"ts":now,"type":type, ...fields}. `fields` must be an object or null; its own "ts"
  /// and "type" keys are ignored. Non-finite numbers become null and invalid UTF-8 is replaced,
  /// so every line is strict JSON. Safe to call from several threads. Returns the line written
  /// (without the newline). Throws run_error when the write fails.
  std::string append(std::string_view type, const nlohmann::json& fields = nlohmann::json::object());

  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::mutex mutex_;
};

/// Every event of an events.jsonl file, in order. Lines that are not a JSON object (a line torn by
/// a crash, which event_log terminates on reopen) are skipped and counted in `*skipped` when
/// given. Throws run_error when the file cannot be read.
std::vector<nlohmann::json> read_events(const std::filesystem::path& path,
                                        std::size_t* skipped = nullptr);

} // namespace kagent::store
