#pragma once
// Turning an LLM reply into kernel code, and rejecting replies that hold none with a reason the next
// prompt can quote.
#include <cstddef>
#include <string>
#include <string_view>

namespace kagent {

struct code_extraction {
  bool ok = false;
  std::string code;    ///< the extracted code (also filled when rejected, for the log); always valid UTF-8
  std::string reason;  ///< why it was rejected; empty when ok
  size_t replaced_bytes = 0;  ///< invalid UTF-8 sequences replaced by U+FFFD in `code`
};

/// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool is_valid_utf8(std::string_view s);

/// Offset of the first byte of the first ill-formed UTF-8 sequence in `s`; std::string_view::npos
/// when `s` is valid.
size_t first_invalid_utf8(std::string_view s);

/// `s` with every ill-formed UTF-8 sequence replaced by U+FFFD (one per maximal invalid subpart, as
/// nlohmann::json's error_handler_t::replace and Python's errors="replace" do). `replaced`, when given,
/// receives how many were replaced. Valid input comes back byte-identical.
std::string to_valid_utf8(std::string_view s, size_t* replaced = nullptr);

/// Picks the code: the ```python (or ```py) fenced block — with several, the one defining
/// `kernel_function`, else the longest —; else a generic ``` fence by the same rule; else the whole
/// reply when it looks like Python. Rejects empty code, code under `min_chars` characters, code
/// without a `def kernel_function` definition, and a reply that ends inside an unterminated fence
/// (truncated at max_tokens), and code longer than `max_code_bytes` (0: no bound). The code is
/// normalised to valid UTF-8 first: the harness receives it through JSON, which would replace invalid
/// bytes on the way, so the bytes saved as kernel.py / best_kernel.py are exactly the bytes verified.
code_extraction extract_kernel(const std::string& reply, size_t min_chars = 100, size_t max_code_bytes = 0);

} // namespace kagent
