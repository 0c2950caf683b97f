// End-to-end: a real kagent-actors run whose LLM endpoint misbehaves. Each fault hits round 1's
// candidate (r1_c0); round 2's candidate (r2_c1) gets a good reply and shows that the run went on.
// Every test checks exit 0, summary.json, and that the API key is in no file of the run directory.
#include "tests/e2e_llm/e2e_llm_util.hpp"

using namespace e2e_llm;
using kagent::test::json_reply;
using kagent::test::openai_error_body;
using kagent::test::sse;

namespace {

scripted_reply with_header(scripted_reply r, const std::string& k, const std::string& v) {
  r.headers.emplace_back(k, v);
  return r;
}

}  // namespace

TEST(E2eLlm, BinaryExists) { ASSERT_TRUE(fs::exists(e2e::binary())) << e2e::binary(); }

TEST(E2eLlm, SuccessWithoutStreamingVerifiesEveryCandidate) {
  e2e::scratch s;
  scripted_endpoint ep({});
  auto r = run_against(s, ep, {.rounds = 3, .stream = false});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  for (const auto& rq : ep.received()) {
    auto body = json::parse(rq.body);
    EXPECT_EQ(body["model"], "test-model");
    EXPECT_FALSE(body.value("stream", false));
    EXPECT_TRUE(body.contains("max_tokens"));  // openai_compatible: max_tokens, no stream_options
    EXPECT_FALSE(body.contains("stream_options"));
  }
  auto db = open_db(r);
  for (const char* id : {"r1_c0", "r2_c1", "r3_c2"}) expect_verified(db, id, 1);
  expect_summary(r, 3, {});
  auto summary = json::parse(e2e::slurp(r.run_dir / "summary.json"));
  EXPECT_TRUE(summary["success"].get<bool>()) << summary.dump(2);
  // The start line says which provider, model and endpoint the run uses, and where the key came from.
  EXPECT_NE((r.proc.out + r.proc.err).find("LLM openai_compatible test-model at " + ep.base_url() + " (key from TEST_LLM_KEY)"),
            std::string::npos)
      << r.proc.out << r.proc.err;
  // The reply the candidate used is kept in its work directory.
  EXPECT_NE(e2e::slurp(r.run_dir / "candidates/r1_c0/1_optimize_reply.txt").find("e2e variant 0"), std::string::npos);
}

TEST(E2eLlm, ProviderAndBaseUrlFlagsTurnAReplayStrategyIntoARealOne) {
  // A strategy whose config replays recorded replies reaches a real endpoint with --provider and
  // --base-url (as `ask` does); --model alone on it is refused, since no model would be asked.
  e2e::scratch s;
  scripted_endpoint ep({});
  auto yaml = config_yaml("http://127.0.0.1:9/v1", {.rounds = 1, .stream = false});
  yaml.replace(yaml.find("provider: openai_compatible"), 27, "provider: replay");
  const auto cfg = s.write("replay.yaml", yaml);
  const kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey},
                            {"OPENAI_API_KEY", ""},    {"ANTHROPIC_API_KEY", ""}, {"HTTP_PROXY", ""},
                            {"http_proxy", ""},        {"LLM_RELAY_URL", ""}};
  const std::vector<std::string> base{"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()};
  auto refused = base;
  refused.insert(refused.end(), {"--model", "claude-opus-4-6"});
  auto r0 = e2e::run(refused, env, s.dir.string(), 60);
  EXPECT_EQ(r0.exit_code, 2) << r0.err;
  EXPECT_NE(r0.err.find("--model claude-opus-4-6: strategy 'replay' replays recorded replies"), std::string::npos) << r0.err;
  EXPECT_NE(r0.err.find("--provider"), std::string::npos) << r0.err;
  EXPECT_TRUE(e2e::run_dirs(s.dir / "runs").empty());
  auto args = base;
  args.insert(args.end(), {"--provider", "openai_compatible", "--base-url", ep.base_url(), "--model", "test-model"});
  auto r = e2e::run(args, env, s.dir.string(), 120);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  ASSERT_EQ(ep.requests(), 1);
  EXPECT_EQ(json::parse(ep.received().front().body)["model"], "test-model");
  EXPECT_NE((r.out + r.err).find("LLM openai_compatible test-model at " + ep.base_url()), std::string::npos) << r.out << r.err;
}

