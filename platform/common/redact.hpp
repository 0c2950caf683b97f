#pragma once
// The process-wide redactor: every secret value seen at start-up (the scrubbed environment, the LLM
// key, .env values) is registered once; every sink that writes or sends text (the run directory's
// files, program.db, events.jsonl, LLM request bodies and recordings) passes it through redact(), so
// text that came back from a child cannot carry a secret out by value (docs/sandbox.md).
#include <cstddef>
#include <string>
#include <string_view>

namespace kagent {

/// Values shorter than this are not registered: redacting "1" or "true" would mangle every file.
inline constexpr std::size_t min_secret_length = 8;

/// Registers `value` (the secret held by variable `name`) for redaction. Values shorter than
/// min_secret_length are ignored. Thread-safe; idempotent.
void register_secret(std::string_view name, std::string_view value);

/// `text` with every registered value replaced by "[REDACTED:NAME]" (longest values first).
/// Thread-safe; a copy of `text` when nothing is registered.
std::string redact(std::string_view text);

/// True when redact(text) would change `text`.
bool contains_secret(std::string_view text);

/// How many values are registered.
std::size_t registered_secret_count();

/// Forgets every registered value (tests only).
void clear_secrets_for_testing();

} // namespace kagent
