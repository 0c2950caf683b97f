// Retry decisions, rate limiting with an injected clock, usage/cost/budget, kernel extraction and
// model -> provider resolution.
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/llm/extract.hpp"
#include "platform/llm/provider.hpp"
#include "platform/llm/retry.hpp"

using namespace kagent;
using namespace std::chrono_literals;

TEST(LlmRetry, TransientErrorsBackOffExponentiallyWithJitter) {
  retry_config cfg;
  cfg.max_retries = 5;
  cfg.base_delay_s = 2;
  cfg.max_delay_s = 60;
  std::mt19937_64 rng(1);
  for (auto kind : {llm_error_kind::server, llm_error_kind::timeout, llm_error_kind::connection,
                    llm_error_kind::stream_error, llm_error_kind::malformed}) {
    llm_error e(kind, "x");
    double prev_cap = 0;
    for (int attempt = 1; attempt <= 5; ++attempt) {
      auto d = decide_retry(e, attempt, cfg, rng);
      ASSERT_TRUE(d.retry) << to_string(kind) << " " << attempt;
      double cap = std::min(60.0, 2.0 * (1 << (attempt - 1)));
      EXPECT_GE(d.delay_s, cap * 0.5);
      EXPECT_LE(d.delay_s, cap);
      EXPECT_GE(cap, prev_cap);
      prev_cap = cap;
    }
    EXPECT_FALSE(decide_retry(e, 6, cfg, rng).retry);
  }
}

TEST(LlmRetry, RetryAfterIsHonoured) {
  retry_config cfg;
  std::mt19937_64 rng(7);
  auto d = decide_retry(llm_error(llm_error_kind::rate_limited, "x", 429, 30.0), 1, cfg, rng);
  EXPECT_TRUE(d.retry);
  EXPECT_GE(d.delay_s, 30.0);
  EXPECT_LE(d.delay_s, 31.0);
  EXPECT_NE(d.reason.find("retry-after"), std::string::npos);
  cfg.max_retry_after_s = 100;
  EXPECT_FALSE(decide_retry(llm_error(llm_error_kind::rate_limited, "x", 429, 3600.0), 1, cfg, rng).retry);
  auto plain = decide_retry(llm_error(llm_error_kind::rate_limited, "x", 429), 1, cfg, rng);
  EXPECT_TRUE(plain.retry);
  EXPECT_LE(plain.delay_s, cfg.base_delay_s);
}

TEST(LlmRetry, OverloadBacksOffLonger) {
  retry_config cfg;
  std::mt19937_64 rng(3);
  auto d = decide_retry(llm_error(llm_error_kind::overloaded, "x", 529), 3, cfg, rng);
  EXPECT_TRUE(d.retry);
  EXPECT_GE(d.delay_s, 8.0 * cfg.overload_factor * 0.5);
}

TEST(LlmRetry, PermanentErrorsAreNeverRetried) {
  retry_config cfg;
  std::mt19937_64 rng(3);
  for (auto kind : {llm_error_kind::auth, llm_error_kind::quota, llm_error_kind::bad_request, llm_error_kind::budget,
                    llm_error_kind::replay_exhausted, llm_error_kind::unavailable}) {
    auto d = decide_retry(llm_error(kind, "x"), 1, cfg, rng);
    EXPECT_FALSE(d.retry) << to_string(kind);
    EXPECT_NE(d.reason.find("not retried"), std::string::npos);
  }
}

TEST(LlmRetry, SameSeedSameDelays) {
  retry_config cfg;
  std::mt19937_64 a(99), b(99);
  llm_error e(llm_error_kind::server, "x");
  for (int i = 1; i <= 4; ++i) EXPECT_DOUBLE_EQ(decide_retry(e, i, cfg, a).delay_s, decide_retry(e, i, cfg, b).delay_s);
}

