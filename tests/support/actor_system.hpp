#pragma once
// The actor-system configuration of the actor-level tests: every message type registered (as in a
// run), a small scheduler, and CAF's own logger quiet.
#include <caf/all.hpp>

#include "messages/messages.hpp"

namespace kagent::test {

struct actor_test_config : caf::actor_system_config {
  explicit actor_test_config(int threads = 2) {
    set("scheduler.max-threads", threads);
    set("logger.verbosity", caf::atom("quiet"));
    register_messages(*this);
  }
};

} // namespace kagent::test
