#include "platform/store/program_db.hpp"

#include <sqlite3.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/store/util.hpp"
#include "tests/store/test_helpers.hpp"

namespace kagent::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr double inf = std::numeric_limits<double>::infinity();

// A raw connection, to check what is really in the file independently of program_db.
class raw_db {
public:
  explicit raw_db(const fs::path& p) {
    if (sqlite3_open_v2(p.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      throw std::runtime_error("raw open failed");
    sqlite3_busy_timeout(db_, 5000);
  }
  ~raw_db() { sqlite3_close(db_); }
  std::string scalar(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(sqlite3_errmsg(db_));
    std::string out = "<none>";
    if (sqlite3_step(s) == SQLITE_ROW) {
      const auto* t = sqlite3_column_text(s, 0);
      out = t ? reinterpret_cast<const char*>(t) : "<null>";
    }
    sqlite3_finalize(s);
    return out;
  }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string m = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error(m);
    }
  }

private:
  sqlite3* db_ = nullptr;
};

program_record make_program(const std::string& id, std::optional<double> time, const std::string& status = "verified") {
  program_record p;
  p.id = id;
  p.parent_id = "initial";
  p.round = 1;
  p.worker = 0;
  p.gpu_id = 0;
  p.status = status;
  p.code = fmt::format("def kernel_{}(): pass\n", id);
  p.code_hash = sha256_hex(p.code);
  p.time_ms = time;
  return p;
}

std::vector<std::string> ids(const std::vector<program_record>& v) {
  std::vector<std::string> out;
  for (const auto& p : v)
    out.push_back(p.id);
  return out;
}

class program_db_test : public test::scratch_dir {
protected:
  fs::path db_path() const { return dir_ / "program.db"; }
};

TEST_F(program_db_test, CreatesSchemaWithAllTables) {
  auto db = program_db::open(db_path());
  raw_db raw(db_path());
  for (const char* table : {"programs", "attempts", "reflexions", "run_state", "llm_calls"}) {
    EXPECT_EQ(raw.scalar(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") +
                         table + "'"),
              "1")
        << table;
  }
  EXPECT_EQ(raw.scalar("PRAGMA user_version"), std::to_string(program_db::schema_version));
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM programs"), "0");
}

TEST_F(program_db_test, WalModeIsOnAndPersists) {
  {
    auto db = program_db::open(db_path());
    EXPECT_EQ(db.journal_mode(), "wal");
  }
  raw_db raw(db_path());
  EXPECT_EQ(raw.scalar("PRAGMA journal_mode"), "wal");
}

TEST_F(program_db_test, InsertAndGetRoundTripsEveryColumn) {
  auto db = program_db::open(db_path());
  program_record p = make_program("r2_c1", 0.125);
  p.round = 2;
  p.worker = 3;
  p.gpu_id = 5;
  p.error = "warning: slow";
  p.bottleneck = "memory";
  p.model = "claude-x";
  p.compute_sol_pct = 12.5;
  p.memory_sol_pct = 80.25;
  p.sol_pct = 80.25;
  p.speedup = 1.5;
  p.analysis_mode = "synthetic";
  p.created_at = "2026-12-02T12:00:00.000Z";
  db.insert_program(p);

  auto got = db.get_program("r2_c1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, "r2_c1");
  EXPECT_EQ(got->parent_id, "initial");
  EXPECT_EQ(got->round, 2);
  EXPECT_EQ(got->worker, 3);
  EXPECT_EQ(got->gpu_id, 5);
  EXPECT_EQ(got->status, "verified");
  EXPECT_EQ(got->code, p.code);
  EXPECT_EQ(got->time_ms, 0.125);
  EXPECT_EQ(got->error, "warning: slow");
  EXPECT_EQ(got->failure_cause, std::nullopt);
  EXPECT_EQ(got->code_hash, sha256_hex(p.code));
  EXPECT_EQ(got->bottleneck, "memory");
  EXPECT_EQ(got->model, "claude-x");
  EXPECT_EQ(got->compute_sol_pct, 12.5);
  EXPECT_EQ(got->memory_sol_pct, 80.25);
  EXPECT_EQ(got->sol_pct, 80.25);
  EXPECT_EQ(got->speedup, 1.5);
  EXPECT_EQ(got->analysis_mode, "synthetic");
  EXPECT_EQ(got->created_at, "2026-12-02T12:00:00.000Z");
  EXPECT_EQ(got->seq, 1);
  EXPECT_FALSE(db.get_program("nope"));
}

TEST_F(program_db_test, CreatedAtDefaultsToIsoUtcNow) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("a", 1.0));
  EXPECT_THAT(db.get_program("a")->created_at,
              ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
}