TEST(E2eLlm, SuccessWithStreaming) {
  e2e::scratch s;
  scripted_endpoint ep({});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true});
  expect_run_survived(r, ep);
  ASSERT_EQ(ep.requests(), 2);
  for (const auto& rq : ep.received()) EXPECT_TRUE(json::parse(rq.body).value("stream", false));
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 1);
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlm, RateLimitedWithRetryAfterThenSuccess) {
  e2e::scratch s;
  scripted_endpoint ep({reply(with_header(
      json_reply(429, openai_error_body("Rate limit reached for test-model", "requests", "rate_limit_exceeded")),
      "retry-after", "1"))});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);  // r1_c0 twice, r2_c1 once
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 2);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 0}});
  // The retry is in the event log with the server's wait.
  bool retry_event = false;
  for (const auto& e : e2e::events(r.run_dir))
    if (e.value("type", "") == "llm_retry" && e.dump().find("rate_limited") != std::string::npos &&
        e.dump().find("retry-after 1.0 s") != std::string::npos)
      retry_event = true;
  EXPECT_TRUE(retry_event);
}

TEST(E2eLlm, ServerErrorThenSuccess) {
  e2e::scratch s;
  scripted_endpoint ep({reply(json_reply(500, openai_error_body("The server had an error", "server_error", "")))});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 2);
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlm, OverloadedThenSuccess) {
  e2e::scratch s;
  // 529 with retry-after: 0 keeps the (doubled) overload backoff out of the test's time.
  scripted_endpoint ep({reply(with_header(json_reply(529, openai_error_body("Overloaded", "overloaded_error", "")),
                                          "retry-after", "0"))});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 2);
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlm, ReplyWithoutCodeFailsTheCandidateAsNoCode) {
  e2e::scratch s;
  auto prose = [](const received_request& rq) {
    return ok_reply(rq, "I would tile the matrix and use shared memory, but I will not write the code today.");
  };
  scripted_endpoint ep({prose, prose});  // the reply and the one follow-up (max_refine_attempts: 1)
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);  // a reply without code is asked again, not retried as an error
  auto db = open_db(r);
  expect_no_code(db, "r1_c0", 1);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"no_code", 1}});
}

TEST(E2eLlm, ReplyWithoutCodeIsAskedAgainInTheSameConversation) {
  e2e::scratch s;
  scripted_endpoint ep({[](const received_request& rq) { return ok_reply(rq, "Sure, tiling should help here."); }});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  ASSERT_EQ(ep.requests(), 3);
  auto followup = json::parse(ep.received()[1].body);
  ASSERT_EQ(followup["messages"].size(), 3u) << followup.dump(2);
  EXPECT_EQ(followup["messages"][1]["role"], "assistant");
  EXPECT_EQ(followup["messages"][1]["content"], "Sure, tiling should help here.");
  EXPECT_NE(followup["messages"][2]["content"].get<std::string>().find("could not be used"), std::string::npos);
  auto db = open_db(r);
  auto p = db.get_program("r1_c0");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->status, "verified");
  auto calls = calls_of(db, "r1_c0");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].purpose, "optimize");
  EXPECT_EQ(calls[1].purpose, "optimize_followup");
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlm, AuthErrorIsNeverRetriedAndTheEchoedKeyIsScrubbed) {
  e2e::scratch s;
  // Some gateways echo the rejected key in their error text: it must not reach the run directory.
  scripted_endpoint ep({reply(json_reply(
      401, openai_error_body("Incorrect API key provided: " + kKey + ". You can find your API key at example.com.",
                             "invalid_request_error", "invalid_api_key")))});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 2);  // one attempt for r1_c0, then r2_c1
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "auth", 1);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 1}});
}

