#include "platform/search/strategy.hpp"

#include <algorithm>
#include <set>

namespace kagent {

namespace {

bool measured(const program_entry& p) { return is_measured(p.time_ms); }

bool faster(const program_entry& a, const program_entry& b) {
  if (measured(a) != measured(b)) return measured(a);
  return measured(a) && a.time_ms < b.time_ms;
}

std::string identity(const program_entry& p) {
  // Without a compiled-code hash, byte-identical code is still a duplicate (SPEC §2.3 [I]).
  return p.code_hash.empty() ? "code:" + p.code : "hash:" + p.code_hash;
}

program_entry find_program(const std::vector<program_entry>& programs, const std::string& id) {
  for (const auto& p : programs)
    if (p.id == id) return p;
  throw std::runtime_error("resume: program '" + id + "' named in the saved search state is not in program.db");
}

class beam_search final : public search_strategy {
public:
  beam_search(const strategy_config& sc, std::vector<std::string> models)
      : beam_width_(sc.num_top_kernels), directions_(sc.num_bottlenecks),
        parents_expanded_(sc.num_expanding_parents > 0 ? std::min(sc.num_expanding_parents, sc.num_top_kernels)
                                                       : sc.num_top_kernels),
        samples_per_prompt_(sc.samples_per_prompt), models_(std::move(models)) {}

  std::string name() const override { return "beam_search"; }
  int directions_needed() const override { return directions_; }

  void initialize(const program_entry& initial) override {
    // One copy of the initial kernel, not N: each distinct parent is expanded once (SPEC §14 B.110).
    beam_ = {initial};
  }

  std::vector<candidate_plan> select_candidates(int) override {
    std::vector<candidate_plan> out;
    const size_t parents = std::min<size_t>(beam_.size(), static_cast<size_t>(parents_expanded_));
    for (size_t i = 0; i < parents; ++i)
      for (int b = 1; b <= directions_; ++b)
        for (const auto& model : models_)
          for (int s = 0; s < samples_per_prompt_; ++s) out.push_back({beam_[i], b, model, s});
    return out;
  }

  void update_with_results(const std::vector<program_entry>& results, int) override {
    std::vector<program_entry> pool = beam_;
    pool.insert(pool.end(), results.begin(), results.end());
    pool = rank_and_dedup(std::move(pool));
    if (pool.size() > static_cast<size_t>(beam_width_)) pool.resize(static_cast<size_t>(beam_width_));
    beam_ = std::move(pool);
  }

  std::optional<program_entry> best() const override {
    if (beam_.empty()) return std::nullopt;
    return *std::min_element(beam_.begin(), beam_.end(), faster);
  }

  bool should_terminate(int round, int max_rounds) const override { return round >= max_rounds; }

  nlohmann::json save_state() const override {
    nlohmann::json ids = nlohmann::json::array();
    for (const auto& p : beam_) ids.push_back(p.id);
    return {{"beam", ids}};
  }

  void load_state(const nlohmann::json& st, const std::vector<program_entry>& programs) override {
    beam_.clear();
    for (const auto& id : st.at("beam")) beam_.push_back(find_program(programs, id.get<std::string>()));
  }

private:
  int beam_width_;          ///< num_top_kernels: kernels kept in the beam
  int directions_;          ///< num_bottlenecks: directions tried per parent
  int parents_expanded_;    ///< num_expanding_parents: beam kernels expanded each round
  int samples_per_prompt_;  ///< replies asked for per (parent, direction, model)
  std::vector<std::string> models_;
  std::vector<program_entry> beam_;
};

class greedy final : public search_strategy {
public:
  greedy(const strategy_config& sc, std::string model) : max_no_improvement_(sc.max_no_improvement), model_(std::move(model)) {}

  std::string name() const override { return "greedy"; }

  void initialize(const program_entry& initial) override {
    best_ = initial;
    seen_.insert(identity(initial));
  }

  std::vector<candidate_plan> select_candidates(int) override { return {{best_, 1, model_, 0}}; }

  void update_with_results(const std::vector<program_entry>& results, int) override {
    if (results.empty()) return;  // a failed round does not touch the counter (SPEC §2.4)
    bool improved = false;
    for (const auto& r : results) {
      bool duplicate = !seen_.insert(identity(r)).second;
      if (!duplicate && faster(r, best_)) {
        best_ = r;
        improved = true;
      }
    }
    no_improvement_ = improved ? 0 : no_improvement_ + 1;
  }

  std::optional<program_entry> best() const override { return best_; }

  bool should_terminate(int round, int max_rounds) const override {
    return no_improvement_ >= max_no_improvement_ || round >= max_rounds;
  }

  nlohmann::json save_state() const override {
    return {{"best", best_.id}, {"no_improvement", no_improvement_}};
  }

  void load_state(const nlohmann::json& st, const std::vector<program_entry>& programs) override {
    best_ = find_program(programs, st.at("best").get<std::string>());
    no_improvement_ = st.at("no_improvement").get<int>();
    for (const auto& p : programs) seen_.insert(identity(p));
  }

private:
  int max_no_improvement_;
  std::string model_;
  program_entry best_;
  int no_improvement_ = 0;
  std::set<std::string> seen_;
};

} // namespace

std::vector<program_entry> rank_and_dedup(std::vector<program_entry> pool) {
  std::stable_sort(pool.begin(), pool.end(), faster);
  std::vector<program_entry> out;
  std::set<std::string> seen;
  for (auto& p : pool)
    if (seen.insert(identity(p)).second) out.push_back(std::move(p));
  return out;
}

std::unique_ptr<search_strategy> make_strategy(const run_config& cfg, const std::string& default_model) {
  std::vector<std::string> models = cfg.strategy_cfg.models;
  if (models.empty()) models.push_back(default_model);
  if (cfg.strategy == "greedy") return std::make_unique<greedy>(cfg.strategy_cfg, models.front());
  return std::make_unique<beam_search>(cfg.strategy_cfg, models);
}

} // namespace kagent
