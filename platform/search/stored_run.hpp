#pragma once
// What a run committed to program.db's run_state besides its programs, read back as values for
// --resume: the references' times, the earlier sessions, the committed plans, the diverged ids, the
// parents' analyses, the kept profiles and the devices' analysis modes. The manager resumes from this
// and never parses run_state text itself. A value that does not parse is left out (the run recomputes
// what it needs: an analysis or a profile is taken again), never fatal.
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

#include "platform/analysis/bottleneck.hpp"
#include "platform/common/measured.hpp"
#include "platform/profile_core/kernel_profile.hpp"
#include "platform/store/program_db.hpp"

namespace kagent::search {

struct stored_run {
  double eager_ms = not_measured;
  double compile_ms = not_measured;
  std::string references_cached_at;  ///< "" when the run timed its references itself
  int round_done = 0;      ///< the last round folded into the strategy
  nlohmann::json sessions = nlohmann::json::array();     ///< one object per earlier session
  std::map<std::string, nlohmann::json> plans;           ///< candidate id -> its plan (ledger::resume)
  std::set<std::string> diverged;
  std::map<std::string, kernel_analysis> analyses;       ///< parent id -> its analysis
  std::map<std::string, kernel_profile> profiles;        ///< program id -> its profile
  std::set<int> synthetic_devices;                       ///< devices whose session was synthetic
};

/// Reads every run_state key the manager writes (store::state_key).
stored_run load_stored_run(store::program_db& db);

/// The first run-unique id a node's device may take in this session (from 100): past every id an
/// earlier session of the run gave one (run_state `device_labels`), so that program.db keeps naming
/// the node of each earlier program's gpu_id.
int first_node_device_id(store::program_db& db);

} // namespace kagent::search
