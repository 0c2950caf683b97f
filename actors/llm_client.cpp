// The llm_client's steps (actors/llm_client.hpp) and the per-attempt llm_call actor.
#include "actors/llm_client.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/llm/extract.hpp"
#include "platform/search/concurrency.hpp"

namespace kagent {

namespace {

llm_request to_request(const complete& c) {
  llm_request r;
  r.purpose = c.purpose;
  r.model = c.model;
  r.system = c.system;
  for (const auto& m : c.messages) r.messages.push_back({m.role, m.content});
  r.max_tokens = c.max_tokens;
  if (c.temperature >= 0) r.temperature = c.temperature;
  r.high_effort = c.high_effort;
  return r;
}

completion failed(const std::string& request_id, llm_error_kind kind, const std::string& error) {
  completion c;
  c.request_id = request_id;
  c.error_kind = kind;
  c.error = error;
  return c;
}

} // namespace

llm_api::behavior_type llm_call_actor(llm_api::pointer self, std::shared_ptr<llm_provider> provider,
                                      size_t max_reply_bytes) {
  return {[=](const complete& c) -> completion {
    completion out;
    out.request_id = c.request_id;
    out.model = c.model;
    out.provider = provider->name();  // failed calls are accounted to their provider too
    const auto t0 = std::chrono::steady_clock::now();
    // The HTTP wait (or the replay delay) gives up when the candidate times out (cancel_work).
    work_scope scope(c.candidate_id);
    try {
      auto r = provider->complete(to_request(c));
      out.ok = true;
      // Valid UTF-8 from here on: the reply is saved, quoted back to the model and its code verified
      // through JSON, and all of them must see the same bytes.
      out.text = to_valid_utf8(r.text);
      out.model = r.model.empty() ? c.model : r.model;
      out.provider = r.provider;
      out.input_tokens = r.input_tokens;
      out.output_tokens = r.output_tokens;
      if (r.text.size() > max_reply_bytes) {
        // Not retried and never quoted back: a runaway reply would grow every later prompt.
        out.ok = false;
        out.text.clear();
        out.error_kind = llm_error_kind::reply_too_large;
        out.error = fmt::format("the reply is {} bytes, over llm.max_reply_bytes ({})", r.text.size(), max_reply_bytes);
      } else if (r.truncated()) {
        // A reply cut at max_tokens is an incomplete kernel; report it rather than use it.
        out.ok = false;
        out.error_kind = llm_error_kind::truncated;
        out.error = fmt::format("the reply was cut at max_tokens={} (stop reason {})", c.max_tokens, r.stop_reason);
      }
    } catch (const llm_error& e) {
      out.ok = false;
      out.error_kind = e.kind();
      out.error = e.what();
      out.retry_after_s = e.retry_after_s().value_or(-1);
    } catch (const std::exception& e) {
      out.ok = false;
      out.error_kind = llm_error_kind::internal;
      out.error = e.what();
    }
    out.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    self->quit();
    return out;
  }};
}

llm_client_type::behavior_type llm_client_actor(llm_client_type::stateful_pointer<llm_client_state> self,
                                                context_ptr ctx, caf::actor manager, caf::actor reporter) {
  return self->state.start(self, std::move(ctx), std::move(manager), std::move(reporter));
}

llm_client_type::behavior_type llm_client_state::start(llm_client_type::stateful_pointer<llm_client_state> self,
                                                       context_ptr ctx, caf::actor manager, caf::actor reporter) {
  install_exception_handler(self, "llm_client");
  self_ = self;
  ctx_ = std::move(ctx);
  manager_ = std::move(manager);
  reporter_ = std::move(reporter);
  const auto& lc = ctx_->cfg.llm;
  ledger_ = std::make_unique<usage_ledger>(lc.prices);
  // With `num_workers: auto` and no llm.max_concurrency of the user's, the pipelines in flight bound
  // the LLM calls (one each, plus analyses): the limiter must not hold back what auto sized.
  const int llm_concurrency = ctx_->cfg.num_workers_auto && !lc.max_concurrency_set
                                  ? std::max(lc.max_concurrency, search::auto_pipeline_cap)
                                  : lc.max_concurrency;
  limiter_ = std::make_unique<rate_limiter>(lc.requests_per_minute, lc.tokens_per_minute, llm_concurrency);
  retry_ = retry_config_from(lc);
  // Built and validated by the runtime before the run directory exists (a bad provider setting is a
  // usage error, exit 2); shared here.
  provider_ = ctx_->llm;
  return {
      [this](const complete& c) { return on_complete(c); },
      [this](tick_atom) {
        tick_armed_ = false;
        admit();
      },
      [this](retry_atom, const std::string& request_id) { on_retry(request_id); },
  };
}

caf::result<completion> llm_client_state::on_complete(const complete& c) {
  if (!provider_)  // a context built without a provider (tests of other actors)
    return failed(c.request_id, llm_error_kind::unavailable, "no LLM provider configured");
  // The promise only for a queued call: once made, it owns the response, and a value returned beside
  // it would never reach the caller.
  auto pc = std::make_shared<pending_call>();
  pc->req = c;
  pc->rp = self_->make_response_promise<completion>();
  queue_.push_back(pc);
  admit();
  return pc->rp;
}

// Admission, first come first served: a call goes out when the limits allow it; calls of a timed-out
// candidate and calls over a budget are answered without being sent.
void llm_client_state::admit() {
  for (auto it = queue_.begin(); it != queue_.end();) {
    auto pc = *it;
    if (drop_cancelled(pc) || over_budget(pc)) {
      it = queue_.erase(it);
      continue;
    }
    if (pc->estimated_tokens < 0) {  // still backing off
      ++it;
      continue;
    }
    const double est = static_cast<double>(estimate_prompt_tokens(to_request(pc->req)) + pc->req.max_tokens / 4);
    const double wait = limiter_->try_acquire(est);
    if (wait > 0) {
      if (!tick_armed_) {
        tick_armed_ = true;
        self_->delayed_send(self_, std::chrono::milliseconds(static_cast<long>(wait * 1000) + 1), tick_atom::value);
      }
      return;  // FIFO: later requests wait behind this one
    }
    pc->estimated_tokens = est;
    it = queue_.erase(it);
    send_attempt(pc);
  }
}

// Its candidate timed out while the call waited (for admission or its backoff): it is never sent, and
// nothing is recorded for it.
bool llm_client_state::drop_cancelled(const call_ptr& pc) {
  if (pc->req.candidate_id.empty() || !work_cancelled(pc->req.candidate_id)) return false;
  pc->rp.deliver(failed(pc->req.request_id, llm_error_kind::cancelled, "the candidate timed out before this call was sent"));
  return true;
}

bool llm_client_state::over_budget(const call_ptr& pc) {
  if (pc->estimated_tokens < 0) return false;
  try {
    ledger_->check_budget(to_request(pc->req), pc->req.model, ctx_->cfg.llm.budget_usd, ctx_->cfg.llm.call_budget_usd);
    return false;
  } catch (const llm_error& e) {
    settle(pc, failed(pc->req.request_id, e.kind(), e.what()));
    return true;
  }
}

void llm_client_state::send_attempt(const call_ptr& pc) {
  ++pc->attempt;
  auto call = self_->spawn<caf::detached>(llm_call_actor, provider_, static_cast<size_t>(ctx_->cfg.llm.max_reply_bytes));
  self_->request(call, caf::infinite, pc->req)
      .then([this, pc](completion& c) { on_attempt(pc, c); },
            [this, pc](caf::error& err) {
              auto c = failed(pc->req.request_id, llm_error_kind::internal, "LLM call actor failed: " + to_string(err));
              c.attempts = pc->attempt;
              limiter_->release(pc->estimated_tokens, 0);
              settle(pc, c);
              admit();
            });
}

void llm_client_state::on_attempt(const call_ptr& pc, completion& c) {
  limiter_->release(pc->estimated_tokens, static_cast<double>(c.input_tokens + c.output_tokens));
  c.attempts = pc->attempt;
  if (!c.ok && work_cancelled(pc->req.candidate_id)) {
    // Abandoned at its candidate's deadline: no retry, no record (nothing of a timed-out candidate is
    // written after its timeout).
    pc->rp.deliver(c);
  } else if (c.ok) {
    ledger_->record(pc->req.purpose, c.model, c.input_tokens, c.output_tokens);
    c.cost_usd = ledger_->cost(c.model, c.input_tokens, c.output_tokens);
    settle(pc, c);
  } else {
    on_failed_attempt(pc, c);
  }
  admit();
}

// A failed attempt is retried under the same policy as `ask` (the typed error is rebuilt for
// decide_retry), or it fails the call.
void llm_client_state::on_failed_attempt(const call_ptr& pc, completion& c) {
  retry_decision d;
  if (c.error_kind) {
    llm_error err{*c.error_kind, c.error, 0, c.retry_after_s >= 0 ? std::optional<double>{c.retry_after_s} : std::nullopt};
    d = decide_retry(err, pc->attempt, retry_, rng_);
  }
  if (!d.retry) {
    ledger_->record_failure(pc->req.purpose, pc->req.model);
    return settle(pc, c);
  }
  caf::anon_send(reporter_, run_event{event_kind::llm_retry, {{"candidate_id", pc->req.candidate_id},
                                                           {"purpose", pc->req.purpose},
                                                           {"reason", d.reason}}});
  self_->delayed_send(self_, std::chrono::milliseconds(static_cast<long>(d.delay_s * 1000)), retry_atom::value,
                      pc->req.request_id);
  pc->estimated_tokens = -1;  // parked until its retry tick; not admitted before
  queue_.push_front(pc);
}

void llm_client_state::on_retry(const std::string& request_id) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if ((*it)->req.request_id != request_id || (*it)->estimated_tokens >= 0) continue;
    auto pc = *it;
    queue_.erase(it);
    pc->estimated_tokens = 0;
    queue_.push_front(pc);  // a retried call goes first: it has waited longest
    break;
  }
  admit();
}

