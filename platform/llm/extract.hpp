#pragma once
// Turning an LLM reply into kernel code, and rejecting replies that hold none with a reason the next
// prompt can quote.
#include <string>

namespace kagent {

struct code_extraction {
  bool ok = false;
  std::string code;    ///< the extracted code (also filled when rejected, for the log)
  std::string reason;  ///< why it was rejected; empty when ok
};

/// Picks the code: the ```python (or ```py) fenced block — with several, the one defining
/// `kernel_function`, else the longest —; else a generic ``` fence by the same rule; else the whole
/// reply when it looks like Python. Rejects empty code, code under `min_chars` characters, code
/// without a `def kernel_function` definition, and a reply that ends inside an unterminated fence
/// (truncated at max_tokens).
code_extraction extract_kernel(const std::string& reply, size_t min_chars = 100);

} // namespace kagent