TEST_F(program_db_test, UnmeasuredAndNonFiniteTimesAreStoredAsNull) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("none", std::nullopt));
  db.insert_program(make_program("inf", inf));
  db.insert_program(make_program("nan", std::numeric_limits<double>::quiet_NaN()));
  raw_db raw(db_path());
  for (const char* id : {"none", "inf", "nan"}) {
    EXPECT_EQ(raw.scalar(std::string("SELECT typeof(time_ms) FROM programs WHERE id='") + id + "'"), "null") << id;
    EXPECT_EQ(db.get_program(id)->time_ms, std::nullopt) << id;
  }
  db.update_program("none", {.time_ms = inf});
  EXPECT_EQ(raw.scalar("SELECT typeof(time_ms) FROM programs WHERE id='none'"), "null");
  EXPECT_TRUE(db.top_k_verified(10).empty());
}

TEST_F(program_db_test, InitialKernelTimeIsStored) {
  // SPEC §14 B.87: the measured initial time lives in the initial entry, so a run where nothing
  // improves still reports a finite best time.
  auto db = program_db::open(db_path());
  program_record init = make_program("initial", 2.5);
  init.parent_id.reset();
  init.round = 0;
  init.worker = -1;
  db.insert_program(init);
  auto top = db.top_k_verified(5);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].id, "initial");
  EXPECT_EQ(top[0].time_ms, 2.5);
  EXPECT_EQ(top[0].worker, -1);
  EXPECT_EQ(top[0].parent_id, std::nullopt);
}

TEST_F(program_db_test, DuplicateIdIsRejectedAndOriginalKept) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("r1_c0", 1.0));
  try {
    db.insert_program(make_program("r1_c0", 0.5));
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'r1_c0' already exists"));
    EXPECT_THAT(e.what(), HasSubstr(db_path().string()));
  }
  EXPECT_EQ(db.count(), 1);
  EXPECT_EQ(db.get_program("r1_c0")->time_ms, 1.0);
}

TEST_F(program_db_test, UnknownStatusIsRejectedBySchema) {
  auto db = program_db::open(db_path());
  try {
    db.insert_program(make_program("x", 1.0, "great"));
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'x'"));
    EXPECT_THAT(e.what(), HasSubstr("CHECK constraint"));
  }
  EXPECT_EQ(db.count(), 0);
  db.insert_program(make_program("y", 1.0));
  EXPECT_THROW(db.update_program("y", {.status = "bogus"}), run_error);
  EXPECT_EQ(db.get_program("y")->status, "verified");
}

TEST_F(program_db_test, TextIsBoundNeverSplicedIntoSql) {
  auto db = program_db::open(db_path());
  program_record p = make_program("x'); DROP TABLE programs; --", 1.0);
  p.code = "s = \"'\"; -- ; DROP TABLE programs;\n";
  p.error = "it's \"quoted\"";
  db.insert_program(p);
  auto got = db.get_program(p.id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->code, p.code);
  EXPECT_EQ(got->error, p.error);
  EXPECT_EQ(db.count(), 1);
  db.set_state("k'; DELETE FROM run_state; --", "v'v");
  EXPECT_EQ(db.get_state("k'; DELETE FROM run_state; --"), "v'v");
}

