// End-to-end LLM faults whose retries use the real exponential backoff or wait out a timeout
// (several seconds each).
#include "tests/e2e_llm/e2e_llm_util.hpp"

using namespace e2e_llm;

namespace {

// A gateway's HTML error page sent as a 200 "JSON" reply.
scripted_reply malformed() {
  scripted_reply r;
  r.headers = {{"Content-Type", "application/json"}};
  r.chunks = {"<html><body><h1>502 Bad Gateway</h1>upstream sent garbage</body></html>"};
  return r;
}

}  // namespace

TEST(E2eLlmSlow, MalformedJsonFailsTheCandidateAfterAllRetries) {
  e2e::scratch s;
  scripted_endpoint ep({reply(malformed()), reply(malformed()), reply(malformed())});
  auto r = run_against(s, ep, {.rounds = 2, .stream = false, .max_retries = 2});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 4);  // 1 + 2 retries for r1_c0, 1 for r2_c1
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "malformed", 3);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 1}});
}

TEST(E2eLlmSlow, StreamThatStallsPastTheIdleTimeoutFailsWithTimeout) {
  e2e::scratch s;
  auto stalled = [](const received_request&) {
    auto r = served_by_test_model(kagent::test::openai_sse(kernel_text(95), 40, 50));
    r.chunks.resize(3);
    r.delay_between_s = 1.6;  // silence longer than idle_timeout_s: 1, well inside timeout_s: 5
    return r;
  };
  scripted_endpoint ep({stalled, stalled});
  auto r = run_against(s, ep, {.rounds = 2, .stream = true, .max_retries = 1, .timeout_s = 5, .idle_timeout_s = 1});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "timeout", 2);
  expect_verified(db, "r2_c1", 1);
}

TEST(E2eLlmSlow, SlowServerPastTheTimeoutFailsWithTimeout) {
  e2e::scratch s;
  scripted_reply slow = kagent::test::openai_json(kernel_text(99), 40, 50);
  slow.delay_before_s = 1.6;  // past timeout_s: 1
  scripted_endpoint ep({reply(slow), reply(slow)});
  auto r = run_against(s, ep, {.rounds = 2, .stream = false, .max_retries = 1, .timeout_s = 1});
  expect_run_survived(r, ep);
  EXPECT_EQ(ep.requests(), 3);
  auto db = open_db(r);
  expect_failed(db, "r1_c0", "llm", "timeout", 2);
  expect_verified(db, "r2_c1", 1);
  expect_summary(r, 2, {{"llm", 1}});
}
