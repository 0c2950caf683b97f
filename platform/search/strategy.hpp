#pragma once
// Search strategies (SPEC §2) as plain classes: the manager actor drives them, tests call them
// directly. They see verified, measured programs only; failures never enter a beam.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/common/measured.hpp"
#include "platform/config/config.hpp"

namespace kagent {

struct program_entry {
  std::string id;
  std::string parent_id;
  std::string code;
  double time_ms = not_measured;  ///< sorts last when not measured
  int generation = 0;
  std::string code_hash;    ///< compiled-code hash (PTX/AMDGCN) or normalised-source hash; "" = unknown
};

struct candidate_plan {
  program_entry parent;
  int bottleneck_id = 1;    ///< 1-based direction of the bottleneck analysis
  std::string model;
  int sample_idx = 0;
};

class search_strategy {
public:
  virtual ~search_strategy() = default;
  virtual std::string name() const = 0;
  virtual void initialize(const program_entry& initial) = 0;
  virtual std::vector<candidate_plan> select_candidates(int round) = 0;
  /// `results` are this round's verified, measured programs (in arrival order).
  virtual void update_with_results(const std::vector<program_entry>& results, int round) = 0;
  virtual std::optional<program_entry> best() const = 0;
  virtual bool should_terminate(int round, int max_rounds) const = 0;
  /// How many directions the bottleneck analysis must return (SPEC §14 B.83).
  virtual int directions_needed() const { return 1; }
  /// Resumable state (the beam / best and counters), as JSON of program ids plus counters.
  virtual nlohmann::json save_state() const = 0;
  virtual void load_state(const nlohmann::json& state, const std::vector<program_entry>& programs) = 0;
};

/// Builds the strategy named by cfg.strategy; `default_model` is used when strategy_config.models is empty.
std::unique_ptr<search_strategy> make_strategy(const run_config& cfg, const std::string& default_model);

/// Orders by time (measured before unmeasured), stable; keeps the fastest per code hash (SPEC §14 B.88).
std::vector<program_entry> rank_and_dedup(std::vector<program_entry> pool);

} // namespace kagent