TEST_F(program_db_test, UpdateChangesOnlyTheGivenFields) {
  auto db = program_db::open(db_path());
  program_record p = make_program("r1_c2", std::nullopt, "pending");
  p.model = "m1";
  db.insert_program(p);
  db.update_program("r1_c2", {.status = "failed", .error = "AssertionError: mismatch", .failure_cause = "verification"});
  auto got = db.get_program("r1_c2");
  EXPECT_EQ(got->status, "failed");
  EXPECT_EQ(got->error, "AssertionError: mismatch");
  EXPECT_EQ(got->failure_cause, "verification");
  EXPECT_EQ(got->model, "m1");
  EXPECT_EQ(got->code, p.code);
  EXPECT_EQ(got->time_ms, std::nullopt);

  db.update_program("r1_c2", {.status = "verified", .code = "new code", .code_hash = "h2", .time_ms = 0.75,
                              .sol_pct = 55.0, .speedup = 2.0});
  got = db.get_program("r1_c2");
  EXPECT_EQ(got->status, "verified");
  EXPECT_EQ(got->code, "new code");
  EXPECT_EQ(got->code_hash, "h2");
  EXPECT_EQ(got->time_ms, 0.75);
  EXPECT_EQ(got->sol_pct, 55.0);
  EXPECT_EQ(got->speedup, 2.0);
  EXPECT_EQ(got->error, "AssertionError: mismatch");  // untouched

  try {
    db.update_program("missing", {.status = "failed"});
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no program 'missing'"));
  }
}

TEST_F(program_db_test, ListProgramsFiltersInInsertionOrder) {
  auto db = program_db::open(db_path());
  auto a = make_program("r1_c0", 2.0);
  auto b = make_program("r1_c1", std::nullopt, "failed");
  b.failure_cause = "timeout";
  b.worker = 1;
  auto c = make_program("r2_c0", 1.0);
  c.round = 2;
  c.parent_id = "r1_c0";
  auto d = make_program("r2_c1", std::nullopt, "failed");
  d.round = 2;
  d.failure_cause = "llm";
  for (const auto& p : {a, b, c, d})
    db.insert_program(p);

  EXPECT_EQ(ids(db.list_programs()), (std::vector<std::string>{"r1_c0", "r1_c1", "r2_c0", "r2_c1"}));
  EXPECT_EQ(ids(db.list_programs({.status = "failed"})), (std::vector<std::string>{"r1_c1", "r2_c1"}));
  EXPECT_EQ(ids(db.list_programs({.round = 2})), (std::vector<std::string>{"r2_c0", "r2_c1"}));
  EXPECT_EQ(ids(db.list_programs({.worker = 1})), (std::vector<std::string>{"r1_c1"}));
  EXPECT_EQ(ids(db.list_programs({.failure_cause = "llm"})), (std::vector<std::string>{"r2_c1"}));
  EXPECT_EQ(ids(db.list_programs({.parent_id = "r1_c0"})), (std::vector<std::string>{"r2_c0"}));
  EXPECT_EQ(ids(db.list_programs({.status = "failed", .round = 1})), (std::vector<std::string>{"r1_c1"}));
  EXPECT_EQ(ids(db.list_programs({.limit = 2})), (std::vector<std::string>{"r1_c0", "r1_c1"}));
  EXPECT_TRUE(db.list_programs({.status = "pending"}).empty());
}

TEST_F(program_db_test, TopKOrdersByTimeThenInsertionOrder) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("slow", 3.0));
  db.insert_program(make_program("tie_first", 1.0));
  db.insert_program(make_program("mid", 2.0));
  db.insert_program(make_program("failed_fast", 0.1, "failed"));
  db.insert_program(make_program("pending_fast", 0.1, "pending"));
  db.insert_program(make_program("unmeasured", std::nullopt));
  db.insert_program(make_program("tie_second", 1.0));

  EXPECT_EQ(ids(db.top_k_verified(10)), (std::vector<std::string>{"tie_first", "tie_second", "mid", "slow"}));
  EXPECT_EQ(ids(db.top_k_verified(2)), (std::vector<std::string>{"tie_first", "tie_second"}));
  EXPECT_TRUE(db.top_k_verified(0).empty());
  // A later update can move a program to the front.
  db.update_program("slow", {.time_ms = 0.5});
  EXPECT_EQ(ids(db.top_k_verified(1)), (std::vector<std::string>{"slow"}));
}

