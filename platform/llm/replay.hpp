#pragma once
// Record and replay of LLM calls, so a run can be reproduced exactly and tests run offline.
//
// A replay set is a directory of files named <purpose>_<NNN>.<ext> (NNN: any number of digits):
//   optimize_001.md    the reply text, verbatim (.md, .txt and .py are all read as the raw reply)
//   optimize_002.json  a recording: {"purpose", "request_hash", "request": {...},
//                      "response": {"text", "model", "provider", "input_tokens", "output_tokens",
//                      "stop_reason"}} or "error": {"kind", "message", "http_status"} to replay a failure
// Purposes are whatever the caller puts in llm_request::purpose ("optimize", "refine", "bottleneck",
// "reflexion", "ask"...). Files named any_<NNN>.* serve purposes that have no file of their own.
//
// Matched replies: a text file that starts with a front-matter block
//   <!-- replay
//   match: some literal text
//   match: another literal text
//   -->
// (or a .json recording with a top-level "match": [...] array) is served for every request of its
// purpose whose system prompt or messages contain EVERY match string, whatever the order of the calls:
// the lowest-numbered matching file wins and matched files are never used up. A block without match
// lines matches every request of the purpose. Files without a block are served in numeric order, and
// only to requests that no matched file matches. See docs/llm.md for the full description.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "platform/llm/provider.hpp"

namespace kagent {

struct replay_options {
  bool cycle = false;    ///< when a purpose runs out: start over (true) or fail with replay_exhausted
  bool by_hash = false;  ///< serve the .json recording whose request_hash matches the request
};

/// Stable hash of what determines a reply: purpose, system, messages, max_tokens, temperature,
/// high_effort (not the model, so a set recorded with one model replays under any --model).
std::string request_hash(const llm_request& req);

/// Serves a replay set. Throws user_error at construction when the directory is missing, holds two
/// files with the same purpose and number, or holds a malformed front-matter block / "match" array.
class replay_provider final : public llm_provider {
public:
  replay_provider(std::string dir, replay_options opt = {}, std::string model = "");
  llm_response complete(const llm_request& req, const text_callback& on_text = {}) override;
  std::string name() const override { return "replay"; }
  std::string default_model() const override { return model_; }
  /// Replies served so far for `purpose` (matched and in-order ones).
  int served(const std::string& purpose) const;

private:
  struct entry {
    int number = 0;
    std::string path;
    bool matched = false;             ///< has a front-matter block / "match" array
    std::vector<std::string> match;   ///< all must occur in the request (empty + matched: any request)
  };
  struct purpose_set {
    std::vector<entry> matched;  ///< by number
    std::vector<entry> ordered;  ///< by number; served in turn
  };
  llm_response serve(const entry& e, const llm_request& req, const text_callback& on_text) const;
  std::string dir_;
  replay_options opt_;
  std::string model_;
  std::map<std::string, purpose_set> sets_;
  mutable std::mutex m_;
  std::map<std::string, int> next_;    ///< next in-order reply, per set key
  std::map<std::string, int> served_;  ///< per requested purpose
};

/// The literal strings of a front-matter block at the start of `text` (see above), and where the
/// reply proper starts. `present` is false (and body_offset 0) when the text has no block. Throws
/// user_error naming `where` for a malformed block.
struct replay_front_matter {
  bool present = false;
  std::vector<std::string> match;
  size_t body_offset = 0;
};
replay_front_matter parse_replay_front_matter(const std::string& text, const std::string& where);

/// Wraps a provider and writes every call (reply or error) as <purpose>_<NNN>.json into `dir`
/// (`--llm-record DIR`), continuing after the numbers already there. Only the request fields and the
/// reply are stored (never HTTP headers); every string is passed through redact() with `secrets`.
class recording_provider final : public llm_provider {
public:
  recording_provider(std::shared_ptr<llm_provider> inner, std::string dir, std::vector<std::string> secrets);
  llm_response complete(const llm_request& req, const text_callback& on_text = {}) override;
  std::string name() const override { return inner_->name(); }
  std::string default_model() const override { return inner_->default_model(); }

private:
  void write(const llm_request& req, const llm_response* res, const llm_error* err);
  std::shared_ptr<llm_provider> inner_;
  std::string dir_;
  std::vector<std::string> secrets_;
  std::mutex m_;
  std::map<std::string, int> next_;
};

} // namespace kagent
