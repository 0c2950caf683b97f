#include "platform/llm/llm_types.hpp"

#include <cctype>

namespace kagent {

const char* to_string(llm_error_kind k) {
  switch (k) {
    case llm_error_kind::rate_limited: return "rate_limited";
    case llm_error_kind::overloaded: return "overloaded";
    case llm_error_kind::server: return "server";
    case llm_error_kind::timeout: return "timeout";
    case llm_error_kind::connection: return "connection";
    case llm_error_kind::stream_error: return "stream_error";
    case llm_error_kind::auth: return "auth";
    case llm_error_kind::quota: return "quota";
    case llm_error_kind::bad_request: return "bad_request";
    case llm_error_kind::malformed: return "malformed";
    case llm_error_kind::budget: return "budget";
    case llm_error_kind::replay_exhausted: return "replay_exhausted";
    case llm_error_kind::unavailable: return "unavailable";
    case llm_error_kind::reply_too_large: return "reply_too_large";
    case llm_error_kind::truncated: return "truncated";
    case llm_error_kind::cancelled: return "cancelled";
    case llm_error_kind::internal: return "internal";
  }
  return "unknown";
}

std::optional<llm_error_kind> llm_error_kind_from_string(const std::string& name) {
  for (int k = 0; k <= static_cast<int>(last_llm_error_kind); ++k)
    if (name == to_string(static_cast<llm_error_kind>(k))) return static_cast<llm_error_kind>(k);
  return std::nullopt;
}

bool llm_error::transient() const {
  switch (kind_) {
    case llm_error_kind::rate_limited:
    case llm_error_kind::overloaded:
    case llm_error_kind::server:
    case llm_error_kind::timeout:
    case llm_error_kind::connection:
    case llm_error_kind::stream_error:
    case llm_error_kind::malformed:
      return true;
    default:
      return false;
  }
}

std::string redact(std::string text, const std::vector<std::string>& secrets) {
  for (auto& s : secrets) {
    if (s.size() < 4) continue;  // too short to be a key; replacing it would mangle ordinary text
    for (size_t pos = text.find(s); pos != std::string::npos; pos = text.find(s, pos)) {
      text.replace(pos, s.size(), "[redacted]");
      pos += 10;
    }
  }
  // Key-shaped tokens: providers echo (partly masked) keys in 401 messages.
  for (size_t pos = text.find("sk-"); pos != std::string::npos; pos = text.find("sk-", pos)) {
    bool word_start = pos == 0 || !(std::isalnum(static_cast<unsigned char>(text[pos - 1])) || text[pos - 1] == '-' || text[pos - 1] == '_');
    size_t end = pos + 3;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '-' ||
                                 text[end] == '_' || text[end] == '*' || text[end] == '.'))
      ++end;
    if (word_start && end - pos >= 8) {
      text.replace(pos, end - pos, "sk-[redacted]");
      pos += 13;
    } else {
      pos += 3;
    }
  }
  return text;
}

} // namespace kagent
