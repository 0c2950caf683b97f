// llm_client: admission (concurrency cap, request and token rate limits, budgets), one detached
// actor per HTTP attempt (a blocking call never holds a scheduler thread), retries scheduled with
// delayed_send, and usage accounting. A failed call fails its candidate only.
#include <fmt/format.h>

#include <deque>
#include <random>

#include <nlohmann/json.hpp>

#include "actors/actors.hpp"
#include "platform/common/stop.hpp"
#include "platform/search/concurrency.hpp"
#include "platform/llm/extract.hpp"
#include "platform/llm/provider.hpp"
#include "platform/llm/replay.hpp"
#include "platform/llm/retry.hpp"

namespace kagent {

namespace {

using retry_atom = caf::atom_constant<caf::atom("retry")>;

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

struct pending_call {
  complete req;
  caf::response_promise rp;
  int attempt = 0;          ///< attempts made so far
  double estimated_tokens = 0;
};

struct llm_state {
  std::shared_ptr<llm_provider> provider;
  std::unique_ptr<usage_ledger> ledger;
  std::unique_ptr<rate_limiter> limiter;
  retry_config retry;
  std::mt19937_64 rng{std::random_device{}()};
  std::deque<std::shared_ptr<pending_call>> queue;
  bool tick_armed = false;
};

} // namespace

caf::behavior llm_client_actor(caf::event_based_actor* self, context_ptr ctx, caf::actor manager,
                               caf::actor reporter) {
  install_exception_handler(self, "llm_client");
  auto st = std::make_shared<llm_state>();
  const auto& lc = ctx->cfg.llm;
  st->ledger = std::make_unique<usage_ledger>(lc.prices);
  // With `num_workers: auto` and no llm.max_concurrency of the user's, the pipelines in flight bound
  // the LLM calls (one each, plus analyses): the limiter must not hold back what auto sized.
  const int llm_concurrency = ctx->cfg.num_workers_auto && !lc.max_concurrency_set
                                  ? std::max(lc.max_concurrency, search::auto_pipeline_cap)
                                  : lc.max_concurrency;
  st->limiter = std::make_unique<rate_limiter>(lc.requests_per_minute, lc.tokens_per_minute, llm_concurrency);
  st->retry = retry_config_from(lc);
  // Built and validated by the runtime before the run directory exists (a bad provider setting is a
  // usage error, exit 2); shared here.
  st->provider = ctx->llm;

  auto account = [=](const pending_call& pc, const completion& c) {
    nlohmann::json j{{"purpose", pc.req.purpose}, {"model", c.model.empty() ? pc.req.model : c.model},
                     {"provider", c.provider},   {"tokens_in", c.input_tokens},
                     {"tokens_out", c.output_tokens}, {"cost_usd", c.cost_usd},
                     {"attempts", c.attempts},    {"ok", c.ok},
                     {"error_kind", c.error_kind}, {"candidate_id", pc.req.candidate_id},
                     {"latency_ms", c.latency_s * 1000.0}};
    store::llm_call_record rec;
    rec.purpose = pc.req.purpose;
    rec.model = c.model.empty() ? pc.req.model : c.model;
    rec.provider = c.provider;
    rec.tokens_in = c.input_tokens;
    rec.tokens_out = c.output_tokens;
    rec.cost_usd = c.cost_usd;
    rec.attempts = c.attempts;
    rec.ok = c.ok;
    if (!c.ok) rec.error_kind = c.error_kind;
    rec.candidate_id = pc.req.candidate_id;
    rec.latency_ms = c.latency_s * 1000.0;
    self->send(manager, rec);
    nlohmann::json totals{{"cost_usd", st->ledger->total_cost()},
                          {"tokens_in", st->ledger->total().input_tokens},
                          {"tokens_out", st->ledger->total().output_tokens}};
    j["run_totals"] = totals;
    self->send(reporter, run_event{"llm_call", j.dump()});
  };

  // Forward-declared so that a retry can re-enter admission.
  auto pump = std::make_shared<std::function<void()>>();

  self->attach_functor([pump](const caf::error&) { *pump = nullptr; });  // break the closure cycle

  auto attempt = [=](std::shared_ptr<pending_call> pc) {
    ++pc->attempt;
    auto provider = st->provider;
    const size_t max_reply_bytes = static_cast<size_t>(ctx->cfg.llm.max_reply_bytes);
    auto worker = self->spawn<caf::detached>([provider, max_reply_bytes](caf::event_based_actor* w) -> caf::behavior {
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
          // Valid UTF-8 from here on: the reply is saved, quoted back to the model and its code
          // verified through JSON, and all of them must see the same bytes.
          out.text = to_valid_utf8(r.text);
          out.model = r.model.empty() ? c.model : r.model;
          out.provider = r.provider;
          out.input_tokens = r.input_tokens;
          out.output_tokens = r.output_tokens;
          if (r.text.size() > max_reply_bytes) {
            // Not retried and never quoted back: a runaway reply would grow every later prompt.
            out.ok = false;
            out.text.clear();
            out.error_kind = "reply_too_large";
            out.error = fmt::format("the reply is {} bytes, over llm.max_reply_bytes ({})", r.text.size(),
                                    max_reply_bytes);
          } else if (r.truncated()) {
            // A reply cut at max_tokens is an incomplete kernel; report it rather than use it.
            out.ok = false;
            out.error_kind = "truncated";
            out.error = fmt::format("the reply was cut at max_tokens={} (stop reason {})", c.max_tokens, r.stop_reason);
          }
        } catch (const llm_error& e) {
          out.ok = false;
          out.error_kind = to_string(e.kind());
          out.error = e.what();
          out.retry_after_s = e.retry_after_s().value_or(-1);
        } catch (const std::exception& e) {
          out.ok = false;
          out.error_kind = "internal";
          out.error = e.what();
        }
        out.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        w->quit();
        return out;
      }};
    });
    self->request(worker, caf::infinite, pc->req)
        .then(
            [=](completion& c) {
              st->limiter->release(pc->estimated_tokens, static_cast<double>(c.input_tokens + c.output_tokens));
              c.attempts = pc->attempt;
              if (!c.ok && work_cancelled(pc->req.candidate_id)) {
                // Abandoned at its candidate's deadline: no retry, no record (nothing of a timed-out
                // candidate is written after its timeout).
                pc->rp.deliver(c);
                (*pump)();
                return;
              }
              if (c.ok) {
                st->ledger->record(pc->req.purpose, c.model, c.input_tokens, c.output_tokens);
                c.cost_usd = st->ledger->cost(c.model, c.input_tokens, c.output_tokens);
                account(*pc, c);
                pc->rp.deliver(c);
              } else {
                // Rebuild the typed error so that decide_retry applies the same policy as `ask`.
                retry_decision d;
                if (auto kind = llm_error_kind_from_string(c.error_kind)) {
                  llm_error err{*kind, c.error, 0,
                                c.retry_after_s >= 0 ? std::optional<double>{c.retry_after_s} : std::nullopt};
                  d = decide_retry(err, pc->attempt, st->retry, st->rng);
                }
                if (d.retry) {
                  self->send(reporter, run_event{"llm_retry", nlohmann::json{{"candidate_id", pc->req.candidate_id},
                                                                              {"purpose", pc->req.purpose},
                                                                              {"reason", d.reason}}
                                                                  .dump()});
                  self->delayed_send(self, std::chrono::milliseconds(static_cast<long>(d.delay_s * 1000)),
                                     retry_atom::value, reinterpret_cast<uintptr_t>(pc.get()));
                  st->queue.push_front(pc);  // parked until its retry tick; not admitted before
                  pc->estimated_tokens = -1;  // marks "waiting for its backoff"
                } else {
                  st->ledger->record_failure(pc->req.purpose, pc->req.model);
                  account(*pc, c);
                  pc->rp.deliver(c);
                }
              }
              (*pump)();
            },
            [=](caf::error& err) {
              completion c;
              c.request_id = pc->req.request_id;
              c.error_kind = "internal";
              c.error = "LLM call actor failed: " + to_string(err);
              c.attempts = pc->attempt;
              st->limiter->release(pc->estimated_tokens, 0);
              account(*pc, c);
              pc->rp.deliver(c);
              (*pump)();
            });
  };

  *pump = [=]() {
    for (auto it = st->queue.begin(); it != st->queue.end();) {
      auto pc = *it;
      if (!pc->req.candidate_id.empty() && work_cancelled(pc->req.candidate_id)) {
        // Its candidate timed out while the call waited (for admission or its backoff): it is
        // never sent, and nothing is recorded for it.
        it = st->queue.erase(it);
        completion c;
        c.request_id = pc->req.request_id;
        c.error_kind = "cancelled";
        c.error = "the candidate timed out before this call was sent";
        pc->rp.deliver(c);
        continue;
      }
      if (pc->estimated_tokens < 0) {  // still backing off
        ++it;
        continue;
      }
      try {
        st->ledger->check_budget(to_request(pc->req), pc->req.model, ctx->cfg.llm.budget_usd,
                                 ctx->cfg.llm.call_budget_usd);
      } catch (const llm_error& e) {
        completion c;
        c.request_id = pc->req.request_id;
        c.error_kind = to_string(e.kind());
        c.error = e.what();
        it = st->queue.erase(it);
        account(*pc, c);
        pc->rp.deliver(c);
        continue;
      }
      const double est = static_cast<double>(estimate_prompt_tokens(to_request(pc->req)) + pc->req.max_tokens / 4);
      const double wait = st->limiter->try_acquire(est);
      if (wait > 0) {
        if (!st->tick_armed) {
          st->tick_armed = true;
          self->delayed_send(self, std::chrono::milliseconds(static_cast<long>(wait * 1000) + 1), tick_atom::value);
        }
        return;  // FIFO: later requests wait behind this one
      }
      pc->estimated_tokens = est;
      it = st->queue.erase(it);
      attempt(pc);
    }
  };

  return {
      [=](const complete& c) -> caf::result<completion> {
        if (!st->provider) {  // a context built without a provider (tests of other actors)
          completion out;
          out.request_id = c.request_id;
          out.error_kind = "unavailable";
          out.error = "no LLM provider configured";
          return out;
        }
        // The promise only for a queued call: once made, it owns the response, and a value returned
        // beside it would never reach the caller.
        auto rp = self->make_response_promise<completion>();
        auto pc = std::make_shared<pending_call>();
        pc->req = c;
        pc->rp = rp;
        st->queue.push_back(pc);
        (*pump)();
        return rp;
      },
      [=](tick_atom) {
        st->tick_armed = false;
        (*pump)();
      },
      [=](retry_atom, uintptr_t key) {
        for (auto it = st->queue.begin(); it != st->queue.end(); ++it) {
          if (reinterpret_cast<uintptr_t>(it->get()) != key) continue;
          auto pc = *it;
          st->queue.erase(it);
          pc->estimated_tokens = 0;
          st->queue.push_front(pc);  // a retried call goes first: it has waited longest
          break;
        }
        (*pump)();
      },
  };
}

} // namespace kagent
