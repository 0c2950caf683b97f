#pragma once
// llm_client: admission (concurrency cap, request and token rate limits, budgets), one detached
// llm_call actor per HTTP attempt (a blocking call never holds a scheduler thread), retries scheduled
// with delayed_send, and usage accounting, as a stateful actor. A failed call fails its candidate only.
#include <caf/all.hpp>

#include <deque>
#include <memory>
#include <random>
#include <string>

#include "actors/context.hpp"
#include "messages/messages.hpp"
#include "platform/llm/provider.hpp"
#include "platform/llm/retry.hpp"

namespace kagent {

/// What a caller of the LLM sees: complete -> completion. The llm_client answers it (admission,
/// retries, accounting), and so does each one-shot llm_call actor the client spawns per attempt.
using llm_api = caf::typed_actor<caf::replies_to<complete>::with<completion>>;

/// A call's backoff ran out: it is admitted again (the client's own timer).
using retry_atom = caf::atom_constant<caf::atom("retry")>;

/// The llm_client's whole protocol: the callers' one message and its own timers (the rate limiter's
/// next slot, a call's backoff).
using llm_client_type = llm_api::extend<caf::reacts_to<tick_atom>, caf::reacts_to<retry_atom, std::string>>;

class llm_client_state {
public:
  static inline const char* name = "llm_client";

  llm_client_type::behavior_type start(llm_client_type::stateful_pointer<llm_client_state> self, context_ptr ctx,
                                       caf::actor manager, caf::actor reporter);

private:
  struct pending_call {
    complete req;
    caf::response_promise rp;
    int attempt = 0;              ///< attempts made so far
    double estimated_tokens = 0;  ///< < 0: waiting for its backoff
  };
  using call_ptr = std::shared_ptr<pending_call>;

  caf::result<completion> on_complete(const complete& c);
  void admit();
  bool drop_cancelled(const call_ptr& pc);
  bool over_budget(const call_ptr& pc);
  void send_attempt(const call_ptr& pc);
  void on_attempt(const call_ptr& pc, completion& c);
  void on_failed_attempt(const call_ptr& pc, completion& c);
  void on_retry(const std::string& request_id);
  void account(const pending_call& pc, const completion& c);
  void settle(const call_ptr& pc, const completion& c);

  llm_client_type::stateful_pointer<llm_client_state> self_ = nullptr;
  context_ptr ctx_;
  caf::actor manager_, reporter_;
  std::shared_ptr<llm_provider> provider_;
  std::unique_ptr<usage_ledger> ledger_;
  std::unique_ptr<rate_limiter> limiter_;
  retry_config retry_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::deque<call_ptr> queue_;
  bool tick_armed_ = false;
};

/// Concurrency cap, rate limits, retries with backoff, usage accounting. complete -> completion.
/// Usage of every call goes to `manager` as a store::llm_call_record and to `reporter` as a run_event.
llm_client_type::behavior_type llm_client_actor(llm_client_type::stateful_pointer<llm_client_state> self,
                                                context_ptr ctx, caf::actor manager, caf::actor reporter);

/// One HTTP attempt (or one replayed reply) through `provider`, on its own thread: complete ->
/// completion, then it quits. Its wait gives up when the call's candidate times out (cancel_work).
llm_api::behavior_type llm_call_actor(llm_api::pointer self, std::shared_ptr<llm_provider> provider,
                                      size_t max_reply_bytes);

} // namespace kagent
