#include "platform/store/program_db.hpp"

#include <sqlite3.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "platform/common/errors.hpp"
#include "platform/common/redact.hpp"
#include "platform/store/util.hpp"

namespace kagent::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Long enough to ride out a reader's checkpoint or a second process's short write, short enough
// that a wedged holder surfaces as an error instead of a silent hang.
constexpr int busy_timeout_ms = 10000;

constexpr const char* schema_sql = R"sql(
CREATE TABLE IF NOT EXISTS programs (
  id              TEXT PRIMARY KEY NOT NULL,
  seq             INTEGER NOT NULL UNIQUE,
  parent_id       TEXT,
  round           INTEGER NOT NULL,
  worker          INTEGER,
  gpu_id          INTEGER,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'verified', 'failed')),
  code            TEXT NOT NULL,
  time_ms         REAL CHECK (time_ms IS NULL OR time_ms >= 0),
  error           TEXT,
  failure_cause   TEXT,
  code_hash       TEXT,
  bottleneck      TEXT,
  model           TEXT,
  compute_sol_pct REAL,
  memory_sol_pct  REAL,
  sol_pct         REAL,
  speedup         REAL,
  analysis_mode   TEXT,
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL,
  floor_pct       REAL
);
CREATE INDEX IF NOT EXISTS programs_by_hash ON programs(code_hash);
CREATE INDEX IF NOT EXISTS programs_by_status_time ON programs(status, time_ms);
CREATE TABLE IF NOT EXISTS attempts (
  seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
  round_num           INTEGER NOT NULL,
  worker_id           INTEGER NOT NULL,
  program_id          TEXT,
  bottleneck_category TEXT NOT NULL,
  root_cause          TEXT NOT NULL,
  recommended_fix     TEXT NOT NULL,
  config_changes      TEXT NOT NULL,
  time_before_ms      REAL,
  time_after_ms       REAL,
  improvement_pct     REAL,
  is_improvement      INTEGER NOT NULL CHECK (is_improvement IN (0, 1)),
  compute_sol_pct     REAL,
  memory_sol_pct      REAL,
  combined_sol_pct    REAL,
  passed_verification INTEGER NOT NULL CHECK (passed_verification IN (0, 1)),
  error_message       TEXT,
  created_at          TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reflexions (
  seq                   INTEGER PRIMARY KEY AUTOINCREMENT,
  round_num             INTEGER NOT NULL,
  worker_id             INTEGER,
  program_id            TEXT,
  root_cause_diagnosed  TEXT NOT NULL,
  fix_applied           TEXT NOT NULL,
  expected_outcome      TEXT NOT NULL,
  actual_outcome        TEXT NOT NULL,
  performance_delta_pct REAL,
  was_diagnosis_correct INTEGER NOT NULL CHECK (was_diagnosis_correct IN (0, 1)),
  was_fix_effective     INTEGER NOT NULL CHECK (was_fix_effective IN (0, 1)),
  reasoning             TEXT NOT NULL,
  lessons               TEXT NOT NULL,
  avoid_patterns        TEXT NOT NULL,
  try_patterns          TEXT NOT NULL,
  created_at            TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_state (
  key        TEXT PRIMARY KEY NOT NULL,
  value      TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS llm_calls (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  ts           TEXT NOT NULL,
  purpose      TEXT NOT NULL,
  model        TEXT NOT NULL,
  provider     TEXT,
  tokens_in    INTEGER NOT NULL,
  tokens_out   INTEGER NOT NULL,
  cost_usd     REAL,
  attempts     INTEGER NOT NULL,
  ok           INTEGER NOT NULL CHECK (ok IN (0, 1)),
  error_kind   TEXT,
  candidate_id TEXT,
  latency_ms   REAL
);
)sql";

constexpr const char* program_columns =
    "id, seq, parent_id, round, worker, gpu_id, status, code, time_ms, error, failure_cause, "
    "code_hash, bottleneck, model, compute_sol_pct, memory_sol_pct, sol_pct, speedup, "
    "analysis_mode, created_at, floor_pct";

constexpr const char* attempt_columns =
    "seq, round_num, worker_id, program_id, bottleneck_category, root_cause, recommended_fix, "
    "config_changes, time_before_ms, time_after_ms, improvement_pct, is_improvement, "
    "compute_sol_pct, memory_sol_pct, combined_sol_pct, passed_verification, error_message, "
    "created_at";

constexpr const char* reflexion_columns =
    "seq, round_num, worker_id, program_id, root_cause_diagnosed, fix_applied, expected_outcome, "
    "actual_outcome, performance_delta_pct, was_diagnosis_correct, was_fix_effective, reasoning, "
    "lessons, avoid_patterns, try_patterns, created_at";

constexpr const char* llm_columns =
    "seq, ts, purpose, model, provider, tokens_in, tokens_out, cost_usd, attempts, ok, error_kind, "
    "candidate_id, latency_ms";

std::string strict_dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A prepared statement with 1-based positional binding. Errors name the database file and what
// was being done, plus SQLite's own message.
class statement {
public:
  statement(sqlite3* db, const fs::path& path, std::string_view sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) != SQLITE_OK)
      fail("prepare");
  }
  ~statement() { sqlite3_finalize(stmt_); }
  statement(const statement&) = delete;
  statement& operator=(const statement&) = delete;

  template <class... Ts>
  statement& bind_all(const Ts&... values) {
    int index = 1;
    (bind(index++, values), ...);
    return *this;
  }

  void bind(int i, const std::string& raw) {
    // Every text column (code, errors, output tails) is redacted by value on its way in.
    const std::string v = redact(raw);
    check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  void bind(int i, const char* v) { bind(i, std::string(v)); }
  void bind(int i, std::nullopt_t) { check(sqlite3_bind_null(stmt_, i)); }
  void bind(int i, bool v) { check(sqlite3_bind_int(stmt_, i, v ? 1 : 0)); }
  void bind(int i, int v) { check(sqlite3_bind_int(stmt_, i, v)); }
  void bind(int i, std::int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); }
  void bind(int i, double v) {
    // NULL is this schema's "not measured"; inf/NaN must never reach the file (SPEC §14 B.108).
    if (std::isfinite(v))
      check(sqlite3_bind_double(stmt_, i, v));
    else
      check(sqlite3_bind_null(stmt_, i));
  }
  template <class T>
  void bind(int i, const std::optional<T>& v) {
    if (v)
      bind(i, *v);
    else
      check(sqlite3_bind_null(stmt_, i));
  }

  /// True when a row is available, false when done.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW)
      return true;
    if (rc == SQLITE_DONE)
      return false;
    fail("step");
  }
  void run() {
    while (step()) {
    }
  }

  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::string text(int c) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
  }
  std::optional<std::string> opt_text(int c) const {
    if (is_null(c))
      return std::nullopt;
    return text(c);
  }
  std::int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  int i32(int c) const { return sqlite3_column_int(stmt_, c); }
  std::optional<int> opt_int(int c) const {
    if (is_null(c))
      return std::nullopt;
    return i32(c);
  }
  double dbl(int c) const { return sqlite3_column_double(stmt_, c); }
  std::optional<double> opt_double(int c) const {
    if (is_null(c))
      return std::nullopt;
    return dbl(c);
  }

  [[noreturn]] void fail(std::string_view what) const {
    const int code = sqlite3_extended_errcode(db_);
    std::string detail = sqlite3_errmsg(db_);
    throw run_error(fmt::format("program database {}: {} failed: {} (sqlite code {})", path_.string(),
                                what, detail, code));
  }