TEST(E2eLlm, ConnectionDroppedMidStreamIsRetried) {
  e2e::scratch s;
  auto dropped = [](const received_request& rq) {
    auto r = kagent::test::openai_sse(kernel_text(98), 40, 50);
    r.chunks.resize(3);  // the role chunk and two pieces of text, then the connection goes
    r.drop_mid_body = true;
    (void)rq;
    return r;
  };
  scripted_endpoint ep({dropped});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 2);
  // The candidate's kernel is the complete second reply, not the cut first one.
  EXPECT_EQ(db.get_program("r1_c0")->code.find("e2e variant 98"), std::string::npos);
  EXPECT_NE(db.get_program("r1_c0")->code.find("e2e variant 1"), std::string::npos);
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlm, ConnectionDroppedOnEveryAttemptFailsWithConnection) {
  e2e::scratch s;
  auto dropped = [](const received_request&) {
    auto r = kagent::test::openai_sse(kernel_text(97), 40, 50);
    r.chunks.resize(2);
    r.drop_mid_body = true;
    return r;
  };
  scripted_endpoint ep({dropped, dropped});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true, .max_retries = 1});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "connection", 2);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 1}});
}

TEST(E2eLlm, SseErrorEventFailsTheCandidateAfterRetries) {
  e2e::scratch s;
  auto error_stream = [](const received_request&) {
    auto r = kagent::test::openai_sse(kernel_text(96), 40, 50);
    r.chunks.resize(2);
    r.chunks.push_back(sse("", {{"error", {{"message", "the model crashed while generating"},
                                           {"type", "generation_failed"}, {"code", nullptr}}}}));
    return r;  // a clean end of the HTTP body after the error event
  };
  scripted_endpoint ep({error_stream, error_stream});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true, .max_retries = 1});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "stream_error", 2);
  EXPECT_NE(db.get_program("r1_c0")->error.value_or("").find("the model crashed while generating"), std::string::npos);
  expect_verified(db, "r2_c1", 1);
}

// One run, five rounds, a different fault in each of the first four: each affected candidate is
// recorded with its own reason and the last one still succeeds.
TEST(E2eLlm, ScriptedFaultSequenceAcrossRounds) {
  e2e::scratch s;
  auto rate_limited = json_reply(429, openai_error_body("slow down", "requests", "rate_limit_exceeded"));
  rate_limited.headers.emplace_back("retry-after", "0");
  scripted_endpoint ep({
      reply(rate_limited),                                                          // r1_c0, attempt 1
      [](const received_request& rq) { return ok_reply(rq, kernel_text(1001)); },  // r1_c0, attempt 2
      [](const received_request& rq) { return ok_reply(rq, "No code this time."); },  // r2_c1
      [](const received_request& rq) { return ok_reply(rq, "Still no code."); },      // r2_c1 follow-up
      reply(json_reply(401, openai_error_body("bad key", "invalid_request_error", "invalid_api_key"))),  // r3_c2
      reply(json_reply(404, openai_error_body("The model 'test-model' does not exist", "invalid_request_error",
                                              "model_not_found"))),  // r4_c3
  });
  auto r = run_against(s, ep, {.rounds = 5, .stream = false, .max_retries = 2});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 7);
  auto db = open_db(r);
  expect_verified(db, "r1_c0", 2);
  expect_no_code(db, "r2_c1", 1);
  expect_failed(db, "r3_c2", "llm", "auth", 1);
  expect_failed(db, "r4_c3", "llm", "bad_request", 1);
  expect_verified(db, "r5_c4", 1);
  expect_summary(r, 5, {{"llm", 2}, {"no_code", 1}});
  EXPECT_EQ(rewrite_calls(db).size(), 6u);
}

