#include "messages/messages.hpp"

namespace kagent {

std::string to_string(errc e) {
  switch (e) {
    case errc::none: return "none";
    case errc::actor_failed: return "actor_failed";
    case errc::injected_fault: return "injected_fault";
    case errc::device_lost: return "device_lost";
  }
  return "unknown";
}

void register_messages(caf::actor_system_config& cfg) {
  cfg.add_message_type<chat_message>("kagent::chat_message");
  cfg.add_message_type<std::vector<chat_message>>("std::vector<kagent::chat_message>");
  cfg.add_message_type<complete>("kagent::complete");
  cfg.add_message_type<completion>("kagent::completion");
  cfg.add_message_type<evaluate>("kagent::evaluate");
  cfg.add_message_type<evaluation>("kagent::evaluation");
  cfg.add_message_type<profile>("kagent::profile");
  cfg.add_message_type<profile_result>("kagent::profile_result");
  cfg.add_message_type<profiling_failed>("kagent::profiling_failed");
  cfg.add_message_type<candidate_spec>("kagent::candidate_spec");
  cfg.add_message_type<candidate_result>("kagent::candidate_result");
  cfg.add_message_type<run_event>("kagent::run_event");
  cfg.add_message_type<analyze_parent>("kagent::analyze_parent");
  cfg.add_message_type<dedup_query>("kagent::dedup_query");
  cfg.add_message_type<dedup_answer>("kagent::dedup_answer");
  cfg.add_message_type<parent_analysis>("kagent::parent_analysis");
  cfg.add_message_type<store::llm_call_record>("kagent::store::llm_call_record");
  cfg.add_error_category(caf::atom("kagent"), [](uint8_t code, caf::atom_value, const caf::message& ctx) {
    return "kagent::" + to_string(static_cast<errc>(code)) + (ctx.empty() ? "" : caf::deep_to_string(ctx));
  });
}

} // namespace kagent