TEST_F(program_db_test, FindByCodeHashReturnsTheEarliestMatch) {
  auto db = program_db::open(db_path());
  auto a = make_program("a", 1.0);
  auto b = make_program("b", std::nullopt, "failed");
  b.code = a.code;
  b.code_hash = a.code_hash;
  b.failure_cause = "duplicate";
  db.insert_program(a);
  db.insert_program(b);
  db.insert_program(make_program("c", 2.0));
  auto hit = db.find_by_code_hash(sha256_hex(a.code));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->id, "a");
  EXPECT_FALSE(db.find_by_code_hash(sha256_hex("something else")));
}

TEST_F(program_db_test, Sha256MatchesKnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(program_db_test, CountsAndFailuresByCause) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("ok", 1.0));
  auto f1 = make_program("f1", std::nullopt, "failed");
  f1.failure_cause = "timeout";
  auto f2 = make_program("f2", std::nullopt, "failed");
  f2.failure_cause = "timeout";
  auto f3 = make_program("f3", std::nullopt, "failed");
  f3.failure_cause = "crash";
  auto f4 = make_program("f4", std::nullopt, "failed");
  db.insert_program(f1);
  db.insert_program(f2);
  db.insert_program(f3);
  db.insert_program(f4);
  db.insert_program(make_program("p", std::nullopt, "pending"));
  EXPECT_EQ(db.count(), 6);
  EXPECT_EQ(db.count("failed"), 4);
  EXPECT_EQ(db.count("verified"), 1);
  EXPECT_EQ(db.count("pending"), 1);
  EXPECT_EQ(db.failures_by_cause(),
            (std::map<std::string, std::int64_t>{{"crash", 1}, {"timeout", 2}, {"unknown", 1}}));
}

attempt_record make_attempt(int round, int worker) {
  attempt_record a;
  a.round_num = round;
  a.worker_id = worker;
  a.program_id = fmt::format("r{}_c{}", round, worker);
  a.bottleneck_category = "memory";
  a.root_cause = "uncoalesced loads";
  a.recommended_fix = "vectorize";
  a.config_changes = {{"BLOCK_SIZE", "256"}, {"num_warps", "8"}};
  a.time_before_ms = 2.0;
  a.time_after_ms = 1.0;
  a.improvement_pct = 50.0;
  a.is_improvement = true;
  a.compute_sol_pct = 10;
  a.memory_sol_pct = 70;
  a.combined_sol_pct = 70;
  a.passed_verification = true;
  return a;
}

TEST_F(program_db_test, AttemptsRoundTripAndLastN) {
  auto db = program_db::open(db_path());
  for (int r = 1; r <= 4; ++r)
    db.insert_attempt(make_attempt(r, r % 2));
  auto failed = make_attempt(5, 1);
  failed.passed_verification = false;
  failed.is_improvement = false;
  failed.time_after_ms.reset();
  failed.improvement_pct = -inf;  // stored as NULL, never as a non-standard token
  failed.error_message = "RuntimeError: illegal memory access";
  failed.config_changes.clear();
  db.insert_attempt(failed);

  auto all = db.list_attempts();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].round_num, 1);
  EXPECT_EQ(all[0].config_changes, (std::map<std::string, std::string>{{"BLOCK_SIZE", "256"}, {"num_warps", "8"}}));
  EXPECT_EQ(all[0].program_id, "r1_c1");
  EXPECT_EQ(all[0].time_before_ms, 2.0);
  EXPECT_TRUE(all[0].is_improvement);

  auto last2 = db.list_attempts(2);
  ASSERT_EQ(last2.size(), 2u);
  EXPECT_EQ(last2[0].round_num, 4);  // oldest first within the window
  EXPECT_EQ(last2[1].round_num, 5);
  EXPECT_FALSE(last2[1].passed_verification);
  EXPECT_EQ(last2[1].time_after_ms, std::nullopt);
  EXPECT_EQ(last2[1].improvement_pct, std::nullopt);
  EXPECT_EQ(last2[1].error_message, "RuntimeError: illegal memory access");
  EXPECT_TRUE(last2[1].config_changes.empty());
  EXPECT_TRUE(db.list_attempts(0).empty());
}

