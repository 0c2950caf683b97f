#pragma once
// The values that cross the LLM layer: a provider-neutral request, the reply, and a typed error whose
// kind decides retrying. All plain data, so the actor layer can copy them into messages.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kagent {

struct llm_message {
  std::string role;     ///< "user" or "assistant" ("system" is folded into llm_request::system)
  std::string content;
};

struct llm_request {
  std::string purpose;  ///< why the call is made ("optimize", "refine", "bottleneck", "ask"...); keys
                        ///< usage accounting and the replay set
  std::string model;    ///< empty: the provider's configured model
  std::string system;   ///< system prompt; empty: none
  std::vector<llm_message> messages;  ///< the whole conversation, oldest first
  int max_tokens = 24576;             ///< sent exactly as given (SPEC §14 B.95: no silent cap)
  std::optional<double> temperature;  ///< unset: the server's default; omitted for models that reject it
  bool high_effort = false;           ///< high_reasoning_effort: effort/reasoning_effort "high"
};

struct llm_response {
  std::string text;         ///< the concatenated text blocks (thinking/reasoning skipped)
  std::string model;        ///< as reported by the server (or the requested one)
  std::string provider;     ///< "anthropic", "openai", "openai_compatible", "relay", "replay"
  long input_tokens = 0;
  long output_tokens = 0;
  std::string stop_reason;  ///< normalised to the provider's own word ("end_turn", "stop", "max_tokens", "length")
  int raw_status = 0;       ///< HTTP status (200), 0 for replay
  bool truncated() const { return stop_reason == "max_tokens" || stop_reason == "length"; }
};

enum class llm_error_kind {
  rate_limited,    ///< 429 (retry; honours retry-after)
  overloaded,      ///< 529 / overloaded_error / 503 (retry)
  server,          ///< other 5xx (retry)
  timeout,         ///< connect, idle or total deadline (retry)
  connection,      ///< refused, reset, TLS failure, dropped mid-body (retry)
  stream_error,    ///< an `error` event inside a 200 stream (retry)
  auth,            ///< 401/403: never retried
  quota,           ///< insufficient_quota, billing, spend limit: never retried
  bad_request,     ///< 400/404/413/422: never retried
  malformed,       ///< a body that is not the JSON the API documents (retried: gateways answer HTML pages)
  budget,          ///< the call or the run would exceed its USD budget: never retried
  replay_exhausted,///< the replay set has no reply left for this purpose: never retried
  unavailable,     ///< no provider / no key for the model: never retried
  // Decided by the llm_client about a call, never raised by a provider (never retried):
  reply_too_large, ///< the reply exceeded llm.max_reply_bytes
  truncated,       ///< the reply stopped at max_tokens
  cancelled,       ///< its candidate timed out before the call was sent
  internal,        ///< the call actor failed (our own fault)
};
inline constexpr llm_error_kind last_llm_error_kind = llm_error_kind::internal;

const char* to_string(llm_error_kind k);
/// The inverse of to_string (kinds cross actor boundaries as text); nullopt for an unknown name.
std::optional<llm_error_kind> llm_error_kind_from_string(const std::string& name);

/// Every failure of the LLM layer. The message never contains an API key: it is built by the
/// provider, which scrubs its own key (and anything that looks like one) before throwing.
class llm_error : public std::runtime_error {
public:
  llm_error(llm_error_kind kind, const std::string& message, int http_status = 0,
            std::optional<double> retry_after_s = std::nullopt)
      : std::runtime_error(message), kind_(kind), http_status_(http_status), retry_after_s_(retry_after_s) {}
  llm_error_kind kind() const { return kind_; }
  int http_status() const { return http_status_; }
  std::optional<double> retry_after_s() const { return retry_after_s_; }
  /// Whether a retry can possibly help (the retry policy still bounds attempts).
  bool transient() const;

private:
  llm_error_kind kind_;
  int http_status_;
  std::optional<double> retry_after_s_;
};

/// Replaces each non-empty secret in `text` by "[redacted]", and any token that looks like an API key
/// (`sk-...`, `sk-ant-...`) by "sk-[redacted]", so server messages that echo a key stay safe.
std::string redact(std::string text, const std::vector<std::string>& secrets);

} // namespace kagent
