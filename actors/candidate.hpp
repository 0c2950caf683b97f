#pragma once
// One in-flight candidate pipeline (SPEC §1.3, one round), a stateful actor whose steps are the
// methods below: the direction from the parent's cached analysis -> optimization prompt -> LLM ->
// code -> verify (refine on failure) -> benchmark -> dedup -> SOL profile (policy) -> candidate_measured
// (the manager records it now) -> reflexion -> its candidate_result to the gpu worker. The worker owns
// its deadline and kills it when it expires.
#include <caf/all.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "actors/llm_client.hpp"
#include "actors/device.hpp"
#include "messages/messages.hpp"

namespace kagent {

class candidate_state {
public:
  static inline const char* name = "candidate";

  caf::behavior start(caf::stateful_actor<candidate_state>* self, context_ptr ctx, candidate_spec spec, int device_id,
                      caf::actor worker, device_actor_type device, llm_api llm);

private:
  // ---- set-up -------------------------------------------------------------------------------------
  void read_spec(int device_id);
  void choose_direction();
  void open_attempt();
  // ---- the pipeline, in order ---------------------------------------------------------------------
  void tune();
  void prompt();
  void ask(const std::string& purpose, const std::string& prompt_text);
  void on_reply(const std::string& purpose, int n, const completion& c);
  void verify();  ///< verify, then benchmark: one device step (device_mode::verify_benchmark)
  void evaluate_against(double best_now);
  void on_verified(const evaluation& e);
  void refine(const evaluation& e);
  void on_benchmarked(const evaluation& be);
  void dedup(const std::string& code_hash);
  void profile_sol();
  void on_profile(const profile_result& pr);
  void reflect();
  void report_measured();
  void succeed();
  void fail(failure_kind cause, const std::string& error);
  void end();
  void fail_verification(const evaluation& e);
  // ---- helpers ------------------------------------------------------------------------------------
  complete llm_request(const std::string& purpose, const std::vector<chat_message>& messages, int max_tokens,
                       bool high_effort);
  void take_roofline(const kernel_profile& prof);
  void keep_attempt();
  void keep_reflexion(const nlohmann::json& r);
  void write(const std::string& name, const std::string& text) const;

  caf::stateful_actor<candidate_state>* self_ = nullptr;
  context_ptr ctx_;
  caf::actor worker_;
  llm_api llm_;
  device_actor_type device_;
  candidate_spec spec_;
  candidate_result result_;
  std::string code_;
  int refinements_ = 0;
  int llm_calls_ = 0;
  std::vector<chat_message> conversation_;
  kernel_analysis baseline_;      ///< the parent's analysis (profile, bottlenecks, source)
  std::optional<bottleneck> primary_;  ///< the direction this candidate follows, if any
  nlohmann::json attempts_ = nlohmann::json::array();
  nlohmann::json reflexions_ = nlohmann::json::array();
  nlohmann::json failed_drafts_ = nlohmann::json::array();  ///< refinement history
  nlohmann::json attempt_;        ///< SPEC §2.7 attempt dict under construction
};

/// One in-flight candidate pipeline; sends its candidate_result to `worker` and quits.
caf::behavior candidate_actor(caf::stateful_actor<candidate_state>* self, context_ptr ctx, candidate_spec spec,
                              int device_id, caf::actor worker, device_actor_type device, llm_api llm);

} // namespace kagent
