#pragma once
// program.db: the durable record of one run (SQLite, WAL mode). Every candidate, attempt,
// reflexion, LLM call and the resumable search state is written here before the manager makes its
// next decision, so a killed run resumes (--resume) with nothing lost. The database is per run:
// a new run never sees another run's programs (SPEC §14 B.108). Schema: docs/store.md.
//
// Blocking and synchronous; one program_db per thread (the manager owns the writer). Other
// processes or threads may open their own (read-only) connection and read while it writes.
// Every write is its own transaction, committed before the call returns. All values are bound to
// prepared statements, never spliced into SQL.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace kagent::store {

/// programs.status values.
namespace program_status {
inline constexpr const char* pending = "pending";    ///< handed out, result not in yet
inline constexpr const char* verified = "verified";  ///< passed verification (time_ms may be NULL)
inline constexpr const char* failed = "failed";      ///< see failure_cause
}  // namespace program_status

// programs.failure_cause holds the name of a kagent::failure_kind (platform/common/failure_kind.hpp);
// the column accepts any text, so a database written by another version still reads.

/// run_state keys the runtime uses, so the manager that writes them and the --resume path that
/// reads them agree. Values are text; the *_json ones hold strict JSON. docs/store.md lists them.
namespace state_key {
inline constexpr const char* status = "status";              ///< "running", "finished", "failed"
inline constexpr const char* kernel_dir = "kernel_dir";      ///< what --resume continues
inline constexpr const char* strategy_name = "strategy_name";
inline constexpr const char* round = "round";                ///< the round being worked on
inline constexpr const char* round_done = "round_done";      ///< last round folded into the strategy
inline constexpr const char* strategy_state = "strategy_state";  ///< the strategy's view (inspection)
inline constexpr const char* eager_ms = "eager_ms";          ///< JSON number or null (not measured)
inline constexpr const char* compile_ms = "compile_ms";      ///< JSON number or null
inline constexpr const char* initial_ms = "initial_ms";      ///< JSON number or null
/// When a run before this one timed eager_ms / compile_ms (they came from the reference cache,
/// harness/reference_cache.py); absent or "" when this run timed them.
inline constexpr const char* references_cached_at = "references_cached_at";
/// "1" once the starting kernel's test.py passed and its references were timed (device_mode::
/// start_checks); until then no candidate goes to a device, and a resumed run runs them again.
inline constexpr const char* start_checked = "start_checked";
inline constexpr const char* analysis_mode = "analysis_mode";  ///< JSON {"<gpu id>": "profiled"|"synthetic"}
/// JSON {"<gpu id>": "node/gpuN"}: the node of every program's gpu_id that is another node's device
/// (many nodes); a gpu_id not named here is a device of the manager's own node.
inline constexpr const char* device_labels = "device_labels";
inline constexpr const char* diverged = "diverged";          ///< JSON array of program ids
inline constexpr const char* next_candidate = "next_candidate";  ///< counter for candidate ids
/// JSON array, one object per session of the run (the first and each --resume):
/// {"started": ISO-8601 UTC, "wall_s", "devices", "device_s"}; the run's totals sum them.
inline constexpr const char* sessions = "sessions";
/// Per-program keys: "<prefix><id>".
inline constexpr const char* analysis_prefix = "analysis:";  ///< a parent's shared analysis (JSON)
inline constexpr const char* profile_prefix = "profile:";    ///< a kernel's profile (JSON)
inline constexpr const char* spec_prefix = "spec:";          ///< a candidate's plan (JSON)
}  // namespace state_key

/// One row of `programs`. A time of std::nullopt is stored as NULL, meaning "not measured";
/// non-finite times are stored as NULL too, never as the non-standard Infinity token.
struct program_record {
  std::string id;                          ///< "initial", "r1_c3", ...
  std::optional<std::string> parent_id;
  int round = 0;                           ///< 0 for the initial kernel
  std::optional<int> worker;               ///< gpu worker id; -1: the manager (initial kernel)
  std::optional<int> gpu_id;               ///< device id (HIP id / CUDA index)
  std::string status = program_status::pending;
  std::string code;
  std::optional<double> time_ms;
  std::optional<std::string> error;
  std::optional<std::string> failure_cause;
  std::optional<std::string> code_hash;    ///< sha256_hex(code) unless the caller uses another hash
  std::optional<std::string> bottleneck;   ///< category the rewrite targeted (memory, compute, ...)
  std::optional<std::string> model;        ///< LLM model that wrote it
  std::optional<double> compute_sol_pct;
  std::optional<double> memory_sol_pct;
  std::optional<double> sol_pct;           ///< combined SOL %
  std::optional<double> speedup;           ///< vs the initial kernel, when both times are known
  std::optional<std::string> analysis_mode;  ///< "profiled" / "synthetic"
  std::optional<double> floor_pct;         ///< physics floor / measured time, in %
  std::string created_at;                  ///< ISO-8601 UTC; filled by insert_program when empty
  std::int64_t seq = 0;                    ///< insertion order (read-only; set by the database)
};

