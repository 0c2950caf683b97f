#pragma once
// Retry policy, rate limiting and usage accounting as plain values and classes. The llm_client actor
// uses them with delayed_send; call_with_retries() is the blocking loop for `kagent-actors ask`.
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "platform/config/config.hpp"
#include "platform/llm/provider.hpp"

namespace kagent {

struct retry_config {
  int max_retries = 5;             ///< retries after the first attempt (llm.max_retries)
  double base_delay_s = 2;         ///< first backoff
  double max_delay_s = 60;         ///< backoff ceiling
  double overload_factor = 2;      ///< 529/503 back off this much longer than other transient errors
  double max_retry_after_s = 600;  ///< a longer Retry-After gives up instead of sleeping that long
};

struct retry_decision {
  bool retry = false;
  double delay_s = 0;
  std::string reason;  ///< one line for the log: "rate_limited: retry 2/5 in 12.3 s (retry-after 12 s)"
};

/// `attempt` is the number of attempts made so far (1 after the first failure). Exponential backoff
/// base*2^(attempt-1) capped at max_delay, with jitter in [50%, 100%]; 429 waits at least Retry-After;
/// auth, quota, bad_request, budget, replay_exhausted and unavailable never retry.
retry_decision decide_retry(const llm_error& err, int attempt, const retry_config& cfg, std::mt19937_64& rng);

using clock_fn = std::function<std::chrono::steady_clock::time_point()>;

/// A token bucket refilled continuously at `per_minute` units per minute, holding at most one
/// minute's worth. per_minute <= 0 disables it.
class token_bucket {
public:
  token_bucket(double per_minute, clock_fn clock);
  /// Seconds until `n` units are available (0: now). n above the capacity waits for a full bucket.
  double wait_s(double n);
  /// Takes `n` units (the level may go negative: later callers wait longer).
  void take(double n);
  double level();

private:
  void refill();
  double rate_per_s_, capacity_, level_;
  clock_fn clock_;
  std::chrono::steady_clock::time_point last_;
};

/// Requests/min and tokens/min limits plus a concurrency cap. Thread-safe.
class rate_limiter {
public:
  rate_limiter(int requests_per_minute, int tokens_per_minute, int max_concurrency, clock_fn clock = {});
  /// Seconds to wait before a request estimated at `tokens` may start; 0 means it may start now, in
  /// which case the request and tokens are taken and a concurrency slot is held until release().
  /// When no slot is free the answer is a short poll interval (a slot frees when a call ends).
  double try_acquire(double tokens);
  /// Ends a call; `actual_tokens - estimated_tokens` corrects the tokens/min bucket.
  void release(double estimated_tokens, double actual_tokens);
  int in_flight() const;

private:
  mutable std::mutex m_;
  token_bucket requests_, tokens_;
  int max_concurrency_;
  int in_flight_ = 0;
};

/// Rough token count for rate limiting and budget checks: ~4 characters per token.
long estimate_prompt_tokens(const llm_request& req);

struct model_price {
  double in_per_mtok = 0;   ///< USD per million input tokens
  double out_per_mtok = 0;  ///< USD per million output tokens
};

/// The price of a model: llm.prices (exact name) first, then the built-in table of list prices
/// (estimates; longest matching name prefix). nullopt when unknown (cost is then reported as 0).
std::optional<model_price> price_for(const std::string& model, const std::map<std::string, std::pair<double, double>>& overrides);

struct usage_row {
  long calls = 0;
  long failures = 0;
  long input_tokens = 0;
  long output_tokens = 0;
  double cost_usd = 0;
};

/// Tokens and estimated cost per purpose and model, and the run/call budget checks. Thread-safe.
class usage_ledger {
public:
  explicit usage_ledger(std::map<std::string, std::pair<double, double>> price_overrides = {});
  void record(const std::string& purpose, const std::string& model, long input_tokens, long output_tokens);
  void record_failure(const std::string& purpose, const std::string& model);
  double cost(const std::string& model, long input_tokens, long output_tokens) const;
  double total_cost() const;
  usage_row total() const;
  std::map<std::pair<std::string, std::string>, usage_row> rows() const;  ///< (purpose, model) -> row
  /// Throws llm_error{budget} when the run budget is already spent, or when the request's worst case
  /// (estimated prompt + max_tokens output) exceeds the per-call budget. 0 disables a budget.
  void check_budget(const llm_request& req, const std::string& model, double run_budget_usd,
                    double call_budget_usd) const;

private:
  std::map<std::string, std::pair<double, double>> overrides_;
  mutable std::mutex m_;
  std::map<std::pair<std::string, std::string>, usage_row> rows_;
};

struct call_outcome {
  llm_response response;
  int attempts = 0;
  double latency_s = 0;  ///< of the successful attempt
  double total_s = 0;    ///< including backoff sleeps
};

struct call_policy {
  retry_config retry;
  usage_ledger* ledger = nullptr;  ///< optional: usage and budget
  double run_budget_usd = 0;
  double call_budget_usd = 0;
  std::function<void(const retry_decision&, const llm_error&)> on_retry;  ///< log hook
  std::function<void(double seconds)> sleep;  ///< default: std::this_thread::sleep_for
  uint64_t seed = std::random_device{}();
};

/// Blocking: attempts until success or decide_retry() says stop; rethrows the last llm_error.
call_outcome call_with_retries(llm_provider& provider, const llm_request& req, const call_policy& policy,
                               const text_callback& on_text = {});

/// retry_config from the `llm:` block.
retry_config retry_config_from(const llm_config& cfg);

} // namespace kagent