TEST(LlmRateLimit, TokenBucketRefillsWithTheClock) {
  auto now = std::chrono::steady_clock::time_point{};
  clock_fn clock = [&] { return now; };
  token_bucket b(60, clock);  // one per second, burst 60
  EXPECT_EQ(b.wait_s(60), 0);
  b.take(60);
  EXPECT_NEAR(b.wait_s(1), 1.0, 1e-9);
  now += 500ms;
  EXPECT_NEAR(b.wait_s(1), 0.5, 1e-9);
  now += 10s;
  EXPECT_EQ(b.wait_s(10), 0);
  now += 1h;
  EXPECT_NEAR(b.level(), 60, 1e-9);  // never above one minute's worth
  token_bucket off(0, clock);
  off.take(1e9);
  EXPECT_EQ(off.wait_s(1e9), 0);
}

TEST(LlmRateLimit, LimiterAppliesRpmTpmAndConcurrency) {
  auto now = std::chrono::steady_clock::time_point{};
  rate_limiter rl(2, 1000, 3, [&] { return now; });
  EXPECT_EQ(rl.try_acquire(100), 0);
  EXPECT_EQ(rl.try_acquire(100), 0);
  double w = rl.try_acquire(100);  // third request within the minute
  EXPECT_NEAR(w, 30.0, 1e-6);
  now += 30s;
  EXPECT_EQ(rl.try_acquire(100), 0);
  EXPECT_EQ(rl.in_flight(), 3);
  now += 10min;
  EXPECT_GT(rl.try_acquire(1), 0);  // all three slots busy
  rl.release(100, 100);
  EXPECT_EQ(rl.try_acquire(1), 0);

  rate_limiter tokens(0, 1000, 0, [&] { return now; });
  EXPECT_EQ(tokens.try_acquire(900), 0);
  tokens.release(900, 900);
  EXPECT_NEAR(tokens.try_acquire(200), 6.0, 1e-6);  // 100 left, 100 more at 1000/min = 6 s
  now += 6s;
  EXPECT_EQ(tokens.try_acquire(200), 0);
  tokens.release(200, 2200);  // the reply was much bigger than estimated: the bucket goes negative
  EXPECT_GT(tokens.try_acquire(10), 60.0);
}

TEST(LlmUsage, PricesLedgerAndBudgets) {
  ASSERT_TRUE(price_for("claude-opus-4-6", {}));
  EXPECT_DOUBLE_EQ(price_for("claude-opus-4-6", {})->in_per_mtok, 5);
  EXPECT_DOUBLE_EQ(price_for("claude-opus-4-1-20250805", {})->out_per_mtok, 75);
  EXPECT_DOUBLE_EQ(price_for("gpt-5-mini", {})->in_per_mtok, 0.25);
  EXPECT_FALSE(price_for("my-local-model", {}));
  EXPECT_DOUBLE_EQ(price_for("my-local-model", {{"my-local-model", {1, 2}}})->out_per_mtok, 2);

  usage_ledger ledger({{"m", {10, 20}}});
  ledger.record("optimize", "m", 1000000, 500000);
  ledger.record("optimize", "m", 0, 0);
  ledger.record("bottleneck", "m", 100000, 0);
  ledger.record_failure("optimize", "m");
  auto rows = ledger.rows();
  EXPECT_EQ((rows[{"optimize", "m"}].calls), 2);
  EXPECT_EQ((rows[{"optimize", "m"}].failures), 1);
  EXPECT_DOUBLE_EQ((rows[{"optimize", "m"}].cost_usd), 20.0);
  EXPECT_DOUBLE_EQ(ledger.total_cost(), 21.0);
  EXPECT_EQ(ledger.total().input_tokens, 1100000);

  llm_request req;
  req.messages = {{"user", std::string(4000, 'x')}};  // ~1000 tokens
  req.max_tokens = 100000;
  EXPECT_NO_THROW(ledger.check_budget(req, "m", 0, 0));
  EXPECT_NO_THROW(ledger.check_budget(req, "m", 50, 3));  // worst case 0.01 + 2.0 USD
  try {
    ledger.check_budget(req, "m", 20, 0);
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::budget);
    EXPECT_NE(std::string(e.what()).find("llm.budget_usd"), std::string::npos);
  }
  try {
    ledger.check_budget(req, "m", 0, 1.0);
    FAIL();
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::budget);
    EXPECT_NE(std::string(e.what()).find("llm.call_budget_usd"), std::string::npos);
  }
}

// ---- extraction ----------------------------------------------------------------------------------

