#include "platform/search/stored_run.hpp"

#include <optional>

#include "platform/common/errors.hpp"
#include <string_view>

#include <charconv>

namespace kagent::search {

namespace {

std::optional<std::string> key_after(const std::string& key, std::string_view prefix) {
  return key.rfind(prefix, 0) == 0 ? std::optional<std::string>(key.substr(prefix.size())) : std::nullopt;
}

nlohmann::json parsed(const std::string& text) { return nlohmann::json::parse(text, nullptr, false); }

std::optional<int> integer(const std::string& text) {
  try {
    size_t used = 0;
    const int v = std::stoi(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

} // namespace

int first_node_device_id(store::program_db& db) {
  int next = 100;
  const auto labels = nlohmann::json::parse(db.get_state(store::state_key::device_labels).value_or("{}"), nullptr, false);
  if (!labels.is_object()) return next;
  for (const auto& [id, label] : labels.items()) {
    int n = 0;
    auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), n);
    if (ec == std::errc{} && end == id.data() + id.size() && n >= next && n < 1000000) next = n + 1;
  }
  return next;
}

stored_run load_stored_run(store::program_db& db) {
  stored_run out;
  auto number = [&](const char* key) {
    auto j = db.get_state_json(key);
    return j && j->is_number() ? j->get<double>() : not_measured;
  };
  out.eager_ms = number(store::state_key::eager_ms);
  out.compile_ms = number(store::state_key::compile_ms);
  out.references_cached_at = db.get_state(store::state_key::references_cached_at).value_or("");
  if (auto rd = db.get_state(store::state_key::round_done)) {
    // Never guessed: a wrong round would repeat or skip a round of the search.
    auto v = integer(*rd);
    if (!v) throw run_error("program.db: run_state '" + std::string{store::state_key::round_done} +
                            "' is not an integer: '" + *rd + "'");
    out.round_done = *v;
  }
  if (auto s = db.get_state_json(store::state_key::sessions); s && s->is_array()) out.sessions = *s;
  if (auto d = db.get_state_json(store::state_key::diverged); d && d->is_array())
    for (const auto& id : *d)
      if (id.is_string()) out.diverged.insert(id.get<std::string>());
  if (auto m = db.get_state_json(store::state_key::analysis_mode); m && m->is_object())
    for (const auto& [device, mode] : m->items())
      if (auto id = integer(device); id && mode == "synthetic") out.synthetic_devices.insert(*id);
  for (const auto& [key, value] : db.all_state()) {
    if (auto id = key_after(key, store::state_key::analysis_prefix)) {
      if (auto j = parsed(value); j.is_object()) out.analyses[*id] = analysis_from_json(j);
    } else if (auto pid = key_after(key, store::state_key::profile_prefix)) {
      try {
        if (auto j = parsed(value); j.is_object()) out.profiles[*pid] = j.get<kernel_profile>();
      } catch (const std::exception&) {
        // A profile with nested or non-numeric metrics: left out, the kernel is profiled again.
      }
    } else if (auto cid = key_after(key, store::state_key::spec_prefix)) {
      if (auto j = parsed(value); j.is_object()) out.plans[*cid] = j;
    }
  }
  return out;
}

} // namespace kagent::search