// Servers that echo the key back in an error text, on every error path the client reads a body
// from: an HTTP error, a 429, an SSE error event, and a reply that is not JSON. max_retries: 0
// keeps it fast; each candidate fails on its one attempt and the key is nowhere in the run.
TEST(E2eLlm, KeyEchoedOnEveryErrorPathNeverReachesTheRunDirectory) {
  e2e::scratch s;
  const std::string echo = "request with key " + kKey + " rejected";
  auto sse_error = [echo](const received_request&) {
    auto r = served_by_test_model(kagent::test::openai_sse(kernel_text(94), 40, 50));
    r.chunks.resize(2);
    r.chunks.push_back(sse("", {{"error", {{"message", echo}, {"type", "generation_failed"}, {"code", nullptr}}}}));
    return r;
  };
  scripted_reply not_json;
  not_json.headers = {{"Content-Type", "application/json"}};
  not_json.chunks = {"<html>gateway error: " + echo + "</html>"};
  scripted_endpoint ep({
      reply(json_reply(500, openai_error_body(echo, "server_error", ""))),                      // r1_c0
      reply(json_reply(429, openai_error_body(echo, "requests", "rate_limit_exceeded"))),       // r2_c1
      sse_error,                                                                                 // r3_c2
      reply(not_json),                                                                           // r4_c3
      reply(json_reply(400, openai_error_body(echo, "invalid_request_error", "bad_parameter"))),  // r5_c4
  });
  auto r = run_against(s, ep, {.rounds = 6, .stream = true, .max_retries = 0});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 6);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "server", 1);
  expect_failed(db, "r2_c1", "llm", "rate_limited", 1);
  expect_failed(db, "r3_c2", "llm", "stream_error", 1);
  {  // its kind is checked by StreamedRequestAnsweredWithAnHtmlPageIsMalformed
    auto p = db.get_program("r4_c3");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->status, "failed");
    EXPECT_EQ(p->failure_cause.value_or(""), "llm");
  }
  expect_failed(db, "r5_c4", "llm", "bad_request", 1);
  expect_verified(db, "r6_c5", 1);
  // The rest of the message survives the scrubbing, so the cause stays readable.
  EXPECT_NE(db.get_program("r1_c0")->error.value_or("").find("rejected"), std::string::npos);
  expect_summary(r, 6, {{"llm", 5}});
}

// A gateway that answers a streamed request with a 200 HTML page: the reply is malformed, and the
// candidate's error should say so rather than blame the connection.
TEST(E2eLlm, StreamedRequestAnsweredWithAnHtmlPageIsMalformed) {
  e2e::scratch s;
  scripted_reply html;
  html.headers = {{"Content-Type", "text/html"}};
  html.chunks = {"<html><body><h1>502 Bad Gateway</h1></body></html>"};
  scripted_endpoint ep({reply(html)});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true, .max_retries = 0});
  expect_run_survived(r, ep);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "malformed", 1);
  expect_verified(db, "r2_c1", 1);
}

// A Retry-After beyond the client's ceiling (600 s) is not slept through: the call gives up at once.
TEST(E2eLlm, RetryAfterBeyondTheCeilingGivesUpAtOnce) {
  e2e::scratch s;
  auto too_long = json_reply(429, openai_error_body("daily limit reached", "requests", "rate_limit_exceeded"));
  too_long.headers.emplace_back("retry-after", "3600");
  scripted_endpoint ep({reply(too_long)});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 2);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "rate_limited", 1);
  expect_verified(db, "r2_c1", 1);
}