namespace {
std::string kernel(const std::string& extra = "") {
  return "import torch\nimport triton\n\n" + extra +
         "def kernel_function(x, y):\n    # add two tensors on the device\n    out = torch.empty_like(x)\n    return out\n";
}
}  // namespace

TEST(LlmExtract, PicksThePythonBlockDefiningKernelFunction) {
  std::string reply = "Plan:\n```bash\nrm -rf /tmp/x && echo a very long shell block that is longer than anything\n"
                      "echo more\necho more\necho more\necho more\necho more\n```\n"
                      "```python\ndef helper():\n    return 1  # a long helper block that is long but has no entry point at all\n```\n"
                      "```python\n" + kernel() + "```\nDone.";
  auto x = extract_kernel(reply);
  ASSERT_TRUE(x.ok) << x.reason;
  EXPECT_EQ(x.code, kernel());
}

TEST(LlmExtract, LongestPythonBlockWhenNoneDefinesIt) {
  std::string reply = "```py\nshort = 1\n```\n```python\n" + std::string(150, '#') + "\nx = 2\n```";
  auto x = extract_kernel(reply);
  EXPECT_FALSE(x.ok);
  EXPECT_NE(x.code.find("x = 2"), std::string::npos);
  EXPECT_NE(x.reason.find("does not define kernel_function"), std::string::npos);
}

TEST(LlmExtract, GenericFenceAndBareCode) {
  auto x = extract_kernel("```\n" + kernel() + "```");
  EXPECT_TRUE(x.ok) << x.reason;
  auto bare = extract_kernel(kernel());
  EXPECT_TRUE(bare.ok) << bare.reason;
  EXPECT_EQ(bare.code, kernel());
  auto prose_first = extract_kernel("Sure, here it is:\n\n" + kernel());
  EXPECT_TRUE(prose_first.ok) << prose_first.reason;
  EXPECT_EQ(prose_first.code, kernel());
}

TEST(LlmExtract, RejectionsCarryAQuotableReason) {
  auto empty = extract_kernel("   \n");
  EXPECT_FALSE(empty.ok);
  EXPECT_NE(empty.reason.find("empty"), std::string::npos);
  auto prose = extract_kernel("I cannot do that, the kernel is already optimal.");
  EXPECT_FALSE(prose.ok);
  EXPECT_NE(prose.reason.find("no code block"), std::string::npos);
  auto shortc = extract_kernel("```python\ndef kernel_function(x):\n    return x\n```");
  EXPECT_FALSE(shortc.ok);
  EXPECT_NE(shortc.reason.find("too short"), std::string::npos);
  auto truncated = extract_kernel("```python\nimport torch\n" + std::string(200, '#') + "\n@triton.jit\ndef _k(");
  EXPECT_FALSE(truncated.ok);
  EXPECT_NE(truncated.reason.find("unterminated"), std::string::npos);
  auto named = extract_kernel("```python\n" + kernel("def kernel_function_helper():\n    pass\n").substr(0, 0) +
                              "import torch\n" + std::string(120, '#') + "\ndef kernel_functionality(x):\n    pass\n```");
  EXPECT_FALSE(named.ok);
}

TEST(LlmExtract, IndentedAndAsyncDefinitionsCount) {
  auto x = extract_kernel("```python\nclass K:\n    pass\n" + std::string(120, '#') + "\n    def kernel_function(self, x):\n        return x\n```");
  EXPECT_TRUE(x.ok) << x.reason;
}

// ---- resolution ----------------------------------------------------------------------------------

namespace {
auto no_relay = [](const std::string&) { return false; };
auto relay_up = [](const std::string&) { return true; };
}  // namespace

