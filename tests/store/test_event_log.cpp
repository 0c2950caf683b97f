#include "platform/store/event_log.hpp"

#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/store/util.hpp"
#include "tests/store/test_helpers.hpp"

namespace kagent::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using nlohmann::json;

class event_log_test : public test::scratch_dir {
protected:
  fs::path log_path() const { return dir_ / "events.jsonl"; }
  std::vector<std::string> lines() const {
    std::ifstream in(log_path());
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);)
      out.push_back(l);
    return out;
  }
};

TEST_F(event_log_test, EveryLineIsAJsonObjectWithTsAndTypeFirst) {
  {
    event_log log(log_path());
    log.append("run_start", {{"run_id", "20261202-121530-noop-matvec-00ab"}, {"gpus", {0, 1}}});
    log.append("round_start", {{"round", 1}});
    log.append("candidate_result", {{"id", "r1_c0"}, {"status", "verified"}, {"time_ms", 0.5}});
    log.append("run_end");
  }
  const auto ls = lines();
  ASSERT_EQ(ls.size(), 4u);
  for (const auto& l : ls) {
    EXPECT_THAT(l, MatchesRegex("\\{\"ts\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z\",\"type\":\".*"));
    EXPECT_TRUE(json::parse(l).is_object());
  }
  EXPECT_EQ(json::parse(ls[0])["gpus"], json::array({0, 1}));
  EXPECT_EQ(json::parse(ls[2])["time_ms"], 0.5);
  EXPECT_EQ(json::parse(ls[3]).size(), 2u);
  const auto events = read_events(log_path());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1]["type"], "round_start");
  EXPECT_EQ(events[1]["round"], 1);
}

TEST_F(event_log_test, AppendsAcrossReopensWithoutTruncating) {
  { event_log(log_path()).append("run_start"); }
  { event_log(log_path()).append("run_start", {{"resumed", true}}); }
  const auto events = read_events(log_path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["resumed"], true);
}

TEST_F(event_log_test, PayloadCannotOverrideTsOrType) {
  event_log log(log_path());
  const std::string line = log.append("error", {{"type", "fake"}, {"ts", "yesterday"}, {"message", "boom"}});
  const json j = json::parse(line);
  EXPECT_EQ(j["type"], "error");
  EXPECT_NE(j["ts"], "yesterday");
  EXPECT_EQ(j["message"], "boom");
}

TEST_F(event_log_test, NonObjectFieldsAreRejectedAndNothingIsWritten) {
  event_log log(log_path());
  try {
    log.append("error", json::array({1, 2}));
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("must be a JSON object"));
  }
  EXPECT_EQ(fs::file_size(log_path()), 0u);
}

TEST_F(event_log_test, LinesStayStrictJsonWithInfinityAndBadUtf8) {
  event_log log(log_path());
  log.append("candidate_result", {{"time_ms", std::numeric_limits<double>::infinity()},
                                  {"reply", std::string("half \xe2\x82 a euro")}});
  const auto ls = lines();
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0].find("Infinity"), std::string::npos);
  const json j = json::parse(ls[0]);
  EXPECT_TRUE(j["time_ms"].is_null());
  EXPECT_THAT(j["reply"].get<std::string>(), HasSubstr("a euro"));
}

TEST_F(event_log_test, ConcurrentAppendsKeepLinesWhole) {
  event_log log(log_path());
  constexpr int threads = 4, per_thread = 200;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&log, t] {
      for (int i = 0; i < per_thread; ++i)
        log.append("llm_usage", {{"thread", t}, {"i", i}, {"pad", std::string(static_cast<std::size_t>(i) * 7, 'x')}});
    });
  for (auto& t : ts)
    t.join();
  std::size_t skipped = 99;
  const auto events = read_events(log_path(), &skipped);
  EXPECT_EQ(skipped, 0u);
  ASSERT_EQ(events.size(), static_cast<std::size_t>(threads * per_thread));
  std::vector<int> next(threads, 0);
  for (const auto& e : events) {
    const int t = e["thread"];
    EXPECT_EQ(e["i"].get<int>(), next[t]++) << "per-thread order";
  }
}

TEST_F(event_log_test, ATornLastLineIsTerminatedOnReopen) {
  std::ofstream(log_path()) << "{\"ts\":\"2026-12-02T12:00:00.000Z\",\"type\":\"run_start\"}\n{\"ts\":\"2026-12-";
  std::size_t skipped = 0;
  EXPECT_EQ(read_events(log_path(), &skipped).size(), 1u);
  EXPECT_EQ(skipped, 1u);
  {
    event_log log(log_path());
    log.append("run_start", {{"resumed", true}});
  }
  const auto events = read_events(log_path(), &skipped);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(skipped, 1u);
  EXPECT_EQ(events[1]["resumed"], true);
  const auto ls = lines();
  ASSERT_EQ(ls.size(), 3u);
  EXPECT_TRUE(json::parse(ls[2]).is_object());
}

TEST_F(event_log_test, UnopenablePathIsARunErrorNamingIt) {
  const fs::path p = dir_ / "missing" / "events.jsonl";
  try {
    event_log log(p);
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_THAT(e.what(), HasSubstr(p.string()));
  }
  EXPECT_THROW(read_events(p), run_error);
}

} // namespace
} // namespace kagent::store
