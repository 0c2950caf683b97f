// Request bodies against the shapes of TOOL_FORMATS.md §4 / SPEC §11.2, reply parsing, the SSE
// parser, gzip, URLs and proxies, error classification, .env parsing, key redaction.
#include <gtest/gtest.h>

#include "platform/llm/dotenv.hpp"
#include "platform/llm/http_util.hpp"
#include "platform/llm/wire.hpp"

using namespace kagent;
using json = nlohmann::json;

namespace {
llm_request conversation() {
  llm_request r;
  r.purpose = "refine";
  r.system = "SYS";
  r.messages = {{"user", "first"}, {"assistant", "reply"}, {"user", "second"}};
  r.max_tokens = 20000;
  r.temperature = 0.8;
  r.high_effort = true;
  return r;
}
}  // namespace

TEST(LlmWire, AnthropicBodyExactShape) {
  json b = build_body(conversation(), "claude-opus-4-6", {api_kind::anthropic, false, true});
  json expected = {{"model", "claude-opus-4-6"},
                   {"max_tokens", 20000},  // B.95: not capped at 8192
                   {"system", "SYS"},
                   {"messages", json::array({{{"role", "user"}, {"content", "first"}},  // B.96: whole conversation
                                             {{"role", "assistant"}, {"content", "reply"}},
                                             {{"role", "user"}, {"content", "second"}}})},
                   {"temperature", 0.8},
                   {"output_config", {{"effort", "high"}}}};  // A.75: in the body
  EXPECT_EQ(b, expected);
}

TEST(LlmWire, AnthropicTemperatureClampedOnceAndOptional) {
  auto r = conversation();
  r.temperature = 1.7;
  json b = build_body(r, "claude-opus-4-6", {api_kind::anthropic, true, true});
  EXPECT_EQ(b["temperature"], 1.0);
  EXPECT_EQ(b["stream"], true);
  EXPECT_EQ(b.dump().find("temperature"), b.dump().rfind("temperature"));  // A.73: exactly once
  r.temperature.reset();
  r.high_effort = false;
  b = build_body(r, "claude-opus-4-6", {api_kind::anthropic, false, true});
  EXPECT_FALSE(b.contains("temperature"));
  EXPECT_FALSE(b.contains("output_config"));
}

TEST(LlmWire, AnthropicEffortOnlyForModelsThatAcceptIt) {
  EXPECT_FALSE(build_body(conversation(), "claude-sonnet-4-20250514", {api_kind::anthropic, false, true}).contains("output_config"));
  EXPECT_FALSE(build_body(conversation(), "claude-opus-4-1-20250805", {api_kind::anthropic, false, true}).contains("output_config"));
  EXPECT_TRUE(build_body(conversation(), "claude-opus-4-5", {api_kind::anthropic, false, true}).contains("output_config"));
  EXPECT_TRUE(build_body(conversation(), "claude-sonnet-4-6", {api_kind::anthropic, false, true}).contains("output_config"));
}

TEST(LlmWire, AnthropicSystemMessagesFoldIntoSystem) {
  llm_request r;
  r.messages = {{"system", "extra rules"}, {"user", "hi"}};
  json b = build_body(r, "claude-opus-4-6", {api_kind::anthropic, false, true});
  EXPECT_EQ(b["system"], "extra rules");
  EXPECT_EQ(b["messages"].size(), 1u);
}

TEST(LlmWire, OpenAIReasoningModelBody) {
  json b = build_body(conversation(), "gpt-5.2", {api_kind::openai_chat, true, true});
  json expected = {{"model", "gpt-5.2"},
                   {"messages", json::array({{{"role", "system"}, {"content", "SYS"}},
                                             {{"role", "user"}, {"content", "first"}},
                                             {{"role", "assistant"}, {"content", "reply"}},
                                             {{"role", "user"}, {"content", "second"}}})},
                   {"max_completion_tokens", 20000},
                   {"reasoning_effort", "high"},
                   {"stream", true},
                   {"stream_options", {{"include_usage", true}}}};
  EXPECT_EQ(b, expected);  // no temperature: reasoning models reject it
}

