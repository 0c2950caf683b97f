#include "platform/common/failure_kind.hpp"

#include <array>
#include <utility>

namespace kagent {

namespace {
constexpr std::array<std::pair<failure_kind, const char*>, 16> names{{
    {failure_kind::verification, "verification"},
    {failure_kind::benchmark, "benchmark"},
    {failure_kind::timeout, "timeout"},
    {failure_kind::crash, "crash"},
    {failure_kind::harness, "harness"},
    {failure_kind::banned, "banned"},
    {failure_kind::integrity, "integrity"},
    {failure_kind::user_test, "user_test"},
    {failure_kind::problem, "problem"},
    {failure_kind::llm, "llm"},
    {failure_kind::no_code, "no_code"},
    {failure_kind::duplicate, "duplicate"},
    {failure_kind::actor_down, "actor_down"},
    {failure_kind::interrupted, "interrupted"},
    {failure_kind::node_down, "node_down"},
    {failure_kind::unknown, "unknown"},
}};
}  // namespace

const char* to_string(failure_kind k) {
  for (const auto& [kind, name] : names)
    if (kind == k) return name;
  return "unknown";
}

std::optional<failure_kind> parse_failure_kind(std::string_view name) {
  for (const auto& [kind, n] : names)
    if (name == n) return kind;
  return std::nullopt;
}

}  // namespace kagent
