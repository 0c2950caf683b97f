// What every actor of a run shares: the exception handler, the device lock and fault injection.
#include <map>
#include <memory>
#include <mutex>
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

std::mutex& device_mutex(int device_id) {
  // Never destroyed: detached actor threads may still hold one while the process exits.
  static auto* table = new std::map<int, std::unique_ptr<std::mutex>>();
  static std::mutex guard;
  std::lock_guard<std::mutex> lk(guard);
  auto& m = (*table)[device_id];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
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
