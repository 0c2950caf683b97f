#pragma once
// The LLM preflight: one tiny call before a run's long initial phase, so that a refused key, an
// unreachable endpoint or an unknown model is one clear line within seconds instead of a run whose
// every candidate fails an hour later. Transient answers (429, 5xx, overloaded) do not stop the run:
// its own retries deal with them.
#include <string>

#include "platform/llm/provider.hpp"

namespace kagent {

struct preflight_outcome {
  enum class verdict { ok, transient, fatal } result = verdict::ok;
  std::string message;  ///< one line (no newline): what failed, or the transient answer; "" when ok
};

/// Sends one short request ("Reply with OK", at most 16 tokens) for `model`. A reply cut at the token
/// limit or an empty reply still proves the endpoint, key and model: ok. Never throws for LLM errors.
preflight_outcome run_preflight(llm_provider& provider, const std::string& model);

/// The settings the preflight uses: the run's, with short deadlines (connect 10 s, 30 s in all) and
/// no streaming.
provider_settings preflight_settings(provider_settings s);

} // namespace kagent
