// The replay provider and the recorder, offline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "platform/common/errors.hpp"
#include "platform/llm/replay.hpp"
#include "platform/llm/retry.hpp"

using namespace kagent;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& tag) {
    path = fs::temp_directory_path() / ("kagent_llm_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

llm_request req(const std::string& purpose, const std::string& prompt = "p") {
  llm_request r;
  r.purpose = purpose;
  r.messages = {{"user", prompt}};
  return r;
}

// A provider that answers from a list (stand-in for a real endpoint in recorder tests).
class list_provider : public llm_provider {
public:
  llm_response complete(const llm_request& r, const text_callback&) override {
    if (r.messages.back().content == "fail") throw llm_error(llm_error_kind::overloaded, "Overloaded", 529);
    llm_response out;
    out.text = "reply to " + r.messages.back().content;
    out.model = "m";
    out.provider = "fake";
    out.input_tokens = 3;
    out.output_tokens = 4;
    out.stop_reason = "end_turn";
    return out;
  }
  std::string name() const override { return "fake"; }
  std::string default_model() const override { return "m"; }
};

}  // namespace

TEST(LlmReplay, ServesPerPurposeInNumericOrderThenFailsClearly) {
  temp_dir d("order");
  d.write("optimize_002.md", "second");
  d.write("optimize_1.md", "first");
  d.write("optimize_010.txt", "tenth");
  d.write("bottleneck_001.md", "memory bound");
  d.write("README.txt", "ignored: no number");
  replay_provider p(d.path.string(), {}, "claude-opus-4-6");
  EXPECT_EQ(p.complete(req("optimize")).text, "first");
  EXPECT_EQ(p.complete(req("bottleneck")).text, "memory bound");
  EXPECT_EQ(p.complete(req("optimize")).text, "second");
  auto third = p.complete(req("optimize"));
  EXPECT_EQ(third.text, "tenth");
  EXPECT_EQ(third.provider, "replay");
  EXPECT_EQ(third.model, "claude-opus-4-6");
  EXPECT_GT(third.output_tokens, 0);
  try {
    p.complete(req("optimize"));
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::replay_exhausted);
    EXPECT_NE(std::string(e.what()).find("no more replies for purpose 'optimize'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("optimize_11.md"), std::string::npos) << e.what();
  }
  try {
    p.complete(req("refine"));
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::replay_exhausted);
    EXPECT_NE(std::string(e.what()).find("no reply for purpose 'refine'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(p.served("optimize"), 3);
}

TEST(LlmReplay, CycleAndAnyFallback) {
  temp_dir d("cycle");
  d.write("any_001.md", "A");
  d.write("any_002.md", "B");
  replay_provider p(d.path.string(), {true, false});
  EXPECT_EQ(p.complete(req("refine")).text, "A");
  EXPECT_EQ(p.complete(req("optimize")).text, "B");
  EXPECT_EQ(p.complete(req("refine")).text, "A");
}

TEST(LlmReplay, JsonRecordingsRepliesAndErrors) {
  temp_dir d("json");
  d.write("optimize_001.json", R"({"response": {"text": "from json", "input_tokens": 100, "output_tokens": 50, "stop_reason": "max_tokens"}})");
  d.write("optimize_002.json", R"({"error": {"kind": "rate_limited", "message": "replayed 429", "http_status": 429, "retry_after_s": 3}})");
  d.write("optimize_003.json", R"({"nothing": 1})");
  replay_provider p(d.path.string());
  auto r = p.complete(req("optimize"));
  EXPECT_EQ(r.text, "from json");
  EXPECT_EQ(r.input_tokens, 100);
  EXPECT_TRUE(r.truncated());
  try {
    p.complete(req("optimize"));
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::rate_limited);
    EXPECT_EQ(e.http_status(), 429);
    EXPECT_DOUBLE_EQ(*e.retry_after_s(), 3);
  }
  EXPECT_THROW(p.complete(req("optimize")), llm_error);
}

TEST(LlmReplay, BadDirectoriesAreUserErrors) {
  EXPECT_THROW(replay_provider("/nonexistent/kagent/replay"), user_error);
  temp_dir d("dup");
  d.write("optimize_1.md", "a");
  d.write("optimize_001.txt", "b");
  EXPECT_THROW(replay_provider(d.path.string()), user_error);
}

TEST(LlmReplay, RecordThenReplayReproducesTheRun) {
  temp_dir d("rec");
  auto inner = std::make_shared<list_provider>();
  recording_provider rec(inner, d.path.string(), {});
  EXPECT_EQ(rec.complete(req("optimize", "one")).text, "reply to one");
  EXPECT_EQ(rec.complete(req("bottleneck", "b")).text, "reply to b");
  EXPECT_THROW(rec.complete(req("optimize", "fail")), llm_error);
  EXPECT_EQ(rec.complete(req("optimize", "two")).text, "reply to two");
  EXPECT_TRUE(fs::exists(d.path / "optimize_001.json"));
  EXPECT_TRUE(fs::exists(d.path / "optimize_003.json"));
  EXPECT_TRUE(fs::exists(d.path / "bottleneck_001.json"));
  auto j = nlohmann::json::parse(std::ifstream(d.path / "optimize_001.json"));
  EXPECT_EQ(j["request"]["messages"][0]["content"], "one");
  EXPECT_EQ(j["request"]["model"], "m");
  EXPECT_EQ(j["request_hash"], request_hash(req("optimize", "one")));
  EXPECT_EQ(j["response"]["output_tokens"], 4);

  replay_provider in_order(d.path.string());
  EXPECT_EQ(in_order.complete(req("optimize", "anything")).text, "reply to one");
  try {
    in_order.complete(req("optimize"));
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::overloaded);  // the recorded failure comes back too
  }
  EXPECT_EQ(in_order.complete(req("optimize")).text, "reply to two");

  replay_provider by_hash(d.path.string(), {false, true});
  EXPECT_EQ(by_hash.complete(req("optimize", "two")).text, "reply to two");
  EXPECT_EQ(by_hash.complete(req("optimize", "one")).text, "reply to one");
  EXPECT_THROW(by_hash.complete(req("optimize", "never asked")), llm_error);

  // A second recorder on the same directory continues the numbering.
  recording_provider rec2(inner, d.path.string(), {});
  rec2.complete(req("optimize", "three"));
  EXPECT_TRUE(fs::exists(d.path / "optimize_004.json"));
}

TEST(LlmReplay, RequestHashIgnoresModelButNotPrompt) {
  auto a = req("optimize", "x");
  auto b = a;
  b.model = "other-model";
  EXPECT_EQ(request_hash(a), request_hash(b));
  b.messages[0].content = "y";
  EXPECT_NE(request_hash(a), request_hash(b));
  b = a;
  b.max_tokens = 1;
  EXPECT_NE(request_hash(a), request_hash(b));
}

TEST(LlmReplay, CallWithRetriesAccountsUsage) {
  temp_dir d("usage");
  d.write("optimize_001.json", R"({"error": {"kind": "server", "message": "boom", "http_status": 500}})");
  d.write("optimize_002.json", R"({"response": {"text": "ok", "input_tokens": 1000000, "output_tokens": 0}})");
  replay_provider p(d.path.string(), {}, "claude-opus-4-6");
  usage_ledger ledger;
  call_policy pol;
  pol.ledger = &ledger;
  pol.sleep = [](double) {};
  std::vector<std::string> retries;
  pol.on_retry = [&](const retry_decision& dd, const llm_error&) { retries.push_back(dd.reason); };
  auto out = call_with_retries(p, req("optimize"), pol);
  EXPECT_EQ(out.response.text, "ok");
  EXPECT_EQ(out.attempts, 2);
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_EQ(retries[0].rfind("server: retry 1/5", 0), 0u) << retries[0];
  EXPECT_DOUBLE_EQ(ledger.total_cost(), 5.0);  // 1 Mtok in at the built-in opus-4-6 estimate
  EXPECT_EQ(ledger.total().failures, 1);
}
