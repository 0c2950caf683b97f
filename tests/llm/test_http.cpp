// The providers and the transport against a loopback server speaking each API's wire format.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <atomic>
#include <thread>
#include <unistd.h>

#include "platform/llm/extract.hpp"
#include "platform/llm/http_client.hpp"
#include "platform/llm/provider.hpp"
#include "platform/llm/replay.hpp"
#include "platform/llm/retry.hpp"
#include "tests/llm/wire_fakes.hpp"

using namespace kagent;
using namespace kagent::test;
namespace fs = std::filesystem;

namespace {

const std::string kKey = "sk-ant-test-0123456789abcdef";
const std::string kOpenAIKey = "sk-proj-test-abcdefghijklmnop";

llm_request make_request(const std::string& purpose = "optimize") {
  llm_request r;
  r.purpose = purpose;
  r.system = "You are a kernel engineer.";
  r.messages = {{"user", "Optimize this kernel."}};
  r.max_tokens = 24576;
  r.temperature = 0.7;
  r.high_effort = true;
  return r;
}

provider_settings settings(const std::string& provider, const std::string& base, const std::string& model,
                           bool stream = true) {
  llm_config cfg;
  cfg.provider = provider;
  cfg.base_url = base;
  cfg.model = model;
  cfg.stream = stream;
  cfg.timeout_s = 10;
  cfg.idle_timeout_s = 5;
  cfg.connect_timeout_s = 5;
  env_map env{{"ANTHROPIC_API_KEY", kKey}, {"OPENAI_API_KEY", kOpenAIKey}};
  return resolve_provider(cfg, "", env, [](const std::string&) { return false; });
}

std::shared_ptr<llm_provider> provider_for(const provider_settings& s, env_map proxy_env = {}) {
  return make_provider(s, std::make_shared<http_client>(std::move(proxy_env)));
}

llm_error_kind kind_of(llm_provider& p, const llm_request& req = make_request()) {
  try {
    p.complete(req);
  } catch (const llm_error& e) {
    EXPECT_EQ(std::string(e.what()).find(kKey), std::string::npos) << e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error";
  return llm_error_kind::unavailable;
}

call_policy no_sleep_policy(std::vector<double>* sleeps) {
  call_policy p;
  p.retry.max_retries = 3;
  p.seed = 42;
  p.sleep = [sleeps](double s) { sleeps->push_back(s); };
  return p;
}

}  // namespace

TEST(LlmHttp, AnthropicStreamingSuccess) {
  loopback_server srv([](const received_request&, int) { return anthropic_sse(kernel_reply()); });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  std::string streamed;
  auto r = p->complete(make_request(), [&](std::string_view t) { streamed += t; });
  EXPECT_EQ(r.text, kernel_reply());
  EXPECT_EQ(streamed, kernel_reply());
  EXPECT_EQ(r.text.find("secret plan"), std::string::npos);  // thinking skipped
  EXPECT_EQ(r.input_tokens, 11);
  EXPECT_EQ(r.output_tokens, 22);
  EXPECT_EQ(r.stop_reason, "end_turn");
  EXPECT_EQ(r.provider, "anthropic");
  EXPECT_EQ(r.raw_status, 200);
  auto req = srv.received().at(0);
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/messages");
  EXPECT_EQ(req.header("x-api-key"), kKey);
  EXPECT_EQ(req.header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(req.header("authorization"), "");
  auto body = json::parse(req.body);
  EXPECT_EQ(body["max_tokens"], 24576);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["system"], "You are a kernel engineer.");
  EXPECT_EQ(body["output_config"]["effort"], "high");
}

TEST(LlmHttp, AnthropicJsonSkipsThinkingBlocks) {
  loopback_server srv([](const received_request&, int) { return anthropic_json("the answer", 5, 6); });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6", false));
  auto r = p->complete(make_request());
  EXPECT_EQ(r.text, "the answer");
  EXPECT_EQ(r.input_tokens, 5);
  EXPECT_EQ(r.output_tokens, 6);
  EXPECT_FALSE(json::parse(srv.received().at(0).body).contains("stream"));
}

TEST(LlmHttp, OpenAIChatStreamingAndJson) {
  loopback_server srv([](const received_request& rq, int) {
    return json::parse(rq.body).value("stream", false) ? openai_sse("streamed text", 3, 4) : openai_json("plain text", 3, 4);
  });
  auto s = settings("openai", srv.url() + "/v1", "gpt-5.2");
  auto r = provider_for(s)->complete(make_request());
  EXPECT_EQ(r.text, "streamed text");
  EXPECT_EQ(r.input_tokens, 3);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.stop_reason, "stop");
  s.stream = false;
  EXPECT_EQ(provider_for(s)->complete(make_request()).text, "plain text");
  auto req = srv.received().at(0);
  EXPECT_EQ(req.target, "/v1/chat/completions");
  EXPECT_EQ(req.header("authorization"), "Bearer " + kOpenAIKey);
  auto body = json::parse(req.body);
  EXPECT_EQ(body["max_completion_tokens"], 24576);
  EXPECT_EQ(body["reasoning_effort"], "high");
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST(LlmHttp, OpenAICompatibleEndpointWithoutKey) {
  loopback_server srv([](const received_request&, int) { return openai_sse("local reply", 1, 2, false); });
  auto r = provider_for(settings("openai_compatible", srv.url() + "/v1/", "qwen2.5-coder"))->complete(make_request());
  EXPECT_EQ(r.text, "local reply");
  EXPECT_EQ(r.provider, "openai_compatible");
  auto req = srv.received().at(0);
  EXPECT_EQ(req.target, "/v1/chat/completions");
  EXPECT_EQ(req.header("authorization"), "");  // the OpenAI key never goes to a third-party endpoint
  auto body = json::parse(req.body);
  EXPECT_EQ(body["max_tokens"], 24576);
  EXPECT_FALSE(body.contains("stream_options"));
  EXPECT_FALSE(body.contains("reasoning_effort"));
  EXPECT_EQ(body["temperature"], 0.7);
}

TEST(LlmHttp, OpenAIResponsesApiForProModels) {
  loopback_server srv([](const received_request& rq, int) {
    return json::parse(rq.body).value("stream", false) ? responses_sse("resp text") : json_reply(200, responses_body("resp json"));
  });
  auto s = settings("openai", srv.url() + "/v1", "o3-pro");
  EXPECT_EQ(provider_for(s)->complete(make_request()).text, "resp text");
  s.stream = false;
  auto r = provider_for(s)->complete(make_request());
  EXPECT_EQ(r.text, "resp json");
  EXPECT_EQ(r.input_tokens, 7);
  EXPECT_EQ(srv.received().at(0).target, "/v1/responses");
  auto body = json::parse(srv.received().at(0).body);
  EXPECT_EQ(body["instructions"], "You are a kernel engineer.");
  EXPECT_EQ(body["reasoning"]["effort"], "high");
  EXPECT_EQ(body["max_output_tokens"], 24576);
}

TEST(LlmHttp, RelayPostsToRoot) {
  loopback_server srv([](const received_request&, int) { return relay_json("relay says hi"); });
  auto r = provider_for(settings("relay", srv.url(), "gpt-5"))->complete(make_request());
  EXPECT_EQ(r.text, "relay says hi");
  auto req = srv.received().at(0);
  EXPECT_EQ(req.target, "/");
  auto body = json::parse(req.body);
  EXPECT_EQ(body["max_tokens"], 24576);
  EXPECT_EQ(body["n"], 1);
  EXPECT_EQ(body["top_p"], 1.0);
  EXPECT_EQ(body["messages"][0]["role"], "system");
}

TEST(LlmHttp, RateLimitedHonoursRetryAfterThenSucceeds) {
  loopback_server srv([](const received_request&, int i) {
    if (i == 0) {
      auto r = json_reply(429, anthropic_error_body("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"));
      r.headers.push_back({"retry-after", "7"});
      return r;
    }
    return anthropic_sse("ok after wait");
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  try {
    p->complete(make_request());
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::rate_limited);
    EXPECT_EQ(e.http_status(), 429);
    ASSERT_TRUE(e.retry_after_s());
    EXPECT_DOUBLE_EQ(*e.retry_after_s(), 7);
  }
  std::vector<double> sleeps;
  loopback_server srv2([](const received_request&, int i) {
    if (i == 0) {
      auto r = json_reply(429, anthropic_error_body("rate_limit_error", "slow down"));
      r.headers.push_back({"retry-after", "7"});
      return r;
    }
    return anthropic_sse("ok after wait");
  });
  auto p2 = provider_for(settings("anthropic", srv2.url(), "claude-opus-4-6"));
  auto out = call_with_retries(*p2, make_request(), no_sleep_policy(&sleeps));
  EXPECT_EQ(out.response.text, "ok after wait");
  EXPECT_EQ(out.attempts, 2);
  ASSERT_EQ(sleeps.size(), 1u);
  EXPECT_GE(sleeps[0], 7.0);
}

TEST(LlmHttp, OverloadedAndServerErrorsAreRetried) {
  loopback_server srv([](const received_request&, int i) {
    if (i == 0) return json_reply(529, anthropic_error_body("overloaded_error", "Overloaded"));
    if (i == 1) return json_reply(500, anthropic_error_body("api_error", "Internal server error"));
    return anthropic_sse("third time lucky");
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  EXPECT_EQ(kind_of(*p), llm_error_kind::overloaded);
  EXPECT_EQ(kind_of(*p), llm_error_kind::server);
  std::vector<double> sleeps;
  loopback_server srv2([](const received_request&, int i) {
    if (i == 0) return json_reply(529, anthropic_error_body("overloaded_error", "Overloaded"));
    if (i == 1) return json_reply(500, anthropic_error_body("api_error", "Internal server error"));
    return anthropic_sse("third time lucky");
  });
  auto p2 = provider_for(settings("anthropic", srv2.url(), "claude-opus-4-6"));
  auto out = call_with_retries(*p2, make_request(), no_sleep_policy(&sleeps));
  EXPECT_EQ(out.response.text, "third time lucky");
  EXPECT_EQ(out.attempts, 3);
  EXPECT_EQ(sleeps.size(), 2u);
}

TEST(LlmHttp, ConnectionDroppedMidStream) {
  loopback_server srv([](const received_request&, int) {
    auto r = anthropic_sse("partial kernel text", 1, 2, /*finish=*/false);
    r.drop_mid_body = true;
    return r;
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  EXPECT_EQ(kind_of(*p), llm_error_kind::connection);
}

TEST(LlmHttp, CloseDelimitedStreamWorksAndTruncatedOneFails) {
  loopback_server srv([](const received_request&, int i) {
    auto r = openai_sse("close delimited", 1, 2);
    r.frame = scripted_reply::framing::close;
    if (i == 1) r.chunks.pop_back();  // no [DONE]: the server went away early
    return r;
  });
  auto p = provider_for(settings("openai", srv.url() + "/v1", "gpt-5.2"));
  EXPECT_EQ(p->complete(make_request()).text, "close delimited");
  EXPECT_EQ(kind_of(*p), llm_error_kind::connection);
}

TEST(LlmHttp, StreamErrorEventAfter200) {
  loopback_server srv([](const received_request&, int i) {
    auto r = anthropic_sse("some text", 1, 2, false);
    r.chunks.push_back(sse("error", i == 0 ? anthropic_error_body("overloaded_error", "Overloaded")
                                           : anthropic_error_body("weird_error", "something odd")));
    return r;
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  EXPECT_EQ(kind_of(*p), llm_error_kind::overloaded);
  EXPECT_EQ(kind_of(*p), llm_error_kind::stream_error);
}

TEST(LlmHttp, MalformedJsonIsReported) {
  loopback_server srv([](const received_request&, int) {
    scripted_reply r;
    r.headers = {{"Content-Type", "application/json"}};
    r.chunks = {"<html><body>502 Bad Gateway from some proxy</body></html>"};
    return r;
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6", false));
  EXPECT_EQ(kind_of(*p), llm_error_kind::malformed);
}

TEST(LlmHttp, ReplyWithoutCodeIsRejectedByExtraction) {
  loopback_server srv([](const received_request&, int) {
    return anthropic_sse("I am sorry, but I cannot produce a faster kernel for this problem.");
  });
  auto r = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"))->complete(make_request());
  auto x = extract_kernel(r.text);
  EXPECT_FALSE(x.ok);
  EXPECT_NE(x.reason.find("no code block"), std::string::npos) << x.reason;
}

TEST(LlmHttp, SlowServerTimesOut) {
  loopback_server srv([](const received_request&, int) {
    auto r = anthropic_json("too late");
    r.delay_before_s = 1;
    return r;
  });
  auto s = settings("anthropic", srv.url(), "claude-opus-4-6", false);
  s.timeout_s = 0.3;
  auto p = provider_for(s);
  try {
    p->complete(make_request());
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::timeout);
    EXPECT_NE(std::string(e.what()).find("total timeout"), std::string::npos) << e.what();
  }
}

TEST(LlmHttp, IdleTimeoutBoundsSilenceNotGenerationLength) {
  loopback_server srv([](const received_request&, int i) {
    auto r = anthropic_sse(kernel_reply());
    r.delay_between_s = i == 0 ? 0.05 : 0.8;
    return r;
  });
  auto s = settings("anthropic", srv.url(), "claude-opus-4-6");
  s.idle_timeout_s = 0.3;  // the whole stream (12 events x 0.05 s) is longer than that, each gap is not
  auto p = provider_for(s);
  EXPECT_EQ(p->complete(make_request()).text, kernel_reply());
  EXPECT_EQ(kind_of(*p), llm_error_kind::timeout);
}

TEST(LlmHttp, AuthErrorIsNotRetriedAndKeyIsScrubbed) {
  loopback_server srv([](const received_request&, int) {
    return json_reply(401, anthropic_error_body("authentication_error", "invalid x-api-key " + kKey));
  });
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  std::vector<double> sleeps;
  try {
    call_with_retries(*p, make_request(), no_sleep_policy(&sleeps));
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::auth);
    EXPECT_EQ(std::string(e.what()).find(kKey), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("authentication_error"), std::string::npos);
  }
  EXPECT_EQ(srv.requests(), 1);
  EXPECT_TRUE(sleeps.empty());
}

TEST(LlmHttp, QuotaErrorIsNotRetried) {
  loopback_server srv([](const received_request&, int) {
    return json_reply(429, openai_error_body("You exceeded your current quota", "insufficient_quota", "insufficient_quota"));
  });
  auto p = provider_for(settings("openai", srv.url() + "/v1", "gpt-5.2"));
  std::vector<double> sleeps;
  EXPECT_THROW(call_with_retries(*p, make_request(), no_sleep_policy(&sleeps)), llm_error);
  EXPECT_EQ(srv.requests(), 1);
}

TEST(LlmHttp, GzipBodyIsDecoded) {
  loopback_server srv([](const received_request&, int) {
    auto r = openai_json("compressed reply");
    r.gzip = true;
    return r;
  });
  auto r = provider_for(settings("openai", srv.url() + "/v1", "gpt-5.2", false))->complete(make_request());
  EXPECT_EQ(r.text, "compressed reply");
  EXPECT_EQ(srv.received().at(0).header("accept-encoding"), "gzip");
}

TEST(LlmHttp, KeepAliveReusesOneConnection) {
  loopback_server srv([](const received_request& rq, int) {
    return json::parse(rq.body).value("stream", false) ? anthropic_sse("s") : anthropic_json("j");
  });
  auto http = std::make_shared<http_client>(env_map{});
  auto s = settings("anthropic", srv.url(), "claude-opus-4-6");
  auto p = make_provider(s, http);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p->complete(make_request()).text, "s");
  s.stream = false;
  EXPECT_EQ(make_provider(s, http)->complete(make_request()).text, "j");
  EXPECT_EQ(srv.requests(), 4);
  EXPECT_EQ(srv.connections(), 1);
  EXPECT_EQ(http->connections_opened(), 1);
}

TEST(LlmHttp, StalePooledConnectionIsReplaced) {
  // The server closes after each reply without saying so; the client must notice on reuse.
  loopback_server srv([](const received_request&, int) {
    auto r = anthropic_json("fresh");
    r.silent_close = true;
    return r;
  });
  http_client http(env_map{});
  http_request r;
  r.url = srv.url() + "/v1/messages";
  r.body = "{}";
  EXPECT_EQ(http.send(r).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the close reach the client
  auto second = http.send(r);
  EXPECT_EQ(second.status, 200);
  EXPECT_FALSE(second.reused_connection);
  EXPECT_EQ(srv.connections(), 2);
  EXPECT_EQ(srv.requests(), 2);
}

TEST(LlmHttp, ConnectionRefused) {
  int port;
  {
    loopback_server gone([](const received_request&, int) { return anthropic_json("x"); });
    port = gone.port();
  }
  auto p = provider_for(settings("anthropic", "http://127.0.0.1:" + std::to_string(port), "claude-opus-4-6"));
  EXPECT_EQ(kind_of(*p), llm_error_kind::connection);
}

TEST(LlmHttp, HttpThroughProxyUsesAbsoluteForm) {
  loopback_server srv([](const received_request&, int) { return anthropic_sse("via proxy"); });
  forward_proxy proxy;
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"), env_map{{"HTTP_PROXY", proxy.url()}});
  EXPECT_EQ(p->complete(make_request()).text, "via proxy");
  auto lines = proxy.request_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "POST " + srv.url() + "/v1/messages HTTP/1.1");
}

TEST(LlmHttp, NoProxyBypassesTheProxy) {
  loopback_server srv([](const received_request&, int) { return anthropic_sse("direct"); });
  forward_proxy proxy;
  auto p = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"),
                        env_map{{"HTTP_PROXY", proxy.url()}, {"NO_PROXY", "localhost,127.0.0.1"}});
  EXPECT_EQ(p->complete(make_request()).text, "direct");
  EXPECT_TRUE(proxy.request_lines().empty());
}

TEST(LlmHttp, HttpsThroughProxyOpensConnectTunnel) {
  // The target speaks plain HTTP, so the TLS handshake inside the tunnel must fail; what is checked
  // is that the tunnel is requested correctly and that the failure is a clean connection error.
  loopback_server srv([](const received_request&, int) { return anthropic_json("x"); });
  forward_proxy proxy;
  auto p = provider_for(settings("anthropic", "https://127.0.0.1:" + std::to_string(srv.port()), "claude-opus-4-6"),
                        env_map{{"https_proxy", proxy.url()}});
  EXPECT_EQ(kind_of(*p), llm_error_kind::connection);
  auto lines = proxy.request_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "CONNECT 127.0.0.1:" + std::to_string(srv.port()) + " HTTP/1.1");
}

TEST(LlmHttp, RecordingsNeverContainTheKey) {
  loopback_server srv([](const received_request&, int i) {
    if (i == 0) return json_reply(401, anthropic_error_body("authentication_error", "invalid x-api-key " + kKey));
    return anthropic_sse("recorded reply mentioning " + kKey);
  });
  fs::path dir = fs::temp_directory_path() / ("kagent_llm_rec_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto inner = provider_for(settings("anthropic", srv.url(), "claude-opus-4-6"));
  recording_provider rec(inner, dir.string(), {kKey});
  EXPECT_THROW(rec.complete(make_request()), llm_error);
  auto req = make_request();
  req.messages.push_back({"assistant", "previous"});
  req.messages.push_back({"user", "my key is " + kKey});
  EXPECT_EQ(rec.complete(req).text, "recorded reply mentioning " + kKey);  // the caller still gets the reply
  int files = 0;
  for (auto& de : fs::directory_iterator(dir)) {
    ++files;
    std::ifstream f(de.path());
    std::stringstream ss;
    ss << f.rdbuf();
    EXPECT_EQ(ss.str().find(kKey), std::string::npos) << de.path();
    EXPECT_EQ(ss.str().find("x-api-key\":"), std::string::npos);
  }
  EXPECT_EQ(files, 2);
  EXPECT_TRUE(fs::exists(dir / "optimize_001.json"));
  EXPECT_TRUE(fs::exists(dir / "optimize_002.json"));
  fs::remove_all(dir);
}

// ---- HTTPS: a throw-away certificate for "localhost", trusted through SSL_CERT_FILE -------------------

namespace {

struct test_cert {
  fs::path dir;
  tls_files files;
  bool ok = false;
  test_cert() {
    dir = fs::temp_directory_path() / ("kagent_llm_tls_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    files = {(dir / "cert.pem").string(), (dir / "key.pem").string()};
    std::string cmd = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
                      "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout " + files.key_pem +
                      " -out " + files.cert_pem + " >/dev/null 2>&1";
    ok = std::system(cmd.c_str()) == 0 && fs::exists(files.cert_pem);
  }
  ~test_cert() { fs::remove_all(dir); }
};

// The server records the SNI name when its handshake call returns. A client that rejects the
// certificate can report the failure before the server has read its alert, so wait for the record.
std::vector<std::string> wait_for_sni(const loopback_server& srv, size_t n) {
  for (int i = 0; i < 500 && srv.sni_names().size() < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return srv.sni_names();
}

// OpenSSL reads SSL_CERT_FILE when the client's context loads the default paths (its constructor).
struct trust_file {
  explicit trust_file(const std::string& path) { ::setenv("SSL_CERT_FILE", path.c_str(), 1); }
  ~trust_file() { ::unsetenv("SSL_CERT_FILE"); }
};

}  // namespace

TEST(LlmHttps, VerifiedTlsWithSni) {
  test_cert cert;
  if (!cert.ok) GTEST_SKIP() << "the openssl command is not available to make a test certificate";
  loopback_server srv([](const received_request&, int) { return anthropic_sse("over tls"); }, &cert.files);
  trust_file trust(cert.files.cert_pem);
  auto p = provider_for(settings("anthropic", "https://localhost:" + std::to_string(srv.port()), "claude-opus-4-6"));
  EXPECT_EQ(p->complete(make_request()).text, "over tls");
  EXPECT_EQ(p->complete(make_request()).text, "over tls");
  EXPECT_EQ(srv.connections(), 1);  // keep-alive over TLS too
  ASSERT_EQ(srv.sni_names().size(), 1u);
  EXPECT_EQ(srv.sni_names()[0], "localhost");
  EXPECT_EQ(srv.received().at(0).header("x-api-key"), kKey);
}

TEST(LlmHttps, UntrustedCertificateIsRejected) {
  test_cert cert;
  if (!cert.ok) GTEST_SKIP() << "the openssl command is not available to make a test certificate";
  loopback_server srv([](const received_request&, int) { return anthropic_sse("must not arrive"); }, &cert.files);
  trust_file trust((cert.dir / "missing.pem").string());  // trust nothing
  auto p = provider_for(settings("anthropic", "https://localhost:" + std::to_string(srv.port()), "claude-opus-4-6"));
  try {
    p->complete(make_request());
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::connection);
    EXPECT_NE(std::string(e.what()).find("certificate verify failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(srv.requests(), 0);
}

TEST(LlmHttps, HostNameMismatchIsRejected) {
  test_cert cert;
  if (!cert.ok) GTEST_SKIP() << "the openssl command is not available to make a test certificate";
  loopback_server srv([](const received_request&, int) { return anthropic_sse("must not arrive"); }, &cert.files);
  trust_file trust(cert.files.cert_pem);
  // Trusted certificate, but for "localhost", not for the address the client asked for.
  auto p = provider_for(settings("anthropic", "https://127.0.0.1:" + std::to_string(srv.port()), "claude-opus-4-6"));
  try {
    p->complete(make_request());
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::connection);
    EXPECT_NE(std::string(e.what()).find("certificate verify failed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(srv.requests(), 0);
  auto names = wait_for_sni(srv, 1);
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names[0], "");  // no SNI for an IP literal
}

TEST(LlmHttps, ThroughConnectProxy) {
  test_cert cert;
  if (!cert.ok) GTEST_SKIP() << "the openssl command is not available to make a test certificate";
  loopback_server srv([](const received_request&, int) { return anthropic_sse("tunnelled"); }, &cert.files);
  forward_proxy proxy;
  trust_file trust(cert.files.cert_pem);
  auto p = provider_for(settings("anthropic", "https://localhost:" + std::to_string(srv.port()), "claude-opus-4-6"),
                        env_map{{"HTTPS_PROXY", proxy.url()}, {"HTTP_PROXY", "http://127.0.0.1:1"}});
  EXPECT_EQ(p->complete(make_request()).text, "tunnelled");
  ASSERT_EQ(proxy.request_lines().size(), 1u);
  EXPECT_EQ(proxy.request_lines()[0], "CONNECT localhost:" + std::to_string(srv.port()) + " HTTP/1.1");
  EXPECT_EQ(srv.sni_names().at(0), "localhost");
}

TEST(LlmHttp, BaseUrlsAreForgivingAboutV1) {
  loopback_server srv([](const received_request& rq, int) {
    return rq.target.rfind("/v1/messages", 0) == 0 ? anthropic_json("a") : openai_json("o");
  });
  EXPECT_EQ(provider_for(settings("anthropic", srv.url() + "/v1", "claude-opus-4-6", false))->complete(make_request()).text, "a");
  EXPECT_EQ(provider_for(settings("openai_compatible", srv.url(), "llama", false))->complete(make_request()).text, "o");
  EXPECT_EQ(srv.received().at(0).target, "/v1/messages");
  EXPECT_EQ(srv.received().at(1).target, "/v1/chat/completions");
}

TEST(LlmHttp, ConcurrentCallsShareThePool) {
  loopback_server srv([](const received_request& rq, int) {
    return anthropic_sse("reply to " + json::parse(rq.body)["messages"][0]["content"].get<std::string>());
  });
  auto http = std::make_shared<http_client>(env_map{}, 8);
  auto p = make_provider(settings("anthropic", srv.url(), "claude-opus-4-6"), http);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto req = make_request();
        req.messages[0].content = std::to_string(t * 100 + i);  // (g++ 12 -Wrestrict misfires on "t" + ...)
        if (p->complete(req).text == "reply to " + req.messages[0].content) ++ok;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, 30);
  EXPECT_EQ(srv.requests(), 30);
  EXPECT_LE(srv.connections(), 6);  // connections are reused, never more than the threads in flight
}
