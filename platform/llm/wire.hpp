#pragma once
// The providers' wire formats as pure functions (TOOL_FORMATS.md §4, SPEC §11.2): request bodies,
// response parsing, SSE stream decoding and HTTP error classification. No I/O here, so every shape
// is unit-tested byte for byte.
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "platform/llm/http_util.hpp"
#include "platform/llm/llm_types.hpp"

namespace kagent {

enum class api_kind { anthropic, openai_chat, openai_responses, relay };

struct wire_options {
  api_kind api = api_kind::anthropic;
  bool stream = false;
  /// false for OpenAI-compatible servers (vLLM, Ollama, llama.cpp): they get `max_tokens`, no
  /// `reasoning_effort` and no `stream_options`, which many of them reject.
  bool official = true;
};

/// o1*, o3*, o4*, gpt-5*: models that take max_completion_tokens and reject a non-default temperature.
bool is_openai_reasoning_model(const std::string& model);
/// Anthropic models that predate `output_config.effort` (it is only sent to newer ones).
bool anthropic_supports_effort(const std::string& model);
/// OpenAI models only served by the Responses API (*-pro reasoning models, codex models).
bool needs_responses_api(const std::string& model);

/// The JSON body for `model` (the request's model already resolved).
nlohmann::json build_body(const llm_request& req, const std::string& model, const wire_options& opt);

/// The path appended to the base URL ("/v1/messages", "/chat/completions", "/responses", "" for relay).
std::string api_path(api_kind api);

/// Parses a complete (non-streamed) 2xx body. Throws llm_error{malformed} naming the provider.
llm_response parse_body(api_kind api, const std::string& body, const std::string& provider);

/// Decodes one provider's SSE stream into an llm_response. A mid-stream `error` event throws the
/// classified llm_error (overloaded_error -> overloaded, ...); a stream that ends before its final
/// event (message_stop / [DONE] / response.completed) throws llm_error{connection} from finish().
class stream_decoder {
public:
  stream_decoder(api_kind api, std::string provider, std::function<void(std::string_view)> on_text = {});
  void on_event(const sse_event& ev);
  llm_response finish();
  bool complete() const { return done_; }

private:
  void fail_event(const nlohmann::json& err);
  api_kind api_;
  std::string provider_;
  std::function<void(std::string_view)> on_text_;
  llm_response out_;
  bool done_ = false;
};

/// Maps a non-2xx reply to the error kind the retry policy acts on (401/403 auth, 402/insufficient
/// quota/spend limit/credit balance quota, 429 rate_limited with Retry-After / retry-after-ms,
/// 529/503 overloaded, 5xx server, 408 timeout, other 4xx bad_request).
llm_error classify_http_error(const std::string& provider, int status, const std::string& retry_after,
                              const std::string& retry_after_ms, const std::string& body);

/// Retry-After in seconds (delta-seconds form; HTTP dates are ignored). nullopt when absent or bad.
std::optional<double> parse_retry_after(const std::string& retry_after, const std::string& retry_after_ms);

} // namespace kagent
