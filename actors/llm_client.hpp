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

class llm_client_state {
public:
  static inline const char* name = "llm_client";

  caf::behavior start(caf::stateful_actor<llm_client_state>* self, context_ptr ctx, caf::actor manager,
                      caf::actor reporter);

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

  caf::stateful_actor<llm_client_state>* self_ = nullptr;
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
caf::behavior llm_client_actor(caf::stateful_actor<llm_client_state>* self, context_ptr ctx, caf::actor manager,
                               caf::actor reporter);

/// The one-shot call actor's fixed protocol.
using llm_call_type = caf::typed_actor<caf::replies_to<complete>::with<completion>>;

/// One HTTP attempt (or one replayed reply) through `provider`, on its own thread: complete ->
/// completion, then it quits. Its wait gives up when the call's candidate times out (cancel_work).
llm_call_type::behavior_type llm_call_actor(llm_call_type::pointer self, std::shared_ptr<llm_provider> provider,
                                            size_t max_reply_bytes);

} // namespace kagent
