#include "platform/llm/wire.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace kagent {

using json = nlohmann::json;

static bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

bool is_openai_reasoning_model(const std::string& model) {
  if (starts_with(model, "gpt-5")) return true;
  return model.size() >= 2 && model[0] == 'o' && std::isdigit(static_cast<unsigned char>(model[1]));
}

bool anthropic_supports_effort(const std::string& model) {
  // Older models answer 400 to output_config; "high" is the default effort where it exists.
  for (const char* p : {"claude-3", "claude-2", "claude-instant", "claude-opus-4-0", "claude-opus-4-1",
                        "claude-opus-4-2025", "claude-sonnet-4-0", "claude-sonnet-4-2025", "claude-sonnet-4-5",
                        "claude-haiku"})
    if (starts_with(model, p)) return false;
  return true;
}

bool needs_responses_api(const std::string& model) {
  return model.find("codex") != std::string::npos ||
         (is_openai_reasoning_model(model) && model.find("-pro") != std::string::npos);
}

std::string api_path(api_kind api) {
  switch (api) {
    case api_kind::anthropic: return "/v1/messages";
    case api_kind::openai_chat: return "/chat/completions";
    case api_kind::openai_responses: return "/responses";
    case api_kind::relay: return "";
  }
  return "";
}

static json chat_messages(const llm_request& req) {
  json msgs = json::array();
  if (!req.system.empty()) msgs.push_back({{"role", "system"}, {"content", req.system}});
  for (auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  return msgs;
}

json build_body(const llm_request& req, const std::string& model, const wire_options& opt) {
  json b;
  b["model"] = model;
  switch (opt.api) {
    case api_kind::anthropic: {
      // SPEC §14 A.73-75, B.95-96: max_tokens as asked, temperature once (≤ 1.0), effort in the body,
      // the whole conversation, system prompt at top level.
      b["max_tokens"] = req.max_tokens;
      std::string system = req.system;
      json msgs = json::array();
      for (auto& m : req.messages) {
        if (m.role == "system") {
          system += (system.empty() ? "" : "\n\n") + m.content;
          continue;
        }
        msgs.push_back({{"role", m.role}, {"content", m.content}});
      }
      b["messages"] = msgs;
      if (!system.empty()) b["system"] = system;
      if (req.temperature) b["temperature"] = std::clamp(*req.temperature, 0.0, 1.0);
      if (req.high_effort && anthropic_supports_effort(model)) b["output_config"] = {{"effort", "high"}};
      if (opt.stream) b["stream"] = true;
      break;
    }
    case api_kind::openai_chat: {
      bool reasoning = is_openai_reasoning_model(model);
      b["messages"] = chat_messages(req);
      b[opt.official ? "max_completion_tokens" : "max_tokens"] = req.max_tokens;
      if (req.temperature && !(opt.official && reasoning)) b["temperature"] = *req.temperature;
      if (opt.official && reasoning && req.high_effort) b["reasoning_effort"] = "high";
      if (opt.stream) {
        b["stream"] = true;
        if (opt.official) b["stream_options"] = {{"include_usage", true}};
      }
      break;
    }
    case api_kind::openai_responses: {
      bool reasoning = is_openai_reasoning_model(model);
      json input = json::array();
      for (auto& m : req.messages) input.push_back({{"role", m.role}, {"content", m.content}});
      b["input"] = input;
      if (!req.system.empty()) b["instructions"] = req.system;
      b["max_output_tokens"] = req.max_tokens;
      if (req.temperature && !reasoning) b["temperature"] = *req.temperature;
      if (reasoning && req.high_effort) b["reasoning"] = {{"effort", "high"}};
      b["store"] = false;
      if (opt.stream) b["stream"] = true;
      break;
    }
    case api_kind::relay: {
      // SPEC §11.2 relay shape; max_tokens is the requested value, not the old 8192 cap.
      b["messages"] = chat_messages(req);
      b["temperature"] = req.temperature.value_or(0.7);
      b["max_tokens"] = req.max_tokens;
      b["top_p"] = 1.0;
      b["n"] = 1;
      if (req.high_effort) b["reasoning"] = {{"effort", "high"}};
      break;
    }
  }
  return b;
}

static json parse_json(const std::string& body, const std::string& provider) {
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    std::string head = body.substr(0, 120);
    throw llm_error(llm_error_kind::malformed, provider + ": the reply is not valid JSON (" + e.what() +
                                                   "); it starts with: " + head);
  }
}

static long num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<long>() : 0;
}

static std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