private:
  void check(int rc) {
    if (rc != SQLITE_OK)
      fail("bind");
  }

  sqlite3* db_;
  const fs::path& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

// SQLite's LIMIT takes a signed 64-bit value; -1 means no limit.
std::int64_t sql_limit(std::size_t n) {
  return n > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? -1
             : static_cast<std::int64_t>(n);
}

program_record read_program(const statement& s) {
  program_record p;
  p.id = s.text(0);
  p.seq = s.i64(1);
  p.parent_id = s.opt_text(2);
  p.round = s.i32(3);
  p.worker = s.opt_int(4);
  p.gpu_id = s.opt_int(5);
  p.status = s.text(6);
  p.code = s.text(7);
  p.time_ms = s.opt_double(8);
  p.error = s.opt_text(9);
  p.failure_cause = s.opt_text(10);
  p.code_hash = s.opt_text(11);
  p.bottleneck = s.opt_text(12);
  p.model = s.opt_text(13);
  p.compute_sol_pct = s.opt_double(14);
  p.memory_sol_pct = s.opt_double(15);
  p.sol_pct = s.opt_double(16);
  p.speedup = s.opt_double(17);
  p.analysis_mode = s.opt_text(18);
  p.created_at = s.text(19);
  p.floor_pct = s.opt_double(20);
  return p;
}

