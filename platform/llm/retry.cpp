#include "platform/llm/retry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

namespace kagent {

namespace {
std::string secs(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", s);
  return b;
}
}  // namespace

retry_decision decide_retry(const llm_error& err, int attempt, const retry_config& cfg, std::mt19937_64& rng) {
  retry_decision d;
  const std::string kind = to_string(err.kind());
  if (!err.transient()) {
    d.reason = kind + ": not retried";
    return d;
  }
  if (attempt > cfg.max_retries) {
    d.reason = kind + ": giving up after " + std::to_string(attempt) + " attempts";
    return d;
  }
  double backoff = std::min(cfg.max_delay_s, cfg.base_delay_s * std::pow(2.0, std::max(0, attempt - 1)));
  if (err.kind() == llm_error_kind::overloaded) backoff = std::min(cfg.max_delay_s * cfg.overload_factor, backoff * cfg.overload_factor);
  std::uniform_real_distribution<double> jitter(0.5, 1.0);  // spread retries of many candidates apart
  d.delay_s = backoff * jitter(rng);
  std::string note;
  if (auto ra = err.retry_after_s()) {
    if (*ra > cfg.max_retry_after_s) {
      d.reason = kind + ": the server asks to wait " + secs(*ra) + ", longer than the " + secs(cfg.max_retry_after_s) +
                 " allowed; giving up";
      return d;
    }
    // Honour the server's wait; a little jitter on top keeps waiting callers from bursting together.
    std::uniform_real_distribution<double> extra(0.0, std::min(1.0, cfg.base_delay_s));
    d.delay_s = *ra + extra(rng);
    note = " (retry-after " + secs(*ra) + ")";
  }
  d.retry = true;
  d.reason = kind + ": retry " + std::to_string(attempt) + "/" + std::to_string(cfg.max_retries) + " in " +
             secs(d.delay_s) + note;
  return d;
}

// ---- rate limiting -------------------------------------------------------------------------------

token_bucket::token_bucket(double per_minute, clock_fn clock)
    : rate_per_s_(per_minute / 60.0), capacity_(per_minute), level_(per_minute), clock_(std::move(clock)) {
  last_ = clock_();
}

void token_bucket::refill() {
  auto now = clock_();
  double dt = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  if (dt > 0) level_ = std::min(capacity_, level_ + dt * rate_per_s_);
}

double token_bucket::wait_s(double n) {
  if (rate_per_s_ <= 0) return 0;
  refill();
  double need = std::min(n, capacity_);
  return level_ >= need ? 0 : (need - level_) / rate_per_s_;
}

void token_bucket::take(double n) {
  if (rate_per_s_ <= 0) return;
  refill();
  level_ -= n;
}

double token_bucket::level() {
  refill();
  return level_;
}

static clock_fn default_clock(clock_fn c) {
  return c ? c : clock_fn([] { return std::chrono::steady_clock::now(); });
}

rate_limiter::rate_limiter(int rpm, int tpm, int max_concurrency, clock_fn clock)
    : requests_(rpm, default_clock(clock)), tokens_(tpm, default_clock(clock)), max_concurrency_(max_concurrency) {}

double rate_limiter::try_acquire(double tokens) {
  std::lock_guard lk(m_);
  if (max_concurrency_ > 0 && in_flight_ >= max_concurrency_) return 0.25;
  double w = std::max(requests_.wait_s(1), tokens_.wait_s(tokens));
  if (w > 0) return w;
  requests_.take(1);
  tokens_.take(tokens);
  ++in_flight_;
  return 0;
}

void rate_limiter::release(double estimated_tokens, double actual_tokens) {
  std::lock_guard lk(m_);
  if (in_flight_ > 0) --in_flight_;
  tokens_.take(actual_tokens - estimated_tokens);
}

int rate_limiter::in_flight() const {
  std::lock_guard lk(m_);
  return in_flight_;
}

long estimate_prompt_tokens(const llm_request& req) {
  size_t chars = req.system.size();
  for (auto& m : req.messages) chars += m.content.size();
  return static_cast<long>((chars + 3) / 4);
}

// ---- prices and usage ----------------------------------------------------------------------------

std::optional<model_price> price_for(const std::string& model,
                                     const std::map<std::string, std::pair<double, double>>& overrides) {
  if (auto it = overrides.find(model); it != overrides.end()) return model_price{it->second.first, it->second.second};
  // List prices in USD per million tokens (input, output), as published by the vendors in 2025-2026.
  // Estimates only: no caching discounts, batch prices or long-context surcharges.
  static const std::vector<std::pair<std::string, model_price>> table = {
      {"claude-opus-4-5", {5, 25}},     {"claude-opus-4.5", {5, 25}},   {"claude-opus-4-6", {5, 25}},
      {"claude-opus-4", {15, 75}},      {"claude-sonnet-4", {3, 15}},   {"gcp-claude-4-sonnet", {3, 15}},
      {"claude-haiku-4", {1, 5}},       {"claude-3-5-haiku", {0.8, 4}}, {"claude-3-7-sonnet", {3, 15}},
      {"gpt-5.2", {1.75, 14}},          {"gpt-5-2", {1.75, 14}},        {"gpt-5-mini", {0.25, 2}},
      {"gpt-5-nano", {0.05, 0.4}},      {"gpt-5", {1.25, 10}},          {"o4-mini", {1.1, 4.4}},
      {"o3-mini", {1.1, 4.4}},          {"o3", {2, 8}},                 {"o1", {15, 60}},
      {"gpt-4.1-mini", {0.4, 1.6}},     {"gpt-4.1", {2, 8}},            {"gpt-4o-mini", {0.15, 0.6}},
      {"gpt-4o", {2.5, 10}},
  };
  const model_price* best = nullptr;
  size_t best_len = 0;
  for (auto& [prefix, price] : table)
    if (model.rfind(prefix, 0) == 0 && prefix.size() > best_len) {
      best = &price;
      best_len = prefix.size();
    }
  if (!best) return std::nullopt;
  return *best;
}

usage_ledger::usage_ledger(std::map<std::string, std::pair<double, double>> o) : overrides_(std::move(o)) {}

double usage_ledger::cost(const std::string& model, long in, long out) const {
  auto p = price_for(model, overrides_);
  if (!p) return 0;
  return (static_cast<double>(in) * p->in_per_mtok + static_cast<double>(out) * p->out_per_mtok) / 1e6;
}

void usage_ledger::record(const std::string& purpose, const std::string& model, long in, long out) {
  double c = cost(model, in, out);
  std::lock_guard lk(m_);
  auto& r = rows_[{purpose, model}];
  ++r.calls;
  r.input_tokens += in;
  r.output_tokens += out;
  r.cost_usd += c;
}

void usage_ledger::record_failure(const std::string& purpose, const std::string& model) {
  std::lock_guard lk(m_);
  ++rows_[{purpose, model}].failures;
}

usage_row usage_ledger::total() const {
  std::lock_guard lk(m_);
  usage_row t;
  for (auto& [k, r] : rows_) {
    t.calls += r.calls;
    t.failures += r.failures;
    t.input_tokens += r.input_tokens;
    t.output_tokens += r.output_tokens;
    t.cost_usd += r.cost_usd;
  }
  return t;
}

double usage_ledger::total_cost() const { return total().cost_usd; }

std::map<std::pair<std::string, std::string>, usage_row> usage_ledger::rows() const {
  std::lock_guard lk(m_);
  return rows_;
}

void usage_ledger::check_budget(const llm_request& req, const std::string& model, double run_budget,
                                double call_budget) const {
  char b[160];
  if (run_budget > 0) {
    double spent = total_cost();
    if (spent >= run_budget) {
      std::snprintf(b, sizeof b, "LLM budget exhausted: %.2f USD spent of llm.budget_usd %.2f", spent, run_budget);
      throw llm_error(llm_error_kind::budget, b);
    }
  }
  if (call_budget > 0) {
    double worst = cost(model, estimate_prompt_tokens(req), req.max_tokens);
    if (worst > call_budget) {
      std::snprintf(b, sizeof b, "LLM call over budget: up to %.2f USD (prompt + max_tokens %d) exceeds llm.call_budget_usd %.2f",
                    worst, req.max_tokens, call_budget);
      throw llm_error(llm_error_kind::budget, b);
    }
  }
}

// ---- blocking loop -------------------------------------------------------------------------------

call_outcome call_with_retries(llm_provider& provider, const llm_request& req, const call_policy& policy,
                               const text_callback& on_text) {
  using clk = std::chrono::steady_clock;
  std::mt19937_64 rng(policy.seed);
  const std::string model = req.model.empty() ? provider.default_model() : req.model;
  auto start = clk::now();
  for (int attempt = 1;; ++attempt) {
    if (policy.ledger) policy.ledger->check_budget(req, model, policy.run_budget_usd, policy.call_budget_usd);
    auto t0 = clk::now();
    try {
      call_outcome out;
      out.response = provider.complete(req, on_text);
      out.attempts = attempt;
      out.latency_s = std::chrono::duration<double>(clk::now() - t0).count();
      out.total_s = std::chrono::duration<double>(clk::now() - start).count();
      if (policy.ledger)
        policy.ledger->record(req.purpose, out.response.model.empty() ? model : out.response.model,
                              out.response.input_tokens, out.response.output_tokens);
      return out;
    } catch (const llm_error& e) {
      if (policy.ledger) policy.ledger->record_failure(req.purpose, model);
      auto d = decide_retry(e, attempt, policy.retry, rng);
      if (!d.retry) throw;
      if (policy.on_retry) policy.on_retry(d, e);
      if (policy.sleep) policy.sleep(d.delay_s);
      else std::this_thread::sleep_for(std::chrono::duration<double>(d.delay_s));
    }
  }
}

retry_config retry_config_from(const llm_config& cfg) {
  retry_config r;
  r.max_retries = std::max(0, cfg.max_retries);
  return r;
}

} // namespace kagent