TEST(LlmResolve, RegistryOrderAndAvailability) {
  llm_config cfg;
  env_map both{{"ANTHROPIC_API_KEY", "a-key"}, {"OPENAI_API_KEY", "o-key"}};
  EXPECT_EQ(resolve_provider(cfg, "claude-opus-4-6", both, no_relay).provider, "anthropic");
  EXPECT_EQ(resolve_provider(cfg, "o4-mini", both, no_relay).provider, "openai");
  EXPECT_EQ(resolve_provider(cfg, "gpt-5", both, relay_up).provider, "relay");
  EXPECT_EQ(resolve_provider(cfg, "gpt-5", both, no_relay).provider, "openai");
  EXPECT_EQ(resolve_provider(cfg, "claude-opus-4.5", both, relay_up).provider, "relay");
  EXPECT_EQ(resolve_provider(cfg, "some-unknown-model", both, relay_up).provider, "relay");
  auto s = resolve_provider(cfg, "claude-opus-4-6", both, no_relay);
  EXPECT_EQ(s.base_url, "https://api.anthropic.com");
  EXPECT_EQ(s.api_key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(s.api_key, "a-key");
  EXPECT_EQ(resolve_provider(cfg, "gpt-5.2", both, no_relay).base_url, "https://api.openai.com/v1");
  EXPECT_EQ(resolve_provider(cfg, "gpt-5", both, relay_up).base_url, "http://127.0.0.1:11434");
  EXPECT_EQ(resolve_provider(cfg, "gpt-5", {{"LLM_RELAY_URL", "http://relay:9"}, {"LLM_RELAY_TIMEOUT_S", "120"}}, relay_up).timeout_s, 120);
}

TEST(LlmResolve, AutoModelFollowsTheKeysTheUserHas) {
  // The default strategy's model is `auto`: it works with whichever vendor's key is set.
  llm_config cfg;
  auto a = resolve_provider(cfg, "auto", {{"ANTHROPIC_API_KEY", "a-key"}}, no_relay);
  EXPECT_EQ(a.model, "claude-opus-4-6");
  EXPECT_EQ(a.provider, "anthropic");
  auto o = resolve_provider(cfg, "auto", {{"OPENAI_API_KEY", "o-key"}}, no_relay);
  EXPECT_EQ(o.model, "gpt-5");
  EXPECT_EQ(o.provider, "openai");
  cfg.provider = "openai";
  EXPECT_EQ(resolve_provider(cfg, "auto", {{"ANTHROPIC_API_KEY", "a"}, {"OPENAI_API_KEY", "o"}}, no_relay).model, "gpt-5");
  cfg.provider.clear();
  try {
    resolve_provider(cfg, "auto", {}, no_relay);
    FAIL();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find("ANTHROPIC_API_KEY"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("OPENAI_API_KEY"), std::string::npos) << e.what();
  }
}

TEST(LlmResolve, NoProviderIsAUserError) {
  llm_config cfg;
  try {
    resolve_provider(cfg, "claude-opus-4-6", {{"ANTHROPIC_API_KEY", "your-api-key-here"}}, no_relay);
    FAIL();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find("No available provider for model claude-opus-4-6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ANTHROPIC_API_KEY"), std::string::npos);
  }
  EXPECT_THROW(resolve_provider(cfg, "my-model", {}, no_relay), user_error);
}

TEST(LlmResolve, ConfigOverrides) {
  llm_config cfg;
  cfg.provider = "openai_compatible";
  cfg.base_url = "http://localhost:8000/v1";
  cfg.model = "qwen";
  auto s = resolve_provider(cfg, "claude-opus-4-6", {}, no_relay);
  EXPECT_EQ(s.provider, "openai_compatible");
  EXPECT_EQ(s.model, "qwen");
  EXPECT_EQ(s.api_key, "");
  cfg.api_key_env = "VLLM_KEY";
  EXPECT_THROW(resolve_provider(cfg, "", {}, no_relay), user_error);
  EXPECT_EQ(resolve_provider(cfg, "", {{"VLLM_KEY", "k"}}, no_relay).api_key, "k");

  llm_config gw;
  gw.base_url = "https://gateway.example/anthropic";
  EXPECT_EQ(resolve_provider(gw, "claude-opus-4-6", {{"ANTHROPIC_API_KEY", "a"}}, no_relay).provider, "anthropic");
  EXPECT_EQ(resolve_provider(gw, "llama3", {}, no_relay).provider, "openai_compatible");

  llm_config bad;
  bad.provider = "gemini";
  EXPECT_THROW(resolve_provider(bad, "x", {}, no_relay), user_error);
  llm_config oc;
  oc.provider = "openai_compatible";
  EXPECT_THROW(resolve_provider(oc, "x", {}, no_relay), user_error);  // needs base_url
  llm_config anth;
  anth.provider = "anthropic";
  try {
    resolve_provider(anth, "claude-opus-4-6", {}, no_relay);
    FAIL();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find("ANTHROPIC_API_KEY is not set"), std::string::npos) << e.what();
  }
  llm_config rep;
  rep.replay_dir = "/some/dir";
  EXPECT_EQ(resolve_provider(rep, "claude-opus-4-6", {}, no_relay).provider, "replay");
}