template <class T>
T parse_stored_json(const fs::path& path, const std::string& text, const char* column) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded())
    throw run_error(fmt::format("program database {}: column {} holds invalid JSON", path.string(), column));
  try {
    return j.get<T>();
  } catch (const json::exception& e) {
    throw run_error(
        fmt::format("program database {}: column {} has an unexpected shape: {}", path.string(), column, e.what()));
  }
}

attempt_record read_attempt(const statement& s, const fs::path& path) {
  attempt_record a;
  a.seq = s.i64(0);
  a.round_num = s.i32(1);
  a.worker_id = s.i32(2);
  a.program_id = s.opt_text(3);
  a.bottleneck_category = s.text(4);
  a.root_cause = s.text(5);
  a.recommended_fix = s.text(6);
  a.config_changes = parse_stored_json<std::map<std::string, std::string>>(path, s.text(7), "attempts.config_changes");
  a.time_before_ms = s.opt_double(8);
  a.time_after_ms = s.opt_double(9);
  a.improvement_pct = s.opt_double(10);
  a.is_improvement = s.i32(11) != 0;
  a.compute_sol_pct = s.opt_double(12);
  a.memory_sol_pct = s.opt_double(13);
  a.combined_sol_pct = s.opt_double(14);
  a.passed_verification = s.i32(15) != 0;
  a.error_message = s.opt_text(16);
  a.created_at = s.text(17);
  return a;
}

reflexion_record read_reflexion(const statement& s, const fs::path& path) {
  using strings = std::vector<std::string>;
  reflexion_record r;
  r.seq = s.i64(0);
  r.round_num = s.i32(1);
  r.worker_id = s.opt_int(2);
  r.program_id = s.opt_text(3);
  r.root_cause_diagnosed = s.text(4);
  r.fix_applied = s.text(5);
  r.expected_outcome = s.text(6);
  r.actual_outcome = s.text(7);
  r.performance_delta_pct = s.opt_double(8);
  r.was_diagnosis_correct = s.i32(9) != 0;
  r.was_fix_effective = s.i32(10) != 0;
  r.reasoning = s.text(11);
  r.lessons = parse_stored_json<strings>(path, s.text(12), "reflexions.lessons");
  r.avoid_patterns = parse_stored_json<strings>(path, s.text(13), "reflexions.avoid_patterns");
  r.try_patterns = parse_stored_json<strings>(path, s.text(14), "reflexions.try_patterns");
  r.created_at = s.text(15);
  return r;
}

llm_call_record read_llm_call(const statement& s) {
  llm_call_record c;
  c.seq = s.i64(0);
  c.ts = s.text(1);
  c.purpose = s.text(2);
  c.model = s.text(3);
  c.provider = s.opt_text(4);
  c.tokens_in = s.i64(5);
  c.tokens_out = s.i64(6);
  c.cost_usd = s.opt_double(7);
  c.attempts = s.i32(8);
  c.ok = s.i32(9) != 0;
  c.error_kind = s.opt_text(10);
  c.candidate_id = s.opt_text(11);
  c.latency_ms = s.opt_double(12);
  return c;
}

std::string or_now(const std::string& ts) { return ts.empty() ? iso_utc_now() : ts; }