TEST(LlmWire, OpenAIClassicModelKeepsTemperature) {
  json b = build_body(conversation(), "gpt-4o", {api_kind::openai_chat, false, true});
  EXPECT_EQ(b["temperature"], 0.8);
  EXPECT_EQ(b["max_completion_tokens"], 20000);
  EXPECT_FALSE(b.contains("reasoning_effort"));
  EXPECT_FALSE(b.contains("stream"));
}

TEST(LlmWire, OpenAICompatibleBody) {
  json b = build_body(conversation(), "o3-local", {api_kind::openai_chat, true, false});
  EXPECT_EQ(b["max_tokens"], 20000);
  EXPECT_FALSE(b.contains("max_completion_tokens"));
  EXPECT_FALSE(b.contains("reasoning_effort"));
  EXPECT_FALSE(b.contains("stream_options"));
  EXPECT_EQ(b["temperature"], 0.8);
}

TEST(LlmWire, ResponsesBody) {
  json b = build_body(conversation(), "o3-pro", {api_kind::openai_responses, false, true});
  EXPECT_EQ(b["instructions"], "SYS");
  EXPECT_EQ(b["input"].size(), 3u);
  EXPECT_EQ(b["input"][0]["role"], "user");
  EXPECT_EQ(b["max_output_tokens"], 20000);
  EXPECT_EQ(b["reasoning"]["effort"], "high");
  EXPECT_FALSE(b.contains("temperature"));
  EXPECT_TRUE(needs_responses_api("o3-pro"));
  EXPECT_TRUE(needs_responses_api("gpt-5-codex"));
  EXPECT_FALSE(needs_responses_api("gpt-5.2"));
}

TEST(LlmWire, RelayBody) {
  auto r = conversation();
  r.temperature.reset();
  json b = build_body(r, "gpt-5", {api_kind::relay, false, true});
  EXPECT_EQ(b["temperature"], 0.7);
  EXPECT_EQ(b["max_tokens"], 20000);
  EXPECT_EQ(b["top_p"], 1.0);
  EXPECT_EQ(b["n"], 1);
  EXPECT_EQ(b["reasoning"]["effort"], "high");
  EXPECT_EQ(b["messages"][0]["content"], "SYS");
  EXPECT_EQ(api_path(api_kind::relay), "");
}

TEST(LlmWire, ReasoningModelNames) {
  for (auto m : {"o1", "o3", "o4-mini", "gpt-5", "gpt-5.2", "gpt-5-mini"}) EXPECT_TRUE(is_openai_reasoning_model(m)) << m;
  for (auto m : {"gpt-4o", "gpt-4.1", "omni-local", "claude-opus-4-6"}) EXPECT_FALSE(is_openai_reasoning_model(m)) << m;
}

TEST(LlmWire, ParseAnthropicConcatenatesTextBlocksOnly) {
  json body = {{"model", "claude-opus-4-6"},
               {"content", json::array({{{"type", "thinking"}, {"thinking", "t"}, {"signature", "s"}},
                                        {{"type", "text"}, {"text", "A"}},
                                        {{"type", "redacted_thinking"}, {"data", "x"}},
                                        {{"type", "text"}, {"text", "B"}}})},
               {"stop_reason", "max_tokens"},
               {"usage", {{"input_tokens", 10}, {"cache_read_input_tokens", 5}, {"output_tokens", 3}}}};
  auto r = parse_body(api_kind::anthropic, body.dump(), "anthropic");
  EXPECT_EQ(r.text, "AB");
  EXPECT_EQ(r.input_tokens, 15);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_TRUE(r.truncated());
}

TEST(LlmWire, ParseErrorsAreMalformed) {
  for (auto api : {api_kind::anthropic, api_kind::openai_chat, api_kind::openai_responses, api_kind::relay}) {
    try {
      parse_body(api, "{\"unexpected\": true}", "p");
      ADD_FAILURE();
    } catch (const llm_error& e) {
      EXPECT_EQ(e.kind(), llm_error_kind::malformed);
    }
    try {
      parse_body(api, "not json", "p");
      ADD_FAILURE();
    } catch (const llm_error& e) {
      EXPECT_EQ(e.kind(), llm_error_kind::malformed);
    }
  }
}