/// The fields update_program may change; unset members are left as they are.
struct program_update {
  std::optional<std::string> status{};
  std::optional<std::string> code{};         ///< after refinement the code differs from the first draft
  std::optional<std::string> code_hash{};
  std::optional<double> time_ms{};           ///< non-finite: stored as NULL
  std::optional<std::string> error{};
  std::optional<std::string> failure_cause{};
  std::optional<std::string> bottleneck{};
  std::optional<std::string> model{};
  std::optional<double> compute_sol_pct{};
  std::optional<double> memory_sol_pct{};
  std::optional<double> sol_pct{};
  std::optional<double> speedup{};
  std::optional<std::string> analysis_mode{};
  std::optional<double> floor_pct{};         ///< physics floor / measured time, in % (100: at the hardware limit)
  std::optional<int> worker{};               ///< set when a planned candidate is dispatched
  std::optional<int> gpu_id{};
};

/// Which programs list_programs returns; unset members match everything. Ordered by insertion.
struct program_filter {
  std::optional<std::string> status{};
  std::optional<int> round{};
  std::optional<int> worker{};
  std::optional<std::string> failure_cause{};
  std::optional<std::string> parent_id{};
  std::optional<std::size_t> limit{};
};

/// SPEC §2.7 attempt dict, plus the program it describes.
struct attempt_record {
  int round_num = 0;
  int worker_id = 0;
  std::optional<std::string> program_id;
  std::string bottleneck_category;
  std::string root_cause;
  std::string recommended_fix;
  std::map<std::string, std::string> config_changes;
  std::optional<double> time_before_ms;
  std::optional<double> time_after_ms;
  std::optional<double> improvement_pct;
  bool is_improvement = false;
  std::optional<double> compute_sol_pct;
  std::optional<double> memory_sol_pct;
  std::optional<double> combined_sol_pct;
  bool passed_verification = false;
  std::optional<std::string> error_message;
  std::string created_at;  ///< filled on insert when empty
  std::int64_t seq = 0;    ///< read-only
};

/// SPEC §2.7 reflexion dict, plus the program and worker it came from.
struct reflexion_record {
  int round_num = 0;
  std::optional<int> worker_id;
  std::optional<std::string> program_id;
  std::string root_cause_diagnosed;
  std::string fix_applied;
  std::string expected_outcome;
  std::string actual_outcome;
  std::optional<double> performance_delta_pct;
  bool was_diagnosis_correct = false;
  bool was_fix_effective = false;
  std::string reasoning;
  std::vector<std::string> lessons;
  std::vector<std::string> avoid_patterns;
  std::vector<std::string> try_patterns;
  std::string created_at;
  std::int64_t seq = 0;
};

/// One LLM request as the client finished it (after its retries).
struct llm_call_record {
  std::string purpose;   ///< "optimize", "refine", "bottleneck", "reflexion", ...
  std::string model;
  std::optional<std::string> provider;
  std::int64_t tokens_in = 0;
  std::int64_t tokens_out = 0;
  std::optional<double> cost_usd;   ///< NULL: no price known for the model
  int attempts = 1;                 ///< HTTP attempts including retries
  bool ok = true;
  std::optional<std::string> error_kind;   ///< "rate_limit", "quota", "timeout", "http_5xx", ...
  std::optional<std::string> candidate_id;
  std::optional<double> latency_ms;
  std::string ts;                   ///< ISO-8601 UTC; filled on insert when empty
  std::int64_t seq = 0;
};

