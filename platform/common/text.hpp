#pragma once
// Text helpers every area uses, defined once.
#include <string>
#include <string_view>

namespace kagent {

/// `s` without leading and trailing ASCII whitespace (space, \t, \r, \n, \f, \v).
std::string trim(std::string_view s);

} // namespace kagent