// JSON helpers for the §2.7 dicts: a missing or null key keeps the default; a wrong type is an
// error naming the key, because a silently dropped field would change what the next prompt says.
template <class T>
void take(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null())
    return;
  try {
    if constexpr (std::is_same_v<T, std::optional<double>>) {
      out = it->get<double>();
    } else if constexpr (std::is_same_v<T, std::optional<int>>) {
      out = it->get<int>();
    } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
      out = it->get<std::string>();
    } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
      // Values of config_changes are strings in SPEC §2.7; numbers an LLM wrote are kept as text.
      if (!it->is_object())
        throw json::type_error::create(302, "expected an object", nullptr);
      for (const auto& [k, v] : it->items())
        out[k] = v.is_string() ? v.template get<std::string>() : strict_dump(v);
    } else {
      out = it->get<T>();
    }
  } catch (const json::exception& e) {
    throw run_error(fmt::format("history entry: key '{}' has the wrong type ({})", key, e.what()));
  }
}

json opt_json(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}
json opt_json(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }
json opt_json(const std::optional<int>& v) { return v ? json(*v) : json(nullptr); }

} // namespace

// ---- JSON conversions ----------------------------------------------------------------------

json to_json(const attempt_record& a) {
  json j;
  j["round_num"] = a.round_num;
  j["worker_id"] = a.worker_id;
  j["bottleneck_category"] = a.bottleneck_category;
  j["root_cause"] = a.root_cause;
  j["recommended_fix"] = a.recommended_fix;
  j["config_changes"] = a.config_changes;
  j["time_before_ms"] = opt_json(a.time_before_ms);
  j["time_after_ms"] = opt_json(a.time_after_ms);
  j["improvement_pct"] = opt_json(a.improvement_pct);
  j["is_improvement"] = a.is_improvement;
  j["compute_sol_pct"] = opt_json(a.compute_sol_pct);
  j["memory_sol_pct"] = opt_json(a.memory_sol_pct);
  j["combined_sol_pct"] = opt_json(a.combined_sol_pct);
  j["passed_verification"] = a.passed_verification;
  j["error_message"] = opt_json(a.error_message);
  if (a.program_id)
    j["program_id"] = *a.program_id;
  return j;
}

attempt_record attempt_from_json(const json& j) {
  if (!j.is_object())
    throw run_error("history entry: an attempt must be a JSON object");
  attempt_record a;
  take(j, "round_num", a.round_num);
  take(j, "worker_id", a.worker_id);
  take(j, "program_id", a.program_id);
  take(j, "bottleneck_category", a.bottleneck_category);
  take(j, "root_cause", a.root_cause);
  take(j, "recommended_fix", a.recommended_fix);
  take(j, "config_changes", a.config_changes);
  take(j, "time_before_ms", a.time_before_ms);
  take(j, "time_after_ms", a.time_after_ms);
  take(j, "improvement_pct", a.improvement_pct);
  take(j, "is_improvement", a.is_improvement);
  take(j, "compute_sol_pct", a.compute_sol_pct);
  take(j, "memory_sol_pct", a.memory_sol_pct);
  take(j, "combined_sol_pct", a.combined_sol_pct);
  take(j, "passed_verification", a.passed_verification);
  take(j, "error_message", a.error_message);
  return a;
}

json to_json(const reflexion_record& r) {
  json j;
  j["round_num"] = r.round_num;
  j["root_cause_diagnosed"] = r.root_cause_diagnosed;
  j["fix_applied"] = r.fix_applied;
  j["expected_outcome"] = r.expected_outcome;
  j["actual_outcome"] = r.actual_outcome;
  j["performance_delta_pct"] = opt_json(r.performance_delta_pct);
  j["was_diagnosis_correct"] = r.was_diagnosis_correct;
  j["was_fix_effective"] = r.was_fix_effective;
  j["reasoning"] = r.reasoning;
  j["lessons"] = r.lessons;
  j["avoid_patterns"] = r.avoid_patterns;
  j["try_patterns"] = r.try_patterns;
  if (r.worker_id)
    j["worker_id"] = *r.worker_id;
  if (r.program_id)
    j["program_id"] = *r.program_id;
  return j;
}

reflexion_record reflexion_from_json(const json& j) {
  if (!j.is_object())
    throw run_error("history entry: a reflexion must be a JSON object");
  reflexion_record r;
  take(j, "round_num", r.round_num);
  take(j, "worker_id", r.worker_id);
  take(j, "program_id", r.program_id);
  take(j, "root_cause_diagnosed", r.root_cause_diagnosed);
  take(j, "fix_applied", r.fix_applied);
  take(j, "expected_outcome", r.expected_outcome);
  take(j, "actual_outcome", r.actual_outcome);
  take(j, "performance_delta_pct", r.performance_delta_pct);
  take(j, "was_diagnosis_correct", r.was_diagnosis_correct);
  take(j, "was_fix_effective", r.was_fix_effective);
  take(j, "reasoning", r.reasoning);
  take(j, "lessons", r.lessons);
  take(j, "avoid_patterns", r.avoid_patterns);
  take(j, "try_patterns", r.try_patterns);
  return r;
}