// Nothing listens at the endpoint (and the preflight is off): every candidate fails with a
// connection error. A search in which no candidate got a reply found nothing: exit 1, with the first
// LLM error as the reason; the run directory is still complete.
TEST(E2eLlm, EndpointDownFailsEveryCandidateAndTheRun) {
  e2e::scratch s;
  std::string dead_url;
  {
    scripted_endpoint gone({});
    dead_url = gone.base_url();
  }  // closed: connections to its port are refused
  const auto cfg = s.write("down.yaml", config_yaml(dead_url, {.rounds = 2, .max_retries = 0}));
  auto proc = e2e::run({"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()},
                       {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey},
                        {"HTTP_PROXY", ""}, {"http_proxy", ""}, {"ALL_PROXY", ""}, {"all_proxy", ""},
                        {"CUDA_VISIBLE_DEVICES", ""}, {"HIP_VISIBLE_DEVICES", ""}},
                       s.dir.string(), 120);
  EXPECT_EQ(proc.exit_code, 1) << proc.err << proc.out;
  EXPECT_NE(proc.err.find("kagent-actors: run failed: no candidate got an LLM reply; the first error: "),
            std::string::npos)
      << proc.err;
  auto dirs = e2e::run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  ASSERT_TRUE(fs::exists(dirs.front() / "summary.json"));
  auto summary = json::parse(e2e::slurp(dirs.front() / "summary.json"));
  EXPECT_FALSE(summary.value("success", true)) << summary.dump(2);
  EXPECT_EQ(summary.value("run_state", ""), "failed");
  auto db = program_db::open(dirs.front() / "program.db", program_db::mode::read_only);
  for (const char* id : {"r1_c0", "r2_c1"}) expect_failed(db, id, "llm", "connection", 1);
  for (const auto& e : fs::recursive_directory_iterator(dirs.front())) {
    if (e.is_regular_file()) {
      EXPECT_EQ(e2e::slurp(e.path()).find(kKey), std::string::npos) << e.path();
    }
  }
}

// A reply cut at max_tokens (finish_reason "length") is an incomplete kernel: the candidate fails
// with the reason instead of running half a file.
TEST(E2eLlm, ReplyCutAtMaxTokensFailsTheCandidate) {
  e2e::scratch s;
  scripted_endpoint ep({[](const received_request&) {
    auto r = served_by_test_model(kagent::test::openai_json(kernel_text(93), 40, 50));
    auto body = json::parse(r.chunks.front());
    body["choices"][0]["finish_reason"] = "length";
    r.chunks = {body.dump()};
    return r;
  }});
  auto r = run_against(s, ep, {});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 2);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "truncated", 1);
  EXPECT_NE(db.get_program("r1_c0")->error.value_or("").find("max_tokens"), std::string::npos);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 1}});
}

// Several candidates of one round call the LLM at once and are all rate limited: each one's
// retries are its own, and every call is accounted exactly once.
TEST(E2eLlm, ConcurrentCandidatesRetryIndependently) {
  e2e::scratch s;
  auto limited = json_reply(429, openai_error_body("slow down", "requests", "rate_limit_exceeded"));
  limited.headers.emplace_back("retry-after", "0");
  scripted_endpoint ep({reply(limited), reply(limited), reply(limited)});
  auto r = run_against(s, ep, {.rounds = 1, .samples_per_prompt = 3, .strategy = "beam_search", .num_workers = 3});
  expect_run_survived(r, ep);
  auto db = open_db(r);
  auto calls = rewrite_calls(db);
  ASSERT_EQ(calls.size(), 3u);
  int attempts = 0;
  std::set<std::string> ids;
  for (const auto& c : calls) {
    EXPECT_TRUE(c.ok) << c.candidate_id.value_or("") << " " << c.error_kind.value_or("");
    attempts += c.attempts;
    ids.insert(c.candidate_id.value_or(""));
    auto p = db.get_program(c.candidate_id.value_or(""));
    ASSERT_TRUE(p) << c.candidate_id.value_or("");
    EXPECT_EQ(p->status, "verified") << p->id << ": " << p->error.value_or("");
  }
  EXPECT_EQ(ids.size(), 3u);
  // Three refusals and three successes, whatever order the requests arrived in.
  EXPECT_EQ(ep.requests(), 6);
  EXPECT_EQ(attempts, 6);
  expect_summary(r, 3, {});
}

