#include "platform/gpu/timeouts.hpp"

#include <fmt/format.h>

#include "platform/common/errors.hpp"

namespace kagent {

double resolve_test_timeout_s(std::optional<double> configured, const std::string& p) {
  if (configured) {
    if (!(*configured > 0)) throw user_error(fmt::format("test_timeout_s must be > 0 seconds (got {})", *configured));
    return *configured;
  }
  if (p == "rocm" || p == "amd") return 300.0;
  if (p == "cpu") return 300.0;
  if (p == "nvidia" || p == "cuda" || p == "xpu" || p == "noop" || p.empty()) return 30.0;
  throw user_error(fmt::format("unknown platform '{}' for the test timeout; expected one of: rocm, nvidia, cuda, xpu, "
                               "cpu, noop",
                               p));
}

}  // namespace kagent