TEST_F(program_db_test, AttemptJsonUsesSpecKeysAndDropsUnknownOnes) {
  const auto a = make_attempt(3, 2);
  json j = to_json(a);
  for (const char* key : {"round_num", "worker_id", "bottleneck_category", "root_cause", "recommended_fix",
                          "config_changes", "time_before_ms", "time_after_ms", "improvement_pct", "is_improvement",
                          "compute_sol_pct", "memory_sol_pct", "combined_sol_pct", "passed_verification",
                          "error_message"})
    EXPECT_TRUE(j.contains(key)) << key;
  j["unexpected"] = 1;
  j["config_changes"]["num_stages"] = 3;  // a number from an LLM is kept as text
  auto back = attempt_from_json(j);
  EXPECT_EQ(back.round_num, 3);
  EXPECT_EQ(back.worker_id, 2);
  EXPECT_EQ(back.config_changes.at("num_stages"), "3");
  EXPECT_EQ(back.combined_sol_pct, 70);
  EXPECT_EQ(back.program_id, "r3_c2");
  EXPECT_THROW(attempt_from_json(json{{"round_num", "three"}}), run_error);
  EXPECT_THROW(attempt_from_json(json::array()), run_error);
}

reflexion_record make_reflexion(int round) {
  reflexion_record r;
  r.round_num = round;
  r.worker_id = 1;
  r.program_id = fmt::format("r{}_c1", round);
  r.root_cause_diagnosed = "bank conflicts";
  r.fix_applied = "padding";
  r.expected_outcome = "faster";
  r.actual_outcome = "slower";
  r.performance_delta_pct = -3.5;
  r.was_diagnosis_correct = true;
  r.was_fix_effective = false;
  r.reasoning = "padding increased register pressure";
  r.lessons = {"measure first"};
  r.avoid_patterns = {"padding by 1"};
  r.try_patterns = {"swizzle", "vectorized loads"};
  return r;
}

TEST_F(program_db_test, ReflexionsRoundTripAndLastN) {
  auto db = program_db::open(db_path());
  for (int r = 1; r <= 3; ++r)
    db.insert_reflexion(make_reflexion(r));
  auto all = db.list_reflexions();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].round_num, 3);
  EXPECT_EQ(all[0].try_patterns, (std::vector<std::string>{"swizzle", "vectorized loads"}));
  EXPECT_EQ(all[0].avoid_patterns, (std::vector<std::string>{"padding by 1"}));
  EXPECT_EQ(all[0].lessons, (std::vector<std::string>{"measure first"}));
  EXPECT_EQ(all[0].performance_delta_pct, -3.5);
  EXPECT_TRUE(all[0].was_diagnosis_correct);
  EXPECT_FALSE(all[0].was_fix_effective);
  EXPECT_EQ(all[0].worker_id, 1);
  auto last1 = db.list_reflexions(1);
  ASSERT_EQ(last1.size(), 1u);
  EXPECT_EQ(last1[0].round_num, 3);

  json j = to_json(make_reflexion(7));
  EXPECT_EQ(j["lessons"], json::array({"measure first"}));
  auto back = reflexion_from_json(j);
  EXPECT_EQ(back.round_num, 7);
  EXPECT_EQ(back.reasoning, "padding increased register pressure");
  EXPECT_EQ(back.try_patterns.size(), 2u);
}

