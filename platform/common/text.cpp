#include "platform/common/text.hpp"

namespace kagent {

std::string trim(std::string_view s) {
  constexpr std::string_view ws = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(ws) - b + 1));
}

} // namespace kagent
