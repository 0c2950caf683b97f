#pragma once
// parent_analysis: one profile and one bottleneck analysis per distinct parent, for the manager's
// baseline cache (SPEC §1.2 step 7.2, §7), a short-lived stateful actor. Every candidate expanding
// the parent shares the result, and the analyzer is asked for as many directions as the strategy
// fans out (SPEC §14 B.83), so sibling candidates follow distinct directions.
#include <caf/all.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "actors/context.hpp"
#include "actors/llm_client.hpp"
#include "messages/messages.hpp"

namespace kagent {

class analysis_state {
public:
  static inline const char* name = "parent_analysis";

  caf::behavior start(caf::stateful_actor<analysis_state>* self, context_ptr ctx, caf::actor worker, llm_api llm);

private:
  caf::result<parent_analysis> analyze(const analyze_parent& a);
  void on_profile(const profile_result& pr);
  void ask_llm(std::vector<bottleneck> lead);
  void on_reply(std::vector<bottleneck> lead, const completion& r);
  void synthetic(const std::string& reason);
  void reply(std::vector<bottleneck> bottlenecks, const std::string& source);
  void write(const std::string& name, const std::string& text) const;

  caf::stateful_actor<analysis_state>* self_ = nullptr;
  context_ptr ctx_;
  caf::actor worker_;
  llm_api llm_;
  analyze_parent req_;
  parent_analysis out_;
  std::optional<kernel_profile> profile_;  ///< what the directions are asked from
  std::string profile_platform_;
  caf::response_promise rp_;
  caf::actor requester_;  ///< told (asking_atom) when the device part is over; once
};

/// Profiles a parent (through `worker`), asks the LLM for its bottleneck directions (or builds the
/// synthetic one), replies analyze_parent -> parent_analysis and quits. The requester is told
/// (asking_atom, parent id) when the device part is over and the LLM is asked.
caf::behavior parent_analysis_actor(caf::stateful_actor<analysis_state>* self, context_ptr ctx, caf::actor worker,
                                    llm_api llm);

} // namespace kagent