TEST_F(program_db_test, RunStateRoundTrips) {
  auto db = program_db::open(db_path());
  EXPECT_EQ(db.get_state("round"), std::nullopt);
  db.set_state("round", "3");
  db.set_state("round", "4");
  EXPECT_EQ(db.get_state("round"), "4");
  db.set_states({{"beam", "[\"r3_c1\",\"r4_c0\"]"}, {"eager_ms", "1.25"}});
  db.set_state_json("analysis_mode", json{{"0", "profiled"}, {"1", "synthetic"}});
  db.set_state_json("compile_ms", json(inf));  // not measured: null, strict JSON
  EXPECT_EQ(db.get_state_json("analysis_mode"), (json{{"0", "profiled"}, {"1", "synthetic"}}));
  EXPECT_EQ(db.get_state("compile_ms"), "null");
  EXPECT_EQ(db.get_state_json("missing"), std::nullopt);
  db.set_state("not_json", "{");
  EXPECT_THROW(db.get_state_json("not_json"), run_error);
  EXPECT_EQ(db.all_state().size(), 6u);
  EXPECT_EQ(db.all_state().at("beam"), "[\"r3_c1\",\"r4_c0\"]");
}

TEST_F(program_db_test, LlmCallsAndUsageTotals) {
  auto db = program_db::open(db_path());
  llm_call_record c;
  c.purpose = "optimize";
  c.model = "m1";
  c.tokens_in = 1000;
  c.tokens_out = 200;
  c.cost_usd = 0.01;
  c.candidate_id = "r1_c0";
  db.record_llm_call(c);
  c.tokens_in = 500;
  c.tokens_out = 100;
  c.cost_usd = 0.02;
  c.attempts = 3;
  db.record_llm_call(c);
  c.ok = false;
  c.error_kind = "quota";
  c.tokens_in = 0;
  c.tokens_out = 0;
  c.cost_usd.reset();
  c.attempts = 1;
  db.record_llm_call(c);
  llm_call_record b;
  b.purpose = "bottleneck";
  b.model = "m2";
  b.tokens_in = 10;
  b.tokens_out = 5;
  db.record_llm_call(b);

  auto calls = db.list_llm_calls();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[2].error_kind, "quota");
  EXPECT_FALSE(calls[2].ok);
  EXPECT_EQ(calls[0].candidate_id, "r1_c0");
  EXPECT_FALSE(calls[3].ts.empty());

  auto usage = db.llm_usage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].purpose, "bottleneck");
  EXPECT_EQ(usage[0].calls, 1);
  EXPECT_EQ(usage[0].cost_usd, 0.0);
  EXPECT_EQ(usage[1].purpose, "optimize");
  EXPECT_EQ(usage[1].model, "m1");
  EXPECT_EQ(usage[1].calls, 3);
  EXPECT_EQ(usage[1].failed_calls, 1);
  EXPECT_EQ(usage[1].attempts, 5);
  EXPECT_EQ(usage[1].tokens_in, 1500);
  EXPECT_EQ(usage[1].tokens_out, 300);
  EXPECT_NEAR(usage[1].cost_usd, 0.03, 1e-12);
}

TEST_F(program_db_test, ReopenReadsEverythingBack) {
  // Simulated --resume: write, close, reopen, read it all back.
  {
    auto db = program_db::open(db_path());
    auto init = make_program("initial", 4.0);
    init.round = 0;
    db.insert_program(init);
    db.insert_program(make_program("r1_c0", 2.0));
    db.insert_program(make_program("r1_c1", std::nullopt, "pending"));
    db.insert_attempt(make_attempt(1, 0));
    db.insert_reflexion(make_reflexion(1));
    db.set_state("round", "1");
    llm_call_record c;
    c.purpose = "optimize";
    c.model = "m";
    db.record_llm_call(c);
  }
  auto db = program_db::open(db_path());
  EXPECT_EQ(db.count(), 3);
  EXPECT_EQ(ids(db.top_k_verified(5)), (std::vector<std::string>{"r1_c0", "initial"}));
  EXPECT_EQ(db.get_program("r1_c1")->status, "pending");
  EXPECT_EQ(db.list_attempts().size(), 1u);
  EXPECT_EQ(db.list_reflexions().size(), 1u);
  EXPECT_EQ(db.get_state("round"), "1");
  EXPECT_EQ(db.list_llm_calls().size(), 1u);
  // Insertion order carries on after the reopen.
  db.insert_program(make_program("r2_c0", 2.0));
  EXPECT_EQ(ids(db.top_k_verified(5)), (std::vector<std::string>{"r1_c0", "r2_c0", "initial"}));
  EXPECT_EQ(db.get_program("r2_c0")->seq, 4);
}

