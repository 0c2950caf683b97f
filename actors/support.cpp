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

const remote_device* run_context::remote(int id) const {
  for (const auto& d : remote_devices)
    if (d.id == id) return &d;
  return nullptr;
}

std::string run_context::device_label(int id) const {
  if (const auto* d = remote(id)) return d->node + "/gpu" + std::to_string(d->node_device_id);
  return "gpu" + std::to_string(id);
}

} // namespace kagent