// Kinds travel between actors as the enum; their names are what program.db, events.jsonl and replay
// recordings hold, so every name reads back as its kind.
TEST(LlmErrorKind, EveryKindHasANameThatReadsBack) {
  for (int k = 0; k <= static_cast<int>(kagent::last_llm_error_kind); ++k) {
    const auto kind = static_cast<kagent::llm_error_kind>(k);
    auto back = kagent::llm_error_kind_from_string(kagent::to_string(kind));
    ASSERT_TRUE(back.has_value()) << kagent::to_string(kind);
    EXPECT_EQ(*back, kind);
  }
  EXPECT_EQ(kagent::llm_error_kind_from_string("truncated"), kagent::llm_error_kind::truncated);
  EXPECT_FALSE(kagent::llm_error_kind_from_string("exploded").has_value());
  // The client's own kinds are never retried.
  for (auto k : {kagent::llm_error_kind::reply_too_large, kagent::llm_error_kind::truncated,
                 kagent::llm_error_kind::cancelled, kagent::llm_error_kind::internal})
    EXPECT_FALSE(kagent::llm_error(k, "x").transient()) << kagent::to_string(k);
}

TEST(ModelConfig, AnEntryOfAnotherVendorInheritsNeitherTheBlocksEndpointNorItsKey) {
  llm_config block;
  block.provider = "openai_compatible";
  block.base_url = "https://llm.internal/v1";
  block.api_key_env = "INTERNAL_KEY";
  block.max_tokens = 8000;
  std::map<std::string, model_endpoint> entries{{"claude-opus-4-6", {"anthropic", "", ""}},
                                                {"gpt-5", {"", "", "GPT_KEY"}},
                                                {"own", {"anthropic", "https://proxy.example", "PROXY_KEY"}}};
  // A model without an entry: the block as it is, with that model.
  auto plain = config_for_model(block, "qwen", entries);
  EXPECT_EQ(plain.model, "qwen");
  EXPECT_EQ(plain.base_url, "https://llm.internal/v1");
  EXPECT_EQ(plain.api_key_env, "INTERNAL_KEY");
  // Another vendor: the internal endpoint and its key variable are dropped, the rest stays.
  auto other = config_for_model(block, "claude-opus-4-6", entries);
  EXPECT_EQ(other.provider, "anthropic");
  EXPECT_EQ(other.base_url, "");
  EXPECT_EQ(other.api_key_env, "");
  EXPECT_EQ(other.max_tokens, 8000);
  // resolved, it reaches Anthropic with Anthropic's key, never INTERNAL_KEY.
  env_map env{{"ANTHROPIC_API_KEY", "a-key"}, {"INTERNAL_KEY", "i-key"}};
  auto s = resolve_provider(other, "claude-opus-4-6", env, [](const std::string&) { return false; });
  EXPECT_EQ(s.api_key_env, "ANTHROPIC_API_KEY");
  EXPECT_EQ(s.api_key, "a-key");
  EXPECT_EQ(s.base_url, "https://api.anthropic.com");
  // The same vendor keeps the block's endpoint; an entry's own settings win.
  auto same = config_for_model(block, "gpt-5", entries);
  EXPECT_EQ(same.base_url, "https://llm.internal/v1");
  EXPECT_EQ(same.api_key_env, "GPT_KEY");
  auto own = config_for_model(block, "own", entries);
  EXPECT_EQ(own.provider, "anthropic");
  EXPECT_EQ(own.base_url, "https://proxy.example");
  EXPECT_EQ(own.api_key_env, "PROXY_KEY");
}
