#include "platform/store/run_directory.hpp"
#include "platform/store/run_lock.hpp"

#include <unistd.h>

#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/store/event_log.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/util.hpp"
#include "tests/store/test_helpers.hpp"
#include "platform/common/files.hpp"

namespace kagent::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using nlohmann::json;

class run_directory_test : public test::scratch_dir {
protected:
  fs::path base() const { return dir_ / ".optimize"; }
};

bool has_tmp_files(const fs::path& dir) {
  for (const auto& name : test::list_tree(dir))
    if (name.find(".tmp.") != std::string::npos)
      return true;
  return false;
}

TEST_F(run_directory_test, CreateLaysOutTheRunDirectory) {
  const std::string yaml = "strategy: beam\nmax_rounds: 3\n";
  auto rd = run_directory::create(base(), "noop-matvec", yaml);
  EXPECT_THAT(rd.run_id(), MatchesRegex("[0-9]{8}-[0-9]{6}-noop-matvec-[0-9a-f]{4}"));
  EXPECT_EQ(rd.path(), base() / rd.run_id());
  EXPECT_TRUE(rd.path().is_absolute());
  EXPECT_EQ(read_file(rd.config_path()), yaml);
  EXPECT_EQ(rd.read_config(), yaml);
  EXPECT_TRUE(fs::is_regular_file(rd.events_path()));
  EXPECT_EQ(fs::file_size(rd.events_path()), 0u);
  EXPECT_TRUE(fs::is_directory(rd.candidates_path()));
  EXPECT_TRUE(fs::is_directory(rd.output_path()));
  EXPECT_EQ(rd.best_kernel_path(), rd.path() / "output" / "best_kernel.py");
  EXPECT_EQ(rd.summary_path(), rd.path() / "summary.json");
  EXPECT_EQ(rd.report_path(), rd.path() / "report.html");
  auto db = program_db::open(rd.program_db_path(), program_db::mode::read_only);
  EXPECT_EQ(db.count(), 0);
  EXPECT_FALSE(has_tmp_files(rd.path()));
}

TEST_F(run_directory_test, SameHintGivesDistinctIds) {
  std::set<std::string> seen;
  for (int i = 0; i < 6; ++i) {
    auto rd = run_directory::create(base(), "noop-matvec", "");
    EXPECT_TRUE(seen.insert(rd.run_id()).second) << rd.run_id();
  }
  std::size_t dirs = 0;
  for (const auto& e : fs::directory_iterator(base()))
    dirs += e.is_directory();
  EXPECT_EQ(dirs, 6u);
}

TEST_F(run_directory_test, RunIdsSortByStartTimeAndSanitizeTheHint) {
  using namespace std::chrono;
  const system_clock::time_point t1{seconds{1796213730}};  // 2026-12-02T12:15:30Z
  const auto t2 = t1 + seconds(1);
  EXPECT_EQ(run_directory::make_run_id("noop-matvec", t1, 0xab), "20261202-121530-noop-matvec-00ab");
  EXPECT_LT(run_directory::make_run_id("zzz", t1, 0xffff), run_directory::make_run_id("aaa", t2, 0));
  EXPECT_EQ(run_directory::make_run_id("my kernel/../x", t1, 1), "20261202-121530-my-kernel-..-x-0001");
  EXPECT_EQ(run_directory::make_run_id("", t1, 1), "20261202-121530-run-0001");
  EXPECT_EQ(run_directory::make_run_id("/../", t1, 1), "20261202-121530-run-0001");
  EXPECT_EQ(run_directory::make_run_id(std::string(200, 'a'), t1, 2).size(),
            std::string("20261202-121530-").size() + 48 + 5);
}

TEST_F(run_directory_test, OpenExistingFindsTheSameRun) {
  auto rd = run_directory::create(base(), "resume-me", "k: v\n");
  {
    auto db = program_db::open(rd.program_db_path());
    db.set_state("round", "2");
  }
  auto again = run_directory::open_existing(rd.path());
  EXPECT_EQ(again.run_id(), rd.run_id());
  EXPECT_EQ(again.path(), rd.path());
  EXPECT_EQ(again.read_config(), "k: v\n");
  auto db = program_db::open(again.program_db_path());
  EXPECT_EQ(db.get_state("round"), "2");
  // A trailing slash, as shells complete it, names the same run.
  EXPECT_EQ(run_directory::open_existing(rd.path().string() + "/").run_id(), rd.run_id());
}

TEST_F(run_directory_test, OpenExistingOnANonRunDirectoryIsAClearUserError) {
  auto expect_error = [](const fs::path& p, const std::string& fragment) {
    try {
      run_directory::open_existing(p);
      ADD_FAILURE() << "expected user_error for " << p;
    } catch (const user_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("not a run directory"));
      EXPECT_THAT(e.what(), HasSubstr(p.string()));
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
  };
  expect_error(dir_ / "missing", "does not exist");
  std::ofstream(dir_ / "file.txt") << "x";
  expect_error(dir_ / "file.txt", "is not a directory");
  fs::create_directories(dir_ / "empty");
  expect_error(dir_ / "empty", "has no config.yaml");

  auto rd = run_directory::create(base(), "x", "");
  fs::remove(rd.program_db_path());
  expect_error(rd.path(), "has no program.db");
  std::ofstream(rd.program_db_path()) << "not sqlite";
  expect_error(rd.path(), "is not an SQLite database");
}

TEST_F(run_directory_test, CreateFailureNamesThePathAndLeavesNothing) {
  std::ofstream(dir_ / "blocker") << "a file where a directory should be";
  try {
    run_directory::create(dir_ / "blocker" / "runs", "x", "");
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "blocker" / "runs").string()));
  }
  EXPECT_EQ(read_file(dir_ / "blocker"), "a file where a directory should be");
}