// ---- preflight ------------------------------------------------------------------------------------

namespace {
run_outcome run_with_preflight(const e2e::scratch& s, const std::string& base_url) {
  const auto cfg = s.write("preflight.yaml", config_yaml(base_url, {.rounds = 1, .stream = false, .preflight = true}));
  run_outcome out;
  out.proc = e2e::run({"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()},
                      {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey}, {"HTTP_PROXY", ""},
                       {"http_proxy", ""}, {"ALL_PROXY", ""}, {"all_proxy", ""}},
                      s.dir.string(), 120);
  return out;
}
void expect_preflight_refused(const run_outcome& r, const e2e::scratch& s, const std::string& needle) {
  EXPECT_EQ(r.proc.exit_code, 2) << r.proc.err << r.proc.out;
  EXPECT_EQ(std::count(r.proc.err.begin(), r.proc.err.end(), '\n'), 1) << r.proc.err;
  EXPECT_EQ(r.proc.err.rfind("kagent-actors: error: LLM preflight failed for openai_compatible model test-model at ", 0), 0u)
      << r.proc.err;
  EXPECT_NE(r.proc.err.find(needle), std::string::npos) << r.proc.err;
  EXPECT_EQ(r.proc.err.find(kKey), std::string::npos) << "the key is on stderr";
  EXPECT_TRUE(e2e::run_dirs(s.dir / "runs").empty()) << "a run directory was made";
}
}  // namespace

TEST(E2eLlm, PreflightRefusesARejectedKeyBeforeAnythingIsCreated) {
  // The endpoint answers 401 and echoes the key: one line, exit 2, no run directory, one request.
  e2e::scratch s;
  scripted_endpoint ep({reply(json_reply(401, openai_error_body("Incorrect API key provided: " + kKey, "invalid_request_error",
                                                                "invalid_api_key")))});
  auto r = run_with_preflight(s, ep.base_url());
  expect_preflight_refused(r, s, "auth");
  EXPECT_NE(r.proc.err.find("TEST_LLM_KEY"), std::string::npos) << r.proc.err;
  EXPECT_EQ(ep.requests(), 1);
}

TEST(E2eLlm, PreflightRefusesAnUnknownModelAndAnUnreachableEndpoint) {
  e2e::scratch s;
  scripted_endpoint ep({reply(json_reply(404, openai_error_body("The model `test-model` does not exist", "invalid_request_error",
                                                                "model_not_found")))});
  expect_preflight_refused(run_with_preflight(s, ep.base_url()), s, "does not exist");
  std::string dead_url;
  {
    scripted_endpoint gone({});
    dead_url = gone.base_url();
  }
  expect_preflight_refused(run_with_preflight(s, dead_url), s, "connection");
}

TEST(E2eLlm, PreflightLetsATransientAnswerAndAGoodEndpointRun) {
  // 503 to the preflight is transient: the run goes on (and says so); its candidate is verified.
  e2e::scratch s;
  scripted_endpoint ep({reply(json_reply(503, openai_error_body("try later", "server_error", "overloaded")))});
  auto r = run_with_preflight(s, ep.base_url());
  EXPECT_EQ(r.proc.exit_code, 0) << r.proc.err << r.proc.out;
  EXPECT_NE((r.proc.out + r.proc.err).find("LLM preflight got a transient answer"), std::string::npos) << r.proc.err;
  EXPECT_EQ(ep.requests(), 2);  // the preflight, then the candidate's optimize call
  auto first = json::parse(ep.received().front().body);
  EXPECT_EQ(first["model"], "test-model");
  EXPECT_LE(first.value("max_tokens", 0), 16);
}