json to_json(const program_record& p) {
  json j;
  j["id"] = p.id;
  j["seq"] = p.seq;
  j["parent_id"] = opt_json(p.parent_id);
  j["round"] = p.round;
  j["worker"] = opt_json(p.worker);
  j["gpu_id"] = opt_json(p.gpu_id);
  j["status"] = p.status;
  j["code"] = p.code;
  j["time_ms"] = opt_json(p.time_ms);
  j["error"] = opt_json(p.error);
  j["failure_cause"] = opt_json(p.failure_cause);
  j["code_hash"] = opt_json(p.code_hash);
  j["bottleneck"] = opt_json(p.bottleneck);
  j["model"] = opt_json(p.model);
  j["compute_sol_pct"] = opt_json(p.compute_sol_pct);
  j["memory_sol_pct"] = opt_json(p.memory_sol_pct);
  j["sol_pct"] = opt_json(p.sol_pct);
  j["speedup"] = opt_json(p.speedup);
  j["analysis_mode"] = opt_json(p.analysis_mode);
  j["created_at"] = p.created_at;
  return j;
}

// ---- program_db ----------------------------------------------------------------------------

program_db program_db::open(const fs::path& path, mode m) {
  const int flags = (m == mode::read_write ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY) |
                    SQLITE_OPEN_FULLMUTEX;
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    const std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    throw run_error(fmt::format("cannot open program database {}: {}", path.string(), msg));
  }
  program_db db(raw, path);
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);

  // The first read is where a non-database file shows itself (SQLITE_NOTADB).
  int version = 0;
  {
    statement s(raw, db.path_, "PRAGMA user_version");
    if (s.step())
      version = s.i32(0);
  }
  if (version > schema_version)
    throw run_error(fmt::format(
        "program database {}: schema version {} is newer than this build understands ({})",
        path.string(), version, schema_version));

  if (m == mode::read_only) {
    if (version == 0)
      throw run_error(fmt::format("program database {}: no program schema (not a run's program.db)",
                                  path.string()));
    return db;
  }

  const std::string jm = db.journal_mode();
  if (jm != "wal") {
    statement s(raw, db.path_, "PRAGMA journal_mode=WAL");
    std::string got = s.step() ? s.text(0) : std::string();
    if (got != "wal")
      throw run_error(fmt::format("program database {}: cannot switch to WAL mode (got '{}')", path.string(), got));
  }
  // FULL: a commit is on disk before insert_program returns, even across a power cut.
  db.exec("PRAGMA synchronous=FULL");
  if (version == 0) {
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec(schema_sql);
      db.exec(fmt::format("PRAGMA user_version={}", schema_version).c_str());
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } else if (version == 1) {
    // Version 2 added the achieved fraction of the physics floor; a resumed older run gains it.
    db.exec("BEGIN IMMEDIATE");
    try {
      db.exec("ALTER TABLE programs ADD COLUMN floor_pct REAL");
      db.exec(fmt::format("PRAGMA user_version={}", schema_version).c_str());
      db.exec("COMMIT");
    } catch (...) {
      sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }
  return db;
}