TEST(LlmWire, SseParserHandlesSplitsCrlfCommentsAndMultilineData) {
  std::vector<sse_event> got;
  sse_parser p([&](const sse_event& e) { got.push_back(e); });
  std::string stream = ": ping\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\ndata: {\"x\":1}\n\nevent: b\rdata: z\r\r";
  for (char c : stream) p.feed(std::string_view(&c, 1));  // worst case: one byte at a time
  p.feed("data: last");
  p.finish();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].event, "a");
  EXPECT_EQ(got[0].data, "1\n2");
  EXPECT_EQ(got[1].event, "");
  EXPECT_EQ(got[1].data, "{\"x\":1}");
  EXPECT_EQ(got[2].event, "b");
  EXPECT_EQ(got[2].data, "z");
  EXPECT_EQ(got[3].data, "last");
}

TEST(LlmWire, StreamDecoderOpenAIUsageChunkAndDone) {
  stream_decoder d(api_kind::openai_chat, "openai");
  d.on_event({"", R"({"choices":[{"delta":{"content":"he"},"finish_reason":null}]})"});
  d.on_event({"", R"({"choices":[{"delta":{"content":"llo"},"finish_reason":"length"}]})"});
  d.on_event({"", R"({"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}})"});
  EXPECT_FALSE(d.complete());
  d.on_event({"", "[DONE]"});
  auto r = d.finish();
  EXPECT_EQ(r.text, "hello");
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_EQ(r.input_tokens, 4);
}

TEST(LlmWire, StreamDecoderWithoutFinalEventIsConnectionError) {
  stream_decoder d(api_kind::anthropic, "anthropic");
  d.on_event({"message_start", R"({"type":"message_start","message":{"usage":{"input_tokens":3}}})"});
  try {
    d.finish();
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::connection);
  }
}

TEST(LlmWire, ClassifyHttpErrors) {
  auto k = [](int status, const std::string& body, const std::string& ra = "") {
    return classify_http_error("p", status, ra, "", body);
  };
  EXPECT_EQ(k(401, R"({"type":"error","error":{"type":"authentication_error","message":"bad"}})").kind(), llm_error_kind::auth);
  EXPECT_EQ(k(403, R"({"type":"error","error":{"type":"permission_error","message":"no"}})").kind(), llm_error_kind::auth);
  EXPECT_EQ(k(402, R"({"type":"error","error":{"type":"billing_error","message":"pay"}})").kind(), llm_error_kind::quota);
  EXPECT_EQ(k(400, R"({"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}})").kind(),
            llm_error_kind::quota);
  EXPECT_EQ(k(429, R"({"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}})").kind(), llm_error_kind::quota);
  EXPECT_EQ(k(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}})").kind(),
            llm_error_kind::quota);
  auto rl = k(429, R"({"type":"error","error":{"type":"rate_limit_error","message":"slow"}})", "12");
  EXPECT_EQ(rl.kind(), llm_error_kind::rate_limited);
  EXPECT_DOUBLE_EQ(*rl.retry_after_s(), 12);
  EXPECT_EQ(k(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})").kind(), llm_error_kind::overloaded);
  EXPECT_EQ(k(503, "Slow Down").kind(), llm_error_kind::overloaded);
  EXPECT_EQ(k(500, "oops").kind(), llm_error_kind::server);
  EXPECT_EQ(k(502, "<html>").kind(), llm_error_kind::server);
  EXPECT_EQ(k(400, R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens too large"}})").kind(),
            llm_error_kind::bad_request);
  EXPECT_EQ(k(422, "{}").kind(), llm_error_kind::bad_request);
  EXPECT_EQ(k(408, "").kind(), llm_error_kind::timeout);
  EXPECT_NE(std::string(rl.what()).find("HTTP 429 rate_limit_error: slow"), std::string::npos) << rl.what();
  EXPECT_DOUBLE_EQ(*parse_retry_after("", "1500"), 1.5);
  EXPECT_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", ""));
}

TEST(LlmWire, GzipRoundTripAndStreaming) {
  std::string text(50000, 'k');
  for (size_t i = 0; i < text.size(); i += 7) text[i] = static_cast<char>('a' + i % 26);
  std::string gz = gzip_compress(text);
  EXPECT_LT(gz.size(), text.size());
  EXPECT_EQ(gunzip(gz), text);
  gunzip_stream s;
  std::string out;
  for (size_t i = 0; i < gz.size(); i += 100) out += s.feed(std::string_view(gz).substr(i, 100));
  EXPECT_TRUE(s.done());
  EXPECT_EQ(out, text);
  EXPECT_THROW(gunzip("definitely not gzip"), std::runtime_error);
}

