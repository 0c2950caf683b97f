// End-to-end: `kagent-actors ask` against the loopback server, for each provider, with and without
// streaming; keys from .env; retries; auth failure; record then replay.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/llm/wire_fakes.hpp"

using namespace kagent::test;
namespace fs = std::filesystem;

namespace {

const std::string kBinary = std::string(KAGENT_BINARY_DIR) + "/app/kagent-actors";
const std::string kKey = "sk-ant-e2e-0123456789abcdef";

struct result {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct workdir {
  fs::path path;
  workdir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kagent_ask_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~workdir() { fs::remove_all(path); }

  // Runs the binary in this directory with a clean environment (no ambient keys or proxies).
  result ask(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) const {
    // Built with append() only: g++ 12 -O2 warns falsely (-Wrestrict) on chained operator+.
    std::string cmd;
    cmd.append("cd ").append(quote(path.string()));
    cmd.append(" && env -i PATH=/usr/bin:/bin HOME=").append(quote(path.string()));
    for (auto& e : env) cmd.append(" ").append(quote(e));
    cmd.append(" ").append(quote(kBinary)).append(" ask");
    for (auto& a : args) cmd.append(" ").append(quote(a));
    cmd.append(" 2>").append(quote((path / "stderr.txt").string()));
    result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int status = ::pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = slurp(path / "stderr.txt");
    return r;
  }
};

scripted_reply reply_for(const std::string& provider, const received_request& rq, const std::string& text) {
  bool stream = nlohmann::json::parse(rq.body).value("stream", false);
  if (provider == "anthropic") return stream ? anthropic_sse(text, 12, 34) : anthropic_json(text, 12, 34);
  if (provider == "relay") return relay_json(text);
  return stream ? openai_sse(text, 12, 34) : openai_json(text, 12, 34);
}

struct case_t {
  std::string provider, model, path;
  bool stream;
};

class AskE2E : public ::testing::TestWithParam<case_t> {};

}  // namespace

TEST(AskE2E, BinaryExists) { ASSERT_TRUE(fs::exists(kBinary)) << kBinary << " (build the kagent-actors target)"; }

TEST_P(AskE2E, EachProviderWithAndWithoutStreaming) {
  const auto& c = GetParam();
  loopback_server srv([&](const received_request& rq, int) { return reply_for(c.provider, rq, "pong from " + c.provider); });
  workdir w;
  std::vector<std::string> args = {"--provider", c.provider, "--base-url", srv.url() + c.path, "--model", c.model,
                                   "--max-tokens", "300", "say pong"};
  if (!c.stream) args.insert(args.begin(), "--no-stream");
  auto r = w.ask(args, {"ANTHROPIC_API_KEY=" + kKey, "OPENAI_API_KEY=" + kKey});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("pong from " + c.provider), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("attempts: 1"), std::string::npos) << r.out;
  if (c.provider != "relay") {
    EXPECT_NE(r.out.find("tokens: in 12, out 34"), std::string::npos) << r.out;
  }
  EXPECT_EQ(r.out.find(kKey), std::string::npos);
  EXPECT_EQ(r.err.find(kKey), std::string::npos);
  ASSERT_EQ(srv.requests(), 1);
  auto body = nlohmann::json::parse(srv.received()[0].body);
  EXPECT_EQ(body["messages"].back()["content"], "say pong");
  EXPECT_EQ(body.value("stream", false), c.stream && c.provider != "relay");
}

INSTANTIATE_TEST_SUITE_P(Providers, AskE2E,
                         ::testing::Values(case_t{"anthropic", "claude-opus-4-6", "", true},
                                           case_t{"anthropic", "claude-opus-4-6", "", false},
                                           case_t{"openai", "gpt-5.2", "/v1", true},
                                           case_t{"openai", "gpt-5.2", "/v1", false},
                                           case_t{"openai_compatible", "qwen2.5-coder", "/v1", true},
                                           case_t{"openai_compatible", "qwen2.5-coder", "/v1", false},
                                           case_t{"relay", "gpt-5", "", false}),
                         [](const auto& info) { return info.param.provider + (info.param.stream ? "_stream" : "_json"); });

TEST(AskE2ECli, KeyFromDotenvAndEnvironmentWins) {
  loopback_server srv([](const received_request& rq, int) { return reply_for("anthropic", rq, "ok"); });
  workdir w;
  std::ofstream(w.path / ".env") << "# local secrets\nANTHROPIC_API_KEY=\"sk-ant-from-dotenv-123456\"\n";
  auto r = w.ask({"--provider", "anthropic", "--base-url", srv.url(), "--model", "claude-opus-4-6", "hi"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(srv.received().at(0).header("x-api-key"), "sk-ant-from-dotenv-123456");
  r = w.ask({"--provider", "anthropic", "--base-url", srv.url(), "--model", "claude-opus-4-6", "hi"},
            {"ANTHROPIC_API_KEY=" + kKey});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(srv.received().at(1).header("x-api-key"), kKey);
}

TEST(AskE2ECli, AuthFailureExitsOneWithoutTheKey) {
  loopback_server srv([](const received_request&, int) {
    return json_reply(401, {{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", "invalid x-api-key " + kKey}}}});
  });
  workdir w;
  auto r = w.ask({"--provider", "anthropic", "--base-url", srv.url(), "--model", "claude-opus-4-6", "hi"},
                 {"ANTHROPIC_API_KEY=" + kKey});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("(auth)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(kKey), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find(kKey), std::string::npos);
  EXPECT_EQ(srv.requests(), 1);
}

TEST(AskE2ECli, OverloadIsRetried) {
  loopback_server srv([](const received_request& rq, int i) {
    if (i == 0) return json_reply(529, {{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "Overloaded"}}}});
    return reply_for("anthropic", rq, "after retry");
  });
  workdir w;
  auto r = w.ask({"--provider", "anthropic", "--base-url", srv.url(), "--model", "claude-opus-4-6", "--retry-base-delay", "0",
                  "hi"},
                 {"ANTHROPIC_API_KEY=" + kKey});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("after retry"), std::string::npos);
  EXPECT_NE(r.out.find("attempts: 2"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("overloaded: retry 1/"), std::string::npos) << r.err;
}

TEST(AskE2ECli, RecordThenReplay) {
  loopback_server srv([](const received_request& rq, int) { return reply_for("anthropic", rq, "recorded answer"); });
  workdir w;
  auto rec = (w.path / "rec").string();
  auto r = w.ask({"--provider", "anthropic", "--base-url", srv.url(), "--model", "claude-opus-4-6", "--llm-record", rec, "hi"},
                 {"ANTHROPIC_API_KEY=" + kKey});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_TRUE(fs::exists(fs::path(rec) / "ask_001.json"));
  EXPECT_EQ(slurp(fs::path(rec) / "ask_001.json").find(kKey), std::string::npos);
  r = w.ask({"--replay", rec, "--model", "claude-opus-4-6", "hi"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("recorded answer"), std::string::npos);
  r = w.ask({"--replay", rec, "--model", "claude-opus-4-6", "--purpose", "optimize", "hi"});  // nothing recorded for it
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("replay_exhausted"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no reply for purpose 'optimize'"), std::string::npos) << r.err;
}

TEST(AskE2ECli, NoProviderIsAUsageError) {
  workdir w;
  auto r = w.ask({"--model", "claude-opus-4-6", "hi"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("No available provider for model claude-opus-4-6"), std::string::npos) << r.err;
}
