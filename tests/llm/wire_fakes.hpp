#pragma once
// Replies in each provider's real wire format (TOOL_FORMATS.md §4), for the loopback server.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/llm/loopback_server.hpp"

namespace kagent::test {

using json = nlohmann::json;

inline std::string sse(const std::string& event, const json& data) {
  return (event.empty() ? "" : "event: " + event + "\n") + "data: " + data.dump() + "\n\n";
}

inline std::vector<std::string> split_text(const std::string& text, size_t pieces) {
  std::vector<std::string> out;
  size_t step = std::max<size_t>(1, (text.size() + pieces - 1) / pieces);
  for (size_t i = 0; i < text.size(); i += step) out.push_back(text.substr(i, step));
  return out;
}

inline scripted_reply json_reply(int status, const json& body) {
  scripted_reply r;
  r.status = status;
  r.headers = {{"Content-Type", "application/json"}};
  r.chunks = {body.dump()};
  return r;
}

inline scripted_reply anthropic_json(const std::string& text, long in = 11, long out = 22,
                                     const std::string& stop = "end_turn") {
  return json_reply(200, {{"id", "msg_01"}, {"type", "message"}, {"role", "assistant"}, {"model", "claude-opus-4-6"},
                          {"content", json::array({{{"type", "thinking"}, {"thinking", "let me think"}, {"signature", "sig"}},
                                                   {{"type", "text"}, {"text", text}}})},
                          {"stop_reason", stop}, {"stop_sequence", nullptr},
                          {"usage", {{"input_tokens", in}, {"output_tokens", out}}}});
}

/// The full Anthropic event sequence, one SSE event per body piece (chunked framing).
inline scripted_reply anthropic_sse(const std::string& text, long in = 11, long out = 22, bool finish = true) {
  scripted_reply r;
  r.headers = {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}};
  r.frame = scripted_reply::framing::chunked;
  r.chunks.push_back(sse("message_start", {{"type", "message_start"},
                                           {"message", {{"id", "msg_01"}, {"type", "message"}, {"role", "assistant"},
                                                        {"model", "claude-opus-4-6"}, {"content", json::array()},
                                                        {"stop_reason", nullptr},
                                                        {"usage", {{"input_tokens", in}, {"output_tokens", 1}}}}}}));
  r.chunks.push_back(sse("content_block_start", {{"type", "content_block_start"}, {"index", 0},
                                                 {"content_block", {{"type", "thinking"}, {"thinking", ""}}}}));
  r.chunks.push_back(sse("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                                 {"delta", {{"type", "thinking_delta"}, {"thinking", "secret plan"}}}}));
  r.chunks.push_back(sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}));
  r.chunks.push_back(sse("content_block_start", {{"type", "content_block_start"}, {"index", 1},
                                                 {"content_block", {{"type", "text"}, {"text", ""}}}}));
  r.chunks.push_back(sse("ping", {{"type", "ping"}}));
  for (auto& piece : split_text(text, 4))
    r.chunks.push_back(sse("content_block_delta", {{"type", "content_block_delta"}, {"index", 1},
                                                   {"delta", {{"type", "text_delta"}, {"text", piece}}}}));
  if (!finish) return r;
  r.chunks.push_back(sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 1}}));
  r.chunks.push_back(sse("message_delta", {{"type", "message_delta"},
                                           {"delta", {{"stop_reason", "end_turn"}, {"stop_sequence", nullptr}}},
                                           {"usage", {{"output_tokens", out}}}}));
  r.chunks.push_back(sse("message_stop", {{"type", "message_stop"}}));
  return r;
}

inline json anthropic_error_body(const std::string& type, const std::string& msg) {
  return {{"type", "error"}, {"error", {{"type", type}, {"message", msg}}}, {"request_id", "req_011"}};
}