llm_response parse_body(api_kind api, const std::string& body, const std::string& provider) {
  json j = parse_json(body, provider);
  llm_response r;
  r.provider = provider;
  try {
    switch (api) {
      case api_kind::anthropic: {
        if (!j.is_object() || !j.contains("content") || !j["content"].is_array())
          throw llm_error(llm_error_kind::malformed, provider + ": the reply has no 'content' array");
        for (auto& block : j["content"])  // thinking / redacted_thinking blocks are skipped
          if (str(block, "type") == "text") r.text += str(block, "text");
        r.model = str(j, "model");
        r.stop_reason = str(j, "stop_reason");
        if (j.contains("usage")) {
          auto& u = j["usage"];
          r.input_tokens = num(u, "input_tokens") + num(u, "cache_creation_input_tokens") + num(u, "cache_read_input_tokens");
          r.output_tokens = num(u, "output_tokens");
        }
        break;
      }
      case api_kind::openai_chat: {
        if (!j.is_object() || !j.contains("choices") || !j["choices"].is_array() || j["choices"].empty())
          throw llm_error(llm_error_kind::malformed, provider + ": the reply has no 'choices'");
        auto& c0 = j["choices"][0];
        if (c0.contains("message") && c0["message"].is_object()) r.text = str(c0["message"], "content");
        r.stop_reason = str(c0, "finish_reason");
        r.model = str(j, "model");
        if (j.contains("usage") && j["usage"].is_object()) {
          r.input_tokens = num(j["usage"], "prompt_tokens");
          r.output_tokens = num(j["usage"], "completion_tokens");
        }
        break;
      }
      case api_kind::openai_responses: {
        if (!j.is_object() || !j.contains("output") || !j["output"].is_array())
          throw llm_error(llm_error_kind::malformed, provider + ": the reply has no 'output' array");
        for (auto& item : j["output"])
          if (str(item, "type") == "message" && item.contains("content") && item["content"].is_array())
            for (auto& c : item["content"])
              if (str(c, "type") == "output_text") r.text += str(c, "text");
        std::string status = str(j, "status");
        if (status == "failed")
          throw llm_error(llm_error_kind::server, provider + ": the response failed: " +
                                                      (j.contains("error") ? j["error"].dump() : std::string("no details")));
        r.stop_reason = status == "incomplete" ? "length" : "stop";
        r.model = str(j, "model");
        if (j.contains("usage") && j["usage"].is_object()) {
          r.input_tokens = num(j["usage"], "input_tokens");
          r.output_tokens = num(j["usage"], "output_tokens");
        }
        break;
      }
      case api_kind::relay: {
        // A JSON list of {output, plugboard_request_id}; the first entry is the reply.
        const json* first = nullptr;
        if (j.is_array() && !j.empty()) first = &j[0];
        else if (j.is_object()) first = &j;
        if (!first || !first->is_object() || !first->contains("output"))
          throw llm_error(llm_error_kind::malformed, provider + ": expected a JSON list of {output, plugboard_request_id}");
        auto& o = (*first)["output"];
        r.text = o.is_string() ? o.get<std::string>() : o.dump();
        r.stop_reason = "stop";
        break;
      }
    }
  } catch (const json::exception& e) {
    throw llm_error(llm_error_kind::malformed, provider + ": unexpected reply shape: " + e.what());
  }
  return r;
}

// ---- streams -------------------------------------------------------------------------------------

stream_decoder::stream_decoder(api_kind api, std::string provider, std::function<void(std::string_view)> on_text)
    : api_(api), provider_(std::move(provider)), on_text_(std::move(on_text)) {
  out_.provider = provider_;
}

void stream_decoder::fail_event(const json& err) {
  // {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}} (Anthropic), or
  // {"error":{"message","type","code"}} / {"type":"error","code","message"} (OpenAI).
  const json& e = err.contains("error") && err["error"].is_object() ? err["error"] : err;
  std::string type = str(e, "type");
  std::string code = str(e, "code");
  std::string msg = str(e, "message");
  llm_error_kind kind = llm_error_kind::stream_error;
  if (type == "overloaded_error" || code == "server_is_overloaded") kind = llm_error_kind::overloaded;
  else if (type == "rate_limit_error" || code == "rate_limit_exceeded") kind = llm_error_kind::rate_limited;
  else if (type == "api_error" || type == "server_error" || code == "server_error") kind = llm_error_kind::server;
  else if (code == "insufficient_quota" || type == "billing_error") kind = llm_error_kind::quota;
  throw llm_error(kind, provider_ + ": error event in the response stream: " + (type.empty() ? code : type) +
                            (msg.empty() ? "" : ": " + msg));
}