TEST_F(program_db_test, EachWriteIsCommittedBeforeReturning) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("a", 1.0));
  db.set_state("round", "7");
  // A second connection sees the rows while the writer is still open: nothing waits in a
  // transaction of the writer.
  raw_db raw(db_path());
  EXPECT_EQ(raw.scalar("SELECT count(*) FROM programs"), "1");
  EXPECT_EQ(raw.scalar("SELECT value FROM run_state WHERE key='round'"), "7");
}

TEST_F(program_db_test, ReaderIsNotBlockedByAnOpenWriteTransaction) {
  auto db = program_db::open(db_path());
  db.insert_program(make_program("a", 1.0));
  raw_db writer(db_path());
  writer.exec("BEGIN IMMEDIATE");
  writer.exec("INSERT INTO programs (id, seq, round, status, code, created_at, updated_at) "
              "VALUES ('b', 2, 1, 'verified', 'x', 't', 't')");
  // In WAL mode the reader sees the last committed state at once instead of waiting.
  auto reader = program_db::open(db_path(), program_db::mode::read_only);
  EXPECT_EQ(reader.count(), 1);
  writer.exec("COMMIT");
  EXPECT_EQ(reader.count(), 2);
}

TEST_F(program_db_test, ConcurrentReaderWhileWriting) {
  auto db = program_db::open(db_path());
  constexpr int n = 150;
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<bool> started{false};
  std::string reader_error;
  std::thread reader([&] {
    try {
      auto r = program_db::open(db_path(), program_db::mode::read_only);
      std::int64_t last = 0;
      started = true;
      do {
        const auto c = r.count();
        if (c < last)
          throw std::runtime_error("count went backwards");
        last = c;
        (void)r.top_k_verified(3);
        ++reads;
      } while (!done.load());
    } catch (const std::exception& e) {
      reader_error = e.what();
      started = true;  // after the write above, so the main thread may read it once joined
    }
  });
  while (!started.load())
    std::this_thread::yield();
  for (int i = 0; i < n; ++i)
    db.insert_program(make_program(fmt::format("p{}", i), 1.0 + i));
  done = true;
  reader.join();
  EXPECT_EQ(reader_error, "");
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(db.count(), n);
}

TEST_F(program_db_test, OpenErrorsNameThePath) {
  const fs::path junk = dir_ / "junk.db";
  std::ofstream(junk) << "this is not a database, just some text that is long enough to look like a header";
  try {
    program_db::open(junk);
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(junk.string()));
  }
  const fs::path missing_dir = dir_ / "no" / "such" / "program.db";
  try {
    program_db::open(missing_dir);
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open program database " + missing_dir.string()));
  }
  EXPECT_FALSE(fs::exists(dir_ / "no"));
  EXPECT_THROW(program_db::open(dir_ / "absent.db", program_db::mode::read_only), run_error);
  EXPECT_FALSE(fs::exists(dir_ / "absent.db"));
}

TEST_F(program_db_test, NewerSchemaIsRefused) {
  { auto db = program_db::open(db_path()); }
  {
    raw_db raw(db_path());
    raw.exec("PRAGMA user_version=99");
  }
  try {
    program_db::open(db_path());
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("schema version 99"));
  }
}

TEST_F(program_db_test, MovedFromHandleIsInert) {
  auto a = program_db::open(db_path());
  a.insert_program(make_program("a", 1.0));
  program_db b = std::move(a);
  EXPECT_EQ(b.count(), 1);
  program_db c = program_db::open(dir_ / "other.db");
  c = std::move(b);
  EXPECT_EQ(c.count(), 1);
  EXPECT_EQ(c.path(), db_path());
}

} // namespace
} // namespace kagent::store

namespace kagent::store {
namespace {


} // namespace
} // namespace kagent::store