program_db::program_db(program_db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

program_db& program_db::operator=(program_db&& other) noexcept {
  if (this != &other) {
    sqlite3_close(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

program_db::~program_db() { sqlite3_close(db_); }

void program_db::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw run_error(fmt::format("program database {}: {}", path_.string(), msg));
  }
}

void program_db::fail(std::string_view what) const {
  throw run_error(fmt::format("program database {}: {}: {}", path_.string(), what, sqlite3_errmsg(db_)));
}

std::string program_db::journal_mode() {
  statement s(db_, path_, "PRAGMA journal_mode");
  return s.step() ? s.text(0) : std::string();
}

void program_db::insert_program(const program_record& p) {
  if (get_program(p.id))
    throw run_error(fmt::format("program database {}: program id '{}' already exists", path_.string(), p.id));
  const std::string now = iso_utc_now();
  statement s(db_, path_,
              "INSERT INTO programs (id, seq, parent_id, round, worker, gpu_id, status, code, time_ms, "
              "error, failure_cause, code_hash, bottleneck, model, compute_sol_pct, memory_sol_pct, "
              "sol_pct, speedup, analysis_mode, created_at, updated_at, floor_pct) VALUES (?1, "
              "(SELECT COALESCE(MAX(seq), 0) + 1 FROM programs), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
              "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)");
  s.bind_all(p.id, p.parent_id, p.round, p.worker, p.gpu_id, p.status, p.code, p.time_ms, p.error,
             p.failure_cause, p.code_hash, p.bottleneck, p.model, p.compute_sol_pct, p.memory_sol_pct,
             p.sol_pct, p.speedup, p.analysis_mode, or_now(p.created_at), now, p.floor_pct);
  try {
    s.run();
  } catch (const run_error& e) {
    throw run_error(fmt::format("cannot insert program '{}' (status '{}'): {}", p.id, p.status, e.what()));
  }
}

void program_db::update_program(const std::string& id, const program_update& u) {
  // Column names come from this fixed list, never from input; only values are bound.
  std::string sql = "UPDATE programs SET ";
  int n = 0;
  auto col = [&](const char* name, bool set) {
    if (set) {
      sql += fmt::format("{} = ?{}, ", name, ++n);
    }
  };
  col("status", u.status.has_value());
  col("code", u.code.has_value());
  col("code_hash", u.code_hash.has_value());
  col("time_ms", u.time_ms.has_value());
  col("error", u.error.has_value());
  col("failure_cause", u.failure_cause.has_value());
  col("bottleneck", u.bottleneck.has_value());
  col("model", u.model.has_value());
  col("compute_sol_pct", u.compute_sol_pct.has_value());
  col("memory_sol_pct", u.memory_sol_pct.has_value());
  col("sol_pct", u.sol_pct.has_value());
  col("speedup", u.speedup.has_value());
  col("analysis_mode", u.analysis_mode.has_value());
  col("floor_pct", u.floor_pct.has_value());
  col("worker", u.worker.has_value());
  col("gpu_id", u.gpu_id.has_value());
  sql += fmt::format("updated_at = ?{} WHERE id = ?{}", n + 1, n + 2);

  statement s(db_, path_, sql);
  int i = 1;
  auto bind_if = [&](const auto& v) {
    if (v)
      s.bind(i++, *v);
  };
  bind_if(u.status);
  bind_if(u.code);
  bind_if(u.code_hash);
  bind_if(u.time_ms);
  bind_if(u.error);
  bind_if(u.failure_cause);
  bind_if(u.bottleneck);
  bind_if(u.model);
  bind_if(u.compute_sol_pct);
  bind_if(u.memory_sol_pct);
  bind_if(u.sol_pct);
  bind_if(u.speedup);
  bind_if(u.analysis_mode);
  bind_if(u.floor_pct);
  bind_if(u.worker);
  bind_if(u.gpu_id);
  s.bind(i++, iso_utc_now());
  s.bind(i++, id);
  try {
    s.run();
  } catch (const run_error& e) {
    throw run_error(fmt::format("cannot update program '{}': {}", id, e.what()));
  }
  if (sqlite3_changes(db_) == 0)
    throw run_error(fmt::format("program database {}: no program '{}' to update", path_.string(), id));
}

std::optional<program_record> program_db::get_program(const std::string& id) {
  statement s(db_, path_, fmt::format("SELECT {} FROM programs WHERE id = ?1", program_columns));
  s.bind_all(id);
  if (!s.step())
    return std::nullopt;
  return read_program(s);
}

std::vector<program_record> program_db::list_programs(const program_filter& f) {
  std::string sql = fmt::format("SELECT {} FROM programs WHERE 1", program_columns);
  int n = 0;
  if (f.status)
    sql += fmt::format(" AND status = ?{}", ++n);
  if (f.round)
    sql += fmt::format(" AND round = ?{}", ++n);
  if (f.worker)
    sql += fmt::format(" AND worker = ?{}", ++n);
  if (f.failure_cause)
    sql += fmt::format(" AND failure_cause = ?{}", ++n);
  if (f.parent_id)
    sql += fmt::format(" AND parent_id = ?{}", ++n);
  sql += fmt::format(" ORDER BY seq LIMIT ?{}", ++n);
  statement s(db_, path_, sql);
  int i = 1;
  if (f.status)
    s.bind(i++, *f.status);
  if (f.round)
    s.bind(i++, *f.round);
  if (f.worker)
    s.bind(i++, *f.worker);
  if (f.failure_cause)
    s.bind(i++, *f.failure_cause);
  if (f.parent_id)
    s.bind(i++, *f.parent_id);
  s.bind(i++, sql_limit(f.limit.value_or(SIZE_MAX)));
  std::vector<program_record> out;
  while (s.step())
    out.push_back(read_program(s));
  return out;
}

std::vector<program_record> program_db::top_k_verified(std::size_t k) {
  statement s(db_, path_,
              fmt::format("SELECT {} FROM programs WHERE status = 'verified' AND time_ms IS NOT NULL "
                          "ORDER BY time_ms ASC, seq ASC LIMIT ?1",
                          program_columns));
  s.bind_all(sql_limit(k));
  std::vector<program_record> out;
  while (s.step())
    out.push_back(read_program(s));
  return out;
}

std::optional<program_record> program_db::find_by_code_hash(const std::string& hash,
                                                           const std::optional<std::string>& status) {
  statement s(db_, path_,
              fmt::format("SELECT {} FROM programs WHERE code_hash = ?1 AND (?2 IS NULL OR status = ?2) "
                          "ORDER BY seq LIMIT 1",
                          program_columns));
  s.bind_all(hash, status);
  if (!s.step())
    return std::nullopt;
  return read_program(s);
}

std::int64_t program_db::count() {
  statement s(db_, path_, "SELECT COUNT(*) FROM programs");
  return s.step() ? s.i64(0) : 0;
}

std::int64_t program_db::count(const std::string& status) {
  statement s(db_, path_, "SELECT COUNT(*) FROM programs WHERE status = ?1");
  s.bind_all(status);
  return s.step() ? s.i64(0) : 0;
}

std::map<std::string, std::int64_t> program_db::failures_by_cause() {
  statement s(db_, path_,
              "SELECT COALESCE(failure_cause, 'unknown'), COUNT(*) FROM programs WHERE status = 'failed' "
              "GROUP BY 1");
  std::map<std::string, std::int64_t> out;
  while (s.step())
    out[s.text(0)] += s.i64(1);
  return out;
}

void program_db::insert_attempt(const attempt_record& a) {
  statement s(db_, path_,
              "INSERT INTO attempts (round_num, worker_id, program_id, bottleneck_category, root_cause, "
              "recommended_fix, config_changes, time_before_ms, time_after_ms, improvement_pct, "
              "is_improvement, compute_sol_pct, memory_sol_pct, combined_sol_pct, passed_verification, "
              "error_message, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
              "?13, ?14, ?15, ?16, ?17)");
  s.bind_all(a.round_num, a.worker_id, a.program_id, a.bottleneck_category, a.root_cause, a.recommended_fix,
             strict_dump(json(a.config_changes)), a.time_before_ms, a.time_after_ms, a.improvement_pct,
             a.is_improvement, a.compute_sol_pct, a.memory_sol_pct, a.combined_sol_pct,
             a.passed_verification, a.error_message, or_now(a.created_at));
  s.run();
}

std::vector<attempt_record> program_db::list_attempts(std::size_t last_n) {
  statement s(db_, path_,
              fmt::format("SELECT {0} FROM (SELECT {0} FROM attempts ORDER BY seq DESC LIMIT ?1) ORDER BY seq",
                          attempt_columns));
  s.bind_all(sql_limit(last_n));
  std::vector<attempt_record> out;
  while (s.step())
    out.push_back(read_attempt(s, path_));
  return out;
}

void program_db::insert_reflexion(const reflexion_record& r) {
  statement s(db_, path_,
              "INSERT INTO reflexions (round_num, worker_id, program_id, root_cause_diagnosed, fix_applied, "
              "expected_outcome, actual_outcome, performance_delta_pct, was_diagnosis_correct, "
              "was_fix_effective, reasoning, lessons, avoid_patterns, try_patterns, created_at) VALUES "
              "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
  s.bind_all(r.round_num, r.worker_id, r.program_id, r.root_cause_diagnosed, r.fix_applied, r.expected_outcome,
             r.actual_outcome, r.performance_delta_pct, r.was_diagnosis_correct, r.was_fix_effective,
             r.reasoning, strict_dump(json(r.lessons)), strict_dump(json(r.avoid_patterns)),
             strict_dump(json(r.try_patterns)), or_now(r.created_at));
  s.run();
}

std::vector<reflexion_record> program_db::list_reflexions(std::size_t last_n) {
  statement s(db_, path_,
              fmt::format("SELECT {0} FROM (SELECT {0} FROM reflexions ORDER BY seq DESC LIMIT ?1) ORDER BY seq",
                          reflexion_columns));
  s.bind_all(sql_limit(last_n));
  std::vector<reflexion_record> out;
  while (s.step())
    out.push_back(read_reflexion(s, path_));
  return out;
}

void program_db::set_state(const std::string& key, const std::string& value) {
  statement s(db_, path_,
              "INSERT INTO run_state (key, value, updated_at) VALUES (?1, ?2, ?3) "
              "ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at");
  s.bind_all(key, value, iso_utc_now());
  s.run();
}

void program_db::set_states(const std::map<std::string, std::string>& values) {
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& [k, v] : values)
      set_state(k, v);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<std::string> program_db::get_state(const std::string& key) {
  statement s(db_, path_, "SELECT value FROM run_state WHERE key = ?1");
  s.bind_all(key);
  if (!s.step())
    return std::nullopt;
  return s.text(0);
}

std::map<std::string, std::string> program_db::all_state() {
  statement s(db_, path_, "SELECT key, value FROM run_state ORDER BY key");
  std::map<std::string, std::string> out;
  while (s.step())
    out.emplace(s.text(0), s.text(1));
  return out;
}

void program_db::set_state_json(const std::string& key, const json& value) {
  set_state(key, strict_dump(value));
}

std::optional<json> program_db::get_state_json(const std::string& key) {
  auto text = get_state(key);
  if (!text)
    return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded())
    throw run_error(fmt::format("program database {}: run_state '{}' is not JSON", path_.string(), key));
  return j;
}

void program_db::record_llm_call(const llm_call_record& c) {
  statement s(db_, path_,
              "INSERT INTO llm_calls (ts, purpose, model, provider, tokens_in, tokens_out, cost_usd, attempts, "
              "ok, error_kind, candidate_id, latency_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
              "?11, ?12)");
  s.bind_all(or_now(c.ts), c.purpose, c.model, c.provider, c.tokens_in, c.tokens_out, c.cost_usd, c.attempts,
             c.ok, c.error_kind, c.candidate_id, c.latency_ms);
  s.run();
}

std::vector<llm_call_record> program_db::list_llm_calls() {
  statement s(db_, path_, fmt::format("SELECT {} FROM llm_calls ORDER BY seq", llm_columns));
  std::vector<llm_call_record> out;
  while (s.step())
    out.push_back(read_llm_call(s));
  return out;
}

std::vector<llm_usage_row> program_db::llm_usage() {
  statement s(db_, path_,
              "SELECT purpose, model, COUNT(*), SUM(ok = 0), SUM(attempts), SUM(tokens_in), SUM(tokens_out), "
              "TOTAL(cost_usd) FROM llm_calls GROUP BY purpose, model ORDER BY purpose, model");
  std::vector<llm_usage_row> out;
  while (s.step()) {
    llm_usage_row r;
    r.purpose = s.text(0);
    r.model = s.text(1);
    r.calls = s.i64(2);
    r.failed_calls = s.i64(3);
    r.attempts = s.i64(4);
    r.tokens_in = s.i64(5);
    r.tokens_out = s.i64(6);
    r.cost_usd = s.dbl(7);
    out.push_back(std::move(r));
  }
  return out;
}

} // namespace kagent::store