inline scripted_reply openai_json(const std::string& text, long in = 13, long out = 17) {
  return json_reply(200, {{"id", "chatcmpl-1"}, {"object", "chat.completion"}, {"created", 1700000000}, {"model", "gpt-5.2"},
                          {"choices", json::array({{{"index", 0},
                                                    {"message", {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}}},
                                                    {"finish_reason", "stop"}}})},
                          {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out},
                                     {"completion_tokens_details", {{"reasoning_tokens", 5}}}}}});
}

inline scripted_reply openai_sse(const std::string& text, long in = 13, long out = 17, bool usage = true) {
  scripted_reply r;
  r.headers = {{"Content-Type", "text/event-stream"}};
  r.frame = scripted_reply::framing::chunked;
  auto chunk = [](const json& delta, const json& finish) {
    return json{{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1700000000}, {"model", "gpt-5.2"},
                {"choices", json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}})}};
  };
  r.chunks.push_back(sse("", chunk({{"role", "assistant"}, {"content", ""}}, nullptr)));
  for (auto& piece : split_text(text, 4)) r.chunks.push_back(sse("", chunk({{"content", piece}}, nullptr)));
  r.chunks.push_back(sse("", chunk(json::object(), "stop")));
  if (usage)
    r.chunks.push_back(sse("", {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"model", "gpt-5.2"},
                                {"choices", json::array()},
                                {"usage", {{"prompt_tokens", in}, {"completion_tokens", out}, {"total_tokens", in + out}}}}));
  r.chunks.push_back("data: [DONE]\n\n");
  return r;
}

inline json openai_error_body(const std::string& msg, const std::string& type, const std::string& code) {
  return {{"error", {{"message", msg}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

inline json responses_body(const std::string& text, long in = 7, long out = 9) {
  return {{"id", "resp_1"}, {"object", "response"}, {"status", "completed"}, {"model", "o3-pro"},
          {"output", json::array({{{"type", "reasoning"}, {"id", "rs_1"}, {"summary", json::array()}},
                                  {{"type", "message"}, {"role", "assistant"},
                                   {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}}})},
          {"usage", {{"input_tokens", in}, {"output_tokens", out}, {"output_tokens_details", {{"reasoning_tokens", 3}}}}}};
}

inline scripted_reply responses_sse(const std::string& text) {
  scripted_reply r;
  r.headers = {{"Content-Type", "text/event-stream"}};
  r.frame = scripted_reply::framing::chunked;
  r.chunks.push_back(sse("response.created", {{"type", "response.created"}, {"response", {{"id", "resp_1"}, {"status", "in_progress"}}}}));
  r.chunks.push_back(sse("response.in_progress", {{"type", "response.in_progress"}}));
  r.chunks.push_back(sse("response.output_item.added", {{"type", "response.output_item.added"}, {"output_index", 0}}));
  for (auto& piece : split_text(text, 3))
    r.chunks.push_back(sse("response.output_text.delta", {{"type", "response.output_text.delta"}, {"delta", piece}}));
  r.chunks.push_back(sse("response.output_text.done", {{"type", "response.output_text.done"}, {"text", text}}));
  r.chunks.push_back(sse("response.completed", {{"type", "response.completed"}, {"response", responses_body(text)}}));
  return r;
}

inline scripted_reply relay_json(const std::string& text) {
  return json_reply(200, json::array({{{"output", text}, {"plugboard_request_id", "pb-1"}}}));
}

/// A kernel reply that extract_kernel() accepts.
inline std::string kernel_reply() {
  return "Here is the optimized kernel.\n\n```python\nimport torch\nimport triton\nimport triton.language as tl\n\n"
         "@triton.jit\ndef _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n"
         "    offs = pid * BLOCK + tl.arange(0, BLOCK)\n    m = offs < n\n"
         "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)\n\n"
         "def kernel_function(x, y):\n    out = torch.empty_like(x)\n    n = x.numel()\n"
         "    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)\n    return out\n```\n\nIt fuses the add.";
}

} // namespace kagent::test