TEST(E2eLlm, ModelsFromTwoVendorsInOneRunEachReachTheirOwnProvider) {
  // strategy_config.models lists an Anthropic model and an OpenAI-compatible one, each with its own
  // endpoint and key variable: every request goes to its model's provider, in that provider's wire
  // format and with that provider's key, and the summary splits usage and cost per model.
  e2e::scratch s;
  const std::string key_a = "sk-ant-e2e-OTHER-456";
  auto answered_as_asked = [](kagent::test::scripted_reply r) {  // the fake names claude-opus-4-6
    for (auto& c : r.chunks)
      for (auto at = c.find("\"claude-opus-4-6\""); at != std::string::npos; at = c.find("\"claude-opus-4-6\"", at))
        c.replace(at, 17, "\"claude-e2e\"");
    return r;
  };
  loopback_server anthropic([&](const received_request& rq, int i) {
    if (is_side_request(rq)) return answered_as_asked(kagent::test::anthropic_json(side_reply_text(rq), 30, 40));
    return answered_as_asked(kagent::test::anthropic_json(kernel_text(100 + i), 30, 40));
  });
  scripted_endpoint openai({});
  std::string yaml = config_yaml(openai.base_url(), {.rounds = 1, .stream = false, .strategy = "beam_search"});
  yaml.replace(yaml.find("strategy_config:\n"), 17,
               "strategy_config:\n  models:\n    - {model: claude-e2e, provider: anthropic, base_url: '" +
                   anthropic.url() + "', api_key_env: TEST_ANTHROPIC_KEY}\n    - test-model\n");
  const auto cfg = s.write("two_vendors.yaml", yaml);
  const kagent::env_map env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey},
                            {"TEST_ANTHROPIC_KEY", key_a}, {"OPENAI_API_KEY", ""}, {"ANTHROPIC_API_KEY", ""},
                            {"HTTP_PROXY", ""}, {"http_proxy", ""}, {"LLM_RELAY_URL", ""}};
  auto r = e2e::run({"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()}, env,
                    s.dir.string(), 120);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  // The start line names both.
  EXPECT_NE(r.err.find("claude-e2e via anthropic at " + anthropic.url() + " (key from TEST_ANTHROPIC_KEY)"),
            std::string::npos) << r.err;
  int to_anthropic = 0;
  for (const auto& rq : anthropic.received()) {
    ++to_anthropic;
    EXPECT_EQ(rq.target, "/v1/messages");
    EXPECT_EQ(rq.header("x-api-key"), key_a);
    EXPECT_EQ(json::parse(rq.body)["model"], "claude-e2e");
  }
  EXPECT_GE(to_anthropic, 1);
  ASSERT_GE(openai.requests(), 1);
  for (const auto& rq : openai.received()) {
    EXPECT_EQ(rq.header("authorization"), "Bearer " + kKey);
    EXPECT_EQ(json::parse(rq.body)["model"], "test-model");
  }
  const auto dirs = e2e::run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  auto summary = json::parse(e2e::slurp(dirs[0] / "summary.json"));
  std::map<std::string, std::string> provider_of;
  for (const auto& m : summary["llm"]["by_model"]) {
    provider_of[m.value("model", "")] = m.value("provider", "");
    EXPECT_GE(m.value("calls", 0), 1) << m.dump();
  }
  EXPECT_EQ(provider_of["claude-e2e"], "anthropic") << summary["llm"].dump(2);
  EXPECT_EQ(provider_of["test-model"], "openai_compatible") << summary["llm"].dump(2);
  // The summary table splits the usage per model.
  EXPECT_NE(r.out.find("claude-e2e (anthropic):"), std::string::npos) << r.out;
  // Neither key is in the run directory.
  for (const auto& f : fs::recursive_directory_iterator(dirs[0]))
    if (f.is_regular_file()) {
      const auto text = e2e::slurp(f.path());
      EXPECT_EQ(text.find(key_a), std::string::npos) << f.path();
      EXPECT_EQ(text.find(kKey), std::string::npos) << f.path();
    }
}