TEST_F(run_directory_test, CandidateFilesAreWrittenAtomically) {
  auto rd = run_directory::create(base(), "c", "");
  const auto dir = rd.candidate_dir("r1_c3");
  EXPECT_EQ(dir, rd.candidates_path() / "r1_c3");
  EXPECT_TRUE(fs::is_directory(dir));
  const auto file = rd.write_candidate_file("r1_c3", "kernel.py", "print('v1')\n");
  EXPECT_EQ(file, dir / "kernel.py");
  EXPECT_EQ(read_file(file), "print('v1')\n");
  rd.write_candidate_file("r1_c3", "kernel.py", "print('v2')\n");
  EXPECT_EQ(read_file(file), "print('v2')\n");
  rd.write_candidate_file("r1_c3", "opt_prompt.txt", std::string(1 << 20, 'p'));
  EXPECT_EQ(fs::file_size(dir / "opt_prompt.txt"), 1u << 20);
  EXPECT_FALSE(has_tmp_files(rd.path()));
}

TEST_F(run_directory_test, UnsafeNamesCannotEscapeTheRunDirectory) {
  auto rd = run_directory::create(base(), "c", "");
  const auto before = test::list_tree(dir_);
  EXPECT_THROW(rd.candidate_dir("../escape"), run_error);
  EXPECT_THROW(rd.candidate_dir(".."), run_error);
  EXPECT_THROW(rd.candidate_dir(""), run_error);
  EXPECT_THROW(rd.write_candidate_file("ok", "../../x.py", "x"), run_error);
  EXPECT_THROW(rd.write_candidate_file("ok", "/etc/passwd", "x"), run_error);
  EXPECT_THROW(rd.write_file("../x", "x"), run_error);
  EXPECT_THROW(rd.write_file("program.db", "x"), run_error);
  EXPECT_THROW(rd.write_file("events.jsonl", "x"), run_error);
  EXPECT_EQ(test::list_tree(dir_), before);
  auto db = program_db::open(rd.program_db_path());
  EXPECT_EQ(db.count(), 0);
}

TEST_F(run_directory_test, SummaryAndBestKernel) {
  auto rd = run_directory::create(base(), "s", "");
  rd.write_best_kernel("def best(): pass\n");
  EXPECT_EQ(read_file(rd.best_kernel_path()), "def best(): pass\n");
  json summary{{"success", false},
               {"best_time_ms", std::numeric_limits<double>::infinity()},
               {"reply", std::string("bad utf8 \xff here")},
               {"total_rounds", 0}};
  rd.write_summary(summary);
  const std::string text = read_file(rd.summary_path());
  EXPECT_EQ(text.find("Infinity"), std::string::npos);
  json back = json::parse(text);  // strict JSON: parse throws otherwise
  EXPECT_TRUE(back["best_time_ms"].is_null());
  EXPECT_EQ(back["total_rounds"], 0);
  rd.write_file("report.html", "<html></html>");
  EXPECT_EQ(read_file(rd.report_path()), "<html></html>");
  EXPECT_FALSE(has_tmp_files(rd.path()));
}

TEST_F(run_directory_test, AtomicWriteReplacesWholeFileAndLeavesNoTemporary) {
  const fs::path f = dir_ / "x.txt";
  write_file_atomic(f, "first");
  write_file_atomic(f, "second, longer");
  EXPECT_EQ(read_file(f), "second, longer");
  EXPECT_EQ(test::list_tree(dir_), (std::vector<std::string>{"x.txt"}));
  try {
    write_file_atomic(dir_ / "nodir" / "y.txt", "z");
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr((dir_ / "nodir" / "y.txt").string()));
  }
  EXPECT_EQ(test::list_tree(dir_), (std::vector<std::string>{"x.txt"}));
}

TEST_F(run_directory_test, IsoUtcFormat) {
  using namespace std::chrono;
  const system_clock::time_point t{milliseconds{1796213730045}};
  EXPECT_EQ(iso_utc(t), "2026-12-02T12:15:30.045Z");
  EXPECT_THAT(iso_utc_now(), MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"));
}

TEST_F(run_directory_test, EachRunHasItsOwnDatabase) {
  // SPEC §14 B.108: a new run never reads another run's programs.
  auto first = run_directory::create(base(), "same", "");
  {
    auto db = program_db::open(first.program_db_path());
    program_record p;
    p.id = "initial";
    p.status = "verified";
    p.code = "x";
    p.time_ms = 1.0;
    db.insert_program(p);
  }
  auto second = run_directory::create(base(), "same", "");
  auto db = program_db::open(second.program_db_path());
  EXPECT_EQ(db.count(), 0);
  EXPECT_TRUE(db.top_k_verified(5).empty());
}

TEST_F(run_directory_test, RunLockAdmitsOneOwnerAtATime) {
  auto rd = run_directory::create(base(), "locked", "");
  {
    run_lock first(rd.path());
    try {
      run_lock second(rd.path());
      FAIL() << "expected run_error";
    } catch (const run_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("is in use by another kagent-actors process"));
      EXPECT_THAT(e.what(), HasSubstr(rd.path().string()));
      EXPECT_THAT(e.what(), HasSubstr("(pid " + std::to_string(::getpid()) + ")"));
    }
    run_lock moved(std::move(first));
    EXPECT_THROW(run_lock(rd.path()), run_error);
  }
  run_lock again(rd.path());  // released with its holder
  // open_existing still accepts the directory with its .lock file.
  EXPECT_EQ(run_directory::open_existing(rd.path()).run_id(), rd.run_id());
  EXPECT_THROW(run_lock(dir_ / "missing-run"), run_error);
}

} // namespace
} // namespace kagent::store
