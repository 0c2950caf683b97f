#include "platform/llm/preflight.hpp"

#include <algorithm>

namespace kagent {

namespace {
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}
} // namespace

provider_settings preflight_settings(provider_settings s) {
  s.stream = false;
  s.connect_timeout_s = std::min(s.connect_timeout_s, 10.0);
  s.idle_timeout_s = std::min(s.idle_timeout_s, 30.0);
  s.timeout_s = std::min(s.timeout_s, 30.0);
  return s;
}

preflight_outcome run_preflight(llm_provider& provider, const std::string& model) {
  llm_request req;
  req.purpose = "preflight";
  req.model = model;
  req.messages = {{"user", "Reply with OK."}};
  req.max_tokens = 16;
  preflight_outcome out;
  try {
    (void)provider.complete(req);
  } catch (const llm_error& e) {
    switch (e.kind()) {
      case llm_error_kind::rate_limited:
      case llm_error_kind::overloaded:
      case llm_error_kind::server:
      case llm_error_kind::stream_error:
        out.result = preflight_outcome::verdict::transient;
        break;
      default:
        out.result = preflight_outcome::verdict::fatal;
    }
    out.message = one_line(std::string(to_string(e.kind())) + ": " + e.what());
  } catch (const std::exception& e) {
    out.result = preflight_outcome::verdict::fatal;
    out.message = one_line(e.what());
  }
  return out;
}

} // namespace kagent