void stream_decoder::on_event(const sse_event& ev) {
  if (done_) return;
  if (api_ == api_kind::openai_chat && ev.data == "[DONE]") {
    done_ = true;
    return;
  }
  if (ev.data.empty()) return;
  json j;
  try {
    j = json::parse(ev.data);
  } catch (const json::parse_error& e) {
    throw llm_error(llm_error_kind::malformed, provider_ + ": unparseable stream event '" + ev.event + "': " + e.what());
  }
  std::string type = ev.event.empty() ? str(j, "type") : ev.event;
  if (type == "error" || (j.is_object() && j.contains("error") && j["error"].is_object() && type != "response.failed"))
    fail_event(j);
  auto text = [&](const std::string& t) {
    if (t.empty()) return;
    out_.text += t;
    if (on_text_) on_text_(t);
  };
  switch (api_) {
    case api_kind::anthropic:
      if (type == "message_start" && j.contains("message")) {
        auto& m = j["message"];
        out_.model = str(m, "model");
        if (m.contains("usage")) {
          auto& u = m["usage"];
          out_.input_tokens = num(u, "input_tokens") + num(u, "cache_creation_input_tokens") + num(u, "cache_read_input_tokens");
          out_.output_tokens = num(u, "output_tokens");
        }
      } else if (type == "content_block_delta" && j.contains("delta")) {
        if (str(j["delta"], "type") == "text_delta") text(str(j["delta"], "text"));  // thinking deltas skipped
      } else if (type == "message_delta") {
        if (j.contains("delta") && j["delta"].is_object()) {
          std::string sr = str(j["delta"], "stop_reason");
          if (!sr.empty()) out_.stop_reason = sr;
        }
        if (j.contains("usage") && j["usage"].is_object()) {
          if (long o = num(j["usage"], "output_tokens")) out_.output_tokens = o;  // cumulative
          if (long i = num(j["usage"], "input_tokens")) out_.input_tokens = i;
        }
      } else if (type == "message_stop") {
        done_ = true;
      }
      break;
    case api_kind::openai_chat:
      if (out_.model.empty()) out_.model = str(j, "model");
      if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
        auto& c0 = j["choices"][0];
        if (c0.contains("delta") && c0["delta"].is_object()) text(str(c0["delta"], "content"));
        std::string fr = str(c0, "finish_reason");
        if (!fr.empty()) out_.stop_reason = fr;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        out_.input_tokens = num(j["usage"], "prompt_tokens");
        out_.output_tokens = num(j["usage"], "completion_tokens");
      }
      break;
    case api_kind::openai_responses:
      if (type == "response.output_text.delta") {
        text(str(j, "delta"));
      } else if (type == "response.completed" || type == "response.incomplete") {
        done_ = true;
        out_.stop_reason = type == "response.completed" ? "stop" : "length";
        if (j.contains("response") && j["response"].is_object()) {
          auto& r = j["response"];
          out_.model = str(r, "model");
          if (r.contains("usage") && r["usage"].is_object()) {
            out_.input_tokens = num(r["usage"], "input_tokens");
            out_.output_tokens = num(r["usage"], "output_tokens");
          }
        }
      } else if (type == "response.failed") {
        json err = j.contains("response") && j["response"].contains("error") ? j["response"]["error"] : j;
        fail_event(json{{"error", err.is_object() ? err : json{{"message", err.dump()}}}});
      }
      break;
    case api_kind::relay:
      break;
  }
}

llm_response stream_decoder::finish() {
  if (!done_)
    throw llm_error(llm_error_kind::connection,
                    provider_ + ": the response stream ended before its final event (connection dropped mid-stream)");
  return out_;
}

// ---- errors --------------------------------------------------------------------------------------

std::optional<double> parse_retry_after(const std::string& retry_after, const std::string& retry_after_ms) {
  auto parse = [](const std::string& s) -> std::optional<double> {
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || v < 0) return std::nullopt;
    return v;
  };
  if (auto ms = parse(retry_after_ms)) return *ms / 1000.0;
  return parse(retry_after);
}

llm_error classify_http_error(const std::string& provider, int status, const std::string& retry_after,
                              const std::string& retry_after_ms, const std::string& body) {
  std::string type, code, message;
  try {
    json j = json::parse(body);
    const json& e = j.is_object() && j.contains("error") && j["error"].is_object() ? j["error"] : j;
    type = str(e, "type");
    code = str(e, "code");
    message = str(e, "message");
    if (e.contains("details") && e["details"].is_object()) {
      std::string ec = str(e["details"], "error_code");
      if (!ec.empty()) code = ec;
    }
    if (message.empty() && j.is_object() && j.contains("error") && j["error"].is_string()) message = j["error"].get<std::string>();
  } catch (const json::exception&) {
    message = body.substr(0, 200);
  }
  std::string what = provider + ": HTTP " + std::to_string(status) + (type.empty() ? "" : " " + type) +
                     (code.empty() || code == type ? "" : " (" + code + ")") + (message.empty() ? "" : ": " + message);
  auto has = [&](std::string_view needle) {
    return type.find(needle) != std::string::npos || code.find(needle) != std::string::npos ||
           message.find(needle) != std::string::npos;
  };
  auto ra = parse_retry_after(retry_after, retry_after_ms);
  if (status == 401 || status == 403) return llm_error(llm_error_kind::auth, what, status);
  if (status == 402 || has("insufficient_quota") || has("billing") || has("spend_limit") || has("spend limit") ||
      has("credit balance"))
    return llm_error(llm_error_kind::quota, what, status);
  if (status == 429) return llm_error(llm_error_kind::rate_limited, what, status, ra);
  if (status == 529 || status == 503 || type == "overloaded_error") return llm_error(llm_error_kind::overloaded, what, status, ra);
  if (status == 408) return llm_error(llm_error_kind::timeout, what, status);
  if (status >= 500 || status == 409) return llm_error(llm_error_kind::server, what, status, ra);
  return llm_error(llm_error_kind::bad_request, what, status);
}

} // namespace kagent