// The call's end: its usage is accounted, then its caller gets the completion.
void llm_client_state::settle(const call_ptr& pc, const completion& c) {
  account(*pc, c);
  pc->rp.deliver(c);
}

void llm_client_state::account(const pending_call& pc, const completion& c) {
  store::llm_call_record rec;
  rec.purpose = pc.req.purpose;
  rec.model = c.model.empty() ? pc.req.model : c.model;
  rec.provider = c.provider;
  rec.tokens_in = c.input_tokens;
  rec.tokens_out = c.output_tokens;
  rec.cost_usd = c.cost_usd;
  rec.attempts = c.attempts;
  rec.ok = c.ok;
  if (!c.ok && c.error_kind) rec.error_kind = to_string(*c.error_kind);
  rec.candidate_id = pc.req.candidate_id;
  rec.latency_ms = c.latency_s * 1000.0;
  caf::anon_send(manager_, rec);
  nlohmann::json j{{"purpose", rec.purpose}, {"model", rec.model}, {"provider", c.provider},
                   {"tokens_in", c.input_tokens}, {"tokens_out", c.output_tokens}, {"cost_usd", c.cost_usd},
                   {"attempts", c.attempts}, {"ok", c.ok}, {"error_kind", c.error_kind ? to_string(*c.error_kind) : ""},
                   {"candidate_id", pc.req.candidate_id}, {"latency_ms", c.latency_s * 1000.0},
                   {"run_totals", {{"cost_usd", ledger_->total_cost()},
                                   {"tokens_in", ledger_->total().input_tokens},
                                   {"tokens_out", ledger_->total().output_tokens}}}};
  caf::anon_send(reporter_, run_event{event_kind::llm_call, std::move(j)});
}

} // namespace kagent
