// What every actor of a run shares: the exception handler and fault injection.
#include <sstream>

#include "actors/actors.hpp"

namespace kagent {

void install_exception_handler(caf::scheduled_actor* self, const char* who) {
  std::string name = who;
  self->set_exception_handler([name](caf::scheduled_actor*, std::exception_ptr& ep) -> caf::error {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      return caf::make_error(errc::actor_failed, name + ": " + e.what());
    } catch (...) {
      return caf::make_error(errc::actor_failed, name + ": unknown exception");
    }
  });
}

bool fault_requested(const run_context& ctx, const std::string& what, const std::string& target) {
  if (ctx.inject_fault.empty()) return false;
  std::string item;
  std::stringstream ss{ctx.inject_fault};
  while (std::getline(ss, item, ','))
    if (item == what + ":" + target || item == what + ":*") return true;
  return false;
}

} // namespace kagent
