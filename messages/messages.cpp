#include "messages/messages.hpp"

namespace kagent {

std::string to_string(errc e) {
  switch (e) {
    case errc::none: return "none";
    case errc::actor_failed: return "actor_failed";
    case errc::injected_fault: return "injected_fault";
    case errc::device_lost: return "device_lost";
    case errc::node_refused: return "node_refused";
  }
  return "unknown";
}

const char* to_string(event_kind k) {
  switch (k) {
    case event_kind::run_start: return "run_start";
    case event_kind::note: return "note";
    case event_kind::error: return "error";
    case event_kind::initial_step: return "initial_step";
    case event_kind::initial: return "initial";
    case event_kind::resume: return "resume";
    case event_kind::round_start: return "round_start";
    case event_kind::round_end: return "round_end";
    case event_kind::analysis_start: return "analysis_start";
    case event_kind::analysis: return "analysis";
    case event_kind::candidate_start: return "candidate_start";
    case event_kind::candidate_result: return "candidate_result";
    case event_kind::concurrency: return "concurrency";
    case event_kind::profiling_failed: return "profiling_failed";
    case event_kind::mode_change: return "mode_change";
    case event_kind::interrupted: return "interrupted";
    case event_kind::run_end: return "run_end";
    case event_kind::llm_call: return "llm_call";
    case event_kind::llm_retry: return "llm_retry";
    case event_kind::node_down: return "node_down";
    case event_kind::node_up: return "node_up";
    case event_kind::candidate_end: return "candidate_end";
    case event_kind::start_checked: return "start_checked";
  }
  return "note";
}

candidate_result ended_without_result(const candidate_spec& spec, int32_t gpu_id, failure_kind cause,
                                      std::string error) {
  candidate_result r;
  r.candidate_id = spec.id;
  r.parent_id = spec.parent_id;
  r.round = spec.round;
  r.gpu_id = gpu_id;
  r.model = spec.model;
  r.failure_cause = cause;
  r.error = std::move(error);
  return r;
}

caf::error make_error(errc code, std::string reason) {
  return caf::error(static_cast<uint8_t>(code), caf::atom("kagent"), caf::make_message(std::move(reason)));
}

std::string reason_of(const caf::error& e) {
  if (e.category() == caf::atom("kagent") && e.context().match_elements<std::string>())
    return e.context().get_as<std::string>(0);
  return to_string(e);
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
  cfg.add_message_type<std::vector<profile_result>>("std::vector<kagent::profile_result>");
  cfg.add_message_type<std::vector<profile>>("std::vector<kagent::profile>");
  cfg.add_message_type<profile_batch>("kagent::profile_batch");
  cfg.add_message_type<profiling_failed>("kagent::profiling_failed");
  cfg.add_message_type<candidate_spec>("kagent::candidate_spec");
  cfg.add_message_type<candidate_result>("kagent::candidate_result");
  cfg.add_message_type<candidate_measured>("kagent::candidate_measured");
  cfg.add_message_type<run_event>("kagent::run_event");
  cfg.add_message_type<run_finished>("kagent::run_finished");
  cfg.add_message_type<artifact>("kagent::artifact");
  cfg.add_message_type<std::vector<artifact>>("std::vector<kagent::artifact>");
  cfg.add_message_type<device_actor_type>("kagent::device_actor_type");
  cfg.add_message_type<node_hello>("kagent::node_hello");
  cfg.add_message_type<node_challenge>("kagent::node_challenge");
  cfg.add_message_type<node_auth>("kagent::node_auth");
  cfg.add_message_type<device_offer>("kagent::device_offer");
  cfg.add_message_type<node_offer>("kagent::node_offer");
  cfg.add_message_type<run_setup>("kagent::run_setup");
  cfg.add_message_type<node_device>("kagent::node_device");
  cfg.add_message_type<std::vector<node_device>>("std::vector<kagent::node_device>");
  cfg.add_message_type<node_joined>("kagent::node_joined");
  cfg.add_message_type<node_refused>("kagent::node_refused");
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