/// LLM usage summed per (purpose, model).
struct llm_usage_row {
  std::string purpose;
  std::string model;
  std::int64_t calls = 0;
  std::int64_t failed_calls = 0;
  std::int64_t attempts = 0;
  std::int64_t tokens_in = 0;
  std::int64_t tokens_out = 0;
  double cost_usd = 0;
};

/// The §2.7 dicts as JSON (the keys workers and prompts use) and back. from_json ignores unknown
/// keys and throws run_error on a known key of the wrong type.
nlohmann::json to_json(const attempt_record& a);
attempt_record attempt_from_json(const nlohmann::json& j);
nlohmann::json to_json(const reflexion_record& r);
reflexion_record reflexion_from_json(const nlohmann::json& j);
/// A program as JSON (every column; NULL -> null), for summaries and reports.
nlohmann::json to_json(const program_record& p);

class program_db {
public:
  enum class mode { read_write, read_only };

  /// Current schema version (PRAGMA user_version).
  static constexpr int schema_version = 2;

  /// Opens `path`, creating the file and schema in read_write mode. Sets WAL mode, a busy timeout
  /// and full synchronous commits. Throws run_error naming the path when the file cannot be opened,
  /// is not a database, or has a newer schema.
  static program_db open(const std::filesystem::path& path, mode m = mode::read_write);

  program_db(program_db&& other) noexcept;
  program_db& operator=(program_db&& other) noexcept;
  program_db(const program_db&) = delete;
  program_db& operator=(const program_db&) = delete;
  ~program_db();

  const std::filesystem::path& path() const { return path_; }
  /// The journal mode SQLite reports ("wal" after open in read_write mode).
  std::string journal_mode();

  // programs ----------------------------------------------------------------------------------
  /// Inserts `p` (created_at defaults to now; seq is assigned). Throws run_error when the id
  /// exists already or a value violates the schema (e.g. an unknown status).
  void insert_program(const program_record& p);
  /// Changes the set fields of program `id`. Throws run_error when there is no such program.
  void update_program(const std::string& id, const program_update& u);
  std::optional<program_record> get_program(const std::string& id);
  std::vector<program_record> list_programs(const program_filter& f = {});
  /// The k fastest verified programs with a measured time: by time_ms, ties by insertion order.
  std::vector<program_record> top_k_verified(std::size_t k);
  /// The earliest program (any status) whose code_hash is `hash`, for dedup (SPEC §14 B.88).
  /// With `status`, the earliest program in that status (dedup asks for the verified original: an
  /// earlier duplicate that was failed must not hide it).
  std::optional<program_record> find_by_code_hash(const std::string& hash,
                                                  const std::optional<std::string>& status = std::nullopt);
  std::int64_t count();
  std::int64_t count(const std::string& status);
  /// Failed programs per failure_cause (NULL cause counted as "unknown").
  std::map<std::string, std::int64_t> failures_by_cause();
  // history -----------------------------------------------------------------------------------
  void insert_attempt(const attempt_record& a);
  /// The last `last_n` attempts, oldest first (all when last_n is SIZE_MAX).
  std::vector<attempt_record> list_attempts(std::size_t last_n = SIZE_MAX);
  void insert_reflexion(const reflexion_record& r);
  std::vector<reflexion_record> list_reflexions(std::size_t last_n = SIZE_MAX);

  // run state (for --resume) ------------------------------------------------------------------
  void set_state(const std::string& key, const std::string& value);
  /// Several keys in one transaction: all are stored or none.
  void set_states(const std::map<std::string, std::string>& values);
  std::optional<std::string> get_state(const std::string& key);
  std::map<std::string, std::string> all_state();
  /// JSON convenience over set_state/get_state (strict JSON; non-finite numbers become null).
  void set_state_json(const std::string& key, const nlohmann::json& value);
  /// nullopt when the key is unset; run_error when the stored text is not JSON.
  std::optional<nlohmann::json> get_state_json(const std::string& key);

  // LLM accounting ----------------------------------------------------------------------------
  void record_llm_call(const llm_call_record& c);
  std::vector<llm_call_record> list_llm_calls();
  /// Usage per (purpose, model), ordered by purpose then model.
  std::vector<llm_usage_row> llm_usage();

private:
  program_db(sqlite3* db, std::filesystem::path path) : db_(db), path_(std::move(path)) {}
  void exec(const char* sql);
  [[noreturn]] void fail(std::string_view what) const;

  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
};

} // namespace kagent::store