TEST(LlmWire, UrlsAndProxies) {
  auto u = parse_url("https://api.anthropic.com/v1/messages?x=1");
  EXPECT_EQ(u.host, "api.anthropic.com");
  EXPECT_EQ(u.port, "443");
  EXPECT_EQ(u.target, "/v1/messages?x=1");
  auto l = parse_url("http://[::1]:8080");
  EXPECT_EQ(l.host, "::1");
  EXPECT_EQ(l.authority(), "[::1]:8080");
  EXPECT_EQ(l.target, "/");
  EXPECT_THROW(parse_url("localhost:8000/v1"), std::invalid_argument);
  EXPECT_THROW(parse_url("ftp://x"), std::invalid_argument);
  EXPECT_EQ(join_url("http://h:1/v1/", "/chat/completions"), "http://h:1/v1/chat/completions");
  EXPECT_EQ(join_url("http://h:1", ""), "http://h:1");

  env_map env{{"HTTPS_PROXY", "proxy.corp:3128"}, {"http_proxy", "http://u:p@hp:8080"}, {"NO_PROXY", "localhost, .internal,10.0.0.1"}};
  auto p = proxy_for(parse_url("https://api.openai.com/v1"), env);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->authority(), "proxy.corp:3128");
  auto hp = proxy_for(parse_url("http://example.com"), env);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->userinfo, "u:p");
  EXPECT_FALSE(proxy_for(parse_url("http://localhost:8000/v1"), env));
  EXPECT_FALSE(proxy_for(parse_url("https://vllm.internal/v1"), env));
  EXPECT_FALSE(proxy_for(parse_url("https://internal/v1"), env));
  EXPECT_TRUE(proxy_for(parse_url("https://notinternal/v1"), env));
  EXPECT_FALSE(proxy_for(parse_url("http://10.0.0.1:8000"), env));
  EXPECT_FALSE(proxy_for(parse_url("https://x"), {{"HTTPS_PROXY", "p:1"}, {"no_proxy", "*"}}));
  EXPECT_FALSE(proxy_for(parse_url("https://x"), {}));
}

TEST(LlmWire, DotenvParsing) {
  auto env = parse_dotenv(
      "# comment\n"
      "ANTHROPIC_API_KEY=sk-ant-abc\n"
      "export OPENAI_API_KEY = \"sk-quoted\\\"x\" # trailing\n"
      "SINGLE='a # not a comment'\n"
      "PLAIN=value # comment\n"
      "EMPTY=\n"
      "not a line\n"
      "WIN=crlf\r\n");
  EXPECT_EQ(env["ANTHROPIC_API_KEY"], "sk-ant-abc");
  EXPECT_EQ(env["OPENAI_API_KEY"], "sk-quoted\"x");
  EXPECT_EQ(env["SINGLE"], "a # not a comment");
  EXPECT_EQ(env["PLAIN"], "value");
  EXPECT_EQ(env["EMPTY"], "");
  EXPECT_EQ(env["WIN"], "crlf");
  EXPECT_EQ(env.count("not a line"), 0u);
  auto merged = merge_env({{"ANTHROPIC_API_KEY", "from-env"}}, env);
  EXPECT_EQ(merged["ANTHROPIC_API_KEY"], "from-env");  // the environment wins
  EXPECT_EQ(merged["OPENAI_API_KEY"], "sk-quoted\"x");
  EXPECT_EQ(api_key_from({{"K", "your-api-key-here"}}, "K"), "");
  EXPECT_EQ(api_key_from({{"K", "real"}}, "K"), "real");
  EXPECT_EQ(api_key_from({}, "K"), "");
}

TEST(LlmWire, RedactRemovesKeysAndKeyShapedTokens) {
  std::string s = redact("key=SECRETVALUE123 and 'Incorrect API key provided: sk-proj-abc*****wxyz.' task-runner",
                         {"SECRETVALUE123"});
  EXPECT_EQ(s.find("SECRETVALUE123"), std::string::npos);
  EXPECT_EQ(s.find("abc*****wxyz"), std::string::npos);
  EXPECT_NE(s.find("task-runner"), std::string::npos);
  EXPECT_NE(s.find("[redacted]"), std::string::npos);
}
