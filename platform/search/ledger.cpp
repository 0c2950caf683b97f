#include "platform/search/ledger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "platform/search/tune.hpp"
#include "platform/store/util.hpp"

namespace kagent::search {

namespace {

/// The number n of an id r<round>_c<n>; -1 when it has none.
int candidate_number(const std::string& id, const char* tag = "_c") {
  auto c = id.rfind(tag);
  if (c == std::string::npos) return -1;
  try {
    return std::stoi(id.substr(c + 2));
  } catch (...) {
    return -1;
  }
}

program_entry entry_of(const store::program_record& p) {
  return program_entry{p.id, p.parent_id.value_or(""), p.code, measured_or_not(p.time_ms), p.round,
                       p.code_hash.value_or("")};
}

} // namespace

nlohmann::json plan_to_json(const planned& p) {
  nlohmann::json j = {{"id", p.id},           {"parent_id", p.parent.id}, {"round", p.round},
                      {"bottleneck_id", p.direction}, {"sample_idx", p.sample},   {"model", p.model}};
  // The variant's constants: its source is the parent's with them set, so --resume rebuilds it.
  if (p.tuned()) j["tune"] = p.tune;
  return j;
}

ledger::ledger(std::unique_ptr<search_strategy> strategy, rules r)
    : strategy_(std::move(strategy)), rules_(r), greedy_(strategy_->name() == "greedy") {
  // Greedy has no beam to expand without a barrier: it always runs round by round.
  if (greedy_) rules_.async = false;
}

std::string ledger::combo(const std::string& parent, int direction, const std::string& model, int sample) {
  return fmt::format("{}|{}|{}|{}", parent, direction, model, sample);
}

void ledger::start(const program_entry& initial) {
  strategy_->initialize(initial);
  if (!initial.code_hash.empty()) verified_hash_.emplace(initial.code_hash, initial.id);
  tunable_ = {initial};
  seen_code_.insert(store::sha256_hex(initial.code));
}

std::optional<planned> ledger::plan_tune(size_t per_kernel, size_t top) {
  auto order = tunable_;
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.time_ms < b.time_ms; });
  if (order.size() > top) order.resize(top);
  for (const auto& k : order) {
    for (const auto& v : tune_variants(k.code, per_kernel)) {
      if (!tuned_.insert(k.id + "|" + v.label).second) continue;
      auto code = apply_tune(k.code, v.values);
      if (!code || !seen_code_.insert(store::sha256_hex(*code)).second) continue;
      planned p;
      // A variant is its parent's sibling more than its child: under rounds it joins the round that
      // runs now, under async it keeps its parent's generation (the first for the starting kernel's).
      p.round = rules_.async ? std::max(1, k.generation) : std::max(1, round_);
      p.id = fmt::format("r{}_t{}", p.round, next_tune_++);
      p.parent = k;
      p.direction = 0;
      p.tune = v.values;
      p.tune_label = v.label;
      p.code = std::move(*code);
      outstanding_[p.id] = p;
      return p;
    }
  }
  return std::nullopt;
}

planned ledger::take(const candidate_plan& plan, int round) {
  planned p;
  p.id = fmt::format("r{}_c{}", round, next_candidate_++);
  p.parent = plan.parent;
  p.round = round;
  p.direction = plan.bottleneck_id;
  p.model = plan.model;
  p.sample = plan.sample_idx;
  expanded_.insert(combo(p.parent.id, p.direction, p.model, p.sample));
  outstanding_[p.id] = p;
  return p;
}

std::vector<planned> ledger::plan_round(int r) {
  round_ = r;
  std::vector<planned> out;
  for (const auto& plan : strategy_->select_candidates(r)) out.push_back(take(plan, r));
  return out;
}

std::vector<planned> ledger::plan_more() {
  std::vector<planned> out;
  for (const auto& plan : strategy_->select_candidates(round_ + 1)) {
    if (plan.parent.generation >= rules_.max_rounds) continue;
    if (expanded_.count(combo(plan.parent.id, plan.bottleneck_id, plan.model, plan.sample_idx))) continue;
    out.push_back(take(plan, plan.parent.generation + 1));
  }
  return out;
}

std::string ledger::duplicate_of(const std::string& code_hash, const std::string& id) const {
  if (code_hash.empty()) return "";
  if (auto v = verified_hash_.find(code_hash); v != verified_hash_.end() && v->second != id) return v->second;
  if (auto c = claims_.find(code_hash); c != claims_.end() && c->second != id) return c->second;
  return "";
}

void ledger::claim(const std::string& code_hash, const std::string& id) {
  if (code_hash.empty() || !duplicate_of(code_hash, id).empty()) return;
  claims_.emplace(code_hash, id);
}

std::optional<program_entry> ledger::best() const {
  auto b = strategy_->best();
  for (const auto& r : round_results_)
    if (!b || r.time_ms < b->time_ms) b = r;
  if (best_variant_ && (!b || best_variant_->time_ms < b->time_ms)) b = best_variant_;
  return b;
}

bool ledger::feeds(const std::string& id, const std::string& status, bool duplicate, bool measured) const {
  // A launch-constant variant never enters the strategy: the LLM's search (its beam, its parents, its
  // calls) is the one it would be without variants. On the H100 (async, 20 s replies) variants in the
  // beam made 36 LLM candidates of 6, each new parent with its own profile. A variant can still be the
  // run's best (best() and the answer look at every verified kernel), and it is swept further.
  if (is_variant_id(id)) return false;
  // What the strategy sees: every verified, measured kernel (for beam search none past divergence),
  // and for greedy a measured duplicate too (a round without improvement, SPEC §2.4): beam search
  // would let a luckier timing of the same code displace the verified original.
  if (id == "initial" || !measured) return false;
  if (status == store::program_status::verified) return greedy_ || !diverged_.count(id);
  return greedy_ && status == store::program_status::failed && duplicate;
}

judgement ledger::record(const finished& f) {
  auto it = outstanding_.find(f.id);
  if (it == outstanding_.end())
    throw std::logic_error("search ledger: candidate '" + f.id + "' was not planned or is already recorded");
  const planned p = it->second;
  outstanding_.erase(it);
  if (!f.code.empty()) seen_code_.insert(store::sha256_hex(f.code));

  judgement j;
  j.ok = f.ok;
  j.failure_cause = f.failure_cause;
  j.error = f.error;
  if (j.ok) {
    if (auto dup = duplicate_of(f.code_hash, f.id); !dup.empty()) {
      j.ok = false;
      j.failure_cause = failure_kind::duplicate;
      j.error = "same compiled code as " + dup;
    }
  }
  std::erase_if(claims_, [&](const auto& c) { return c.second == f.id; });
  j.code_hash = f.code_hash.empty() ? store::sha256_hex(f.code) : f.code_hash;

  // "New best" is decided before anything moves (SPEC §14 B.81).
  const auto before = best();
  j.new_best = j.ok && (!before || !is_measured(before->time_ms) || f.time_ms < before->time_ms);
  j.best_ms = j.new_best ? f.time_ms : before ? before->time_ms : not_measured;
  if (j.ok) {
    verified_hash_.emplace(j.code_hash, f.id);
    const double parent_ms = p.parent.time_ms;
    if (parent_ms > 0 && (f.time_ms - parent_ms) / parent_ms * 100.0 > rules_.divergence_threshold) {
      j.diverged = true;
      diverged_.insert(f.id);
    } else {
      tunable_.push_back({f.id, p.parent.id, f.code, f.time_ms, p.round, j.code_hash});
    }
    if (p.tuned() && (!best_variant_ || f.time_ms < best_variant_->time_ms))
      best_variant_ = program_entry{f.id, p.parent.id, f.code, f.time_ms, p.round, j.code_hash};
  } else if (!j.failure_cause) {
    j.failure_cause = failure_kind::unknown;
  }

  const bool measured = j.ok || (j.failure_cause == failure_kind::duplicate && is_measured(f.time_ms));
  const std::string status = j.ok ? store::program_status::verified : store::program_status::failed;
  j.fed = feeds(f.id, status, j.failure_cause == failure_kind::duplicate, measured);
  const program_entry e{f.id, p.parent.id, f.code, f.time_ms, p.round, j.code_hash};
  if (rules_.async) {
    if (j.fed) strategy_->update_with_results({e}, p.round);
    round_ = std::max(round_, p.round);
  } else if (j.fed) {
    round_results_.push_back(e);
  }
  return j;
}

ledger::round_close ledger::end_round() {
  strategy_->update_with_results(round_results_, round_);
  round_results_.clear();
  return {best(), should_terminate()};
}

resume_plan ledger::resume(const std::vector<store::program_record>& programs,
                           const std::map<std::string, nlohmann::json>& plans, int round_done,
                           const std::set<std::string>& diverged, const std::string& default_model) {
  resume_plan out;
  out.round_done = round_done;
  diverged_ = diverged;
  std::map<std::string, program_entry> by_id;
  for (const auto& p : programs) by_id[p.id] = entry_of(p);
  if (!by_id.count("initial")) throw std::runtime_error("resume: program.db has no starting kernel");
  strategy_->initialize(by_id["initial"]);
  tunable_ = {by_id["initial"]};
  for (const auto& p : programs)
    if (!p.code.empty()) seen_code_.insert(store::sha256_hex(p.code));

  int max_round = 0;
  std::vector<const store::program_record*> pending;
  for (const auto& p : programs) {
    if (p.status == store::program_status::verified && p.code_hash) verified_hash_.emplace(*p.code_hash, p.id);
    if (p.id == "initial") continue;
    next_candidate_ = std::max(next_candidate_, candidate_number(p.id) + 1);
    next_tune_ = std::max(next_tune_, candidate_number(p.id, "_t") + 1);
    max_round = std::max(max_round, p.round);
    if (auto s = plans.find(p.id); s != plans.end()) {
      if (s->second.contains("tune")) {
        const std::string parent = s->second.value("parent_id", "");
        if (by_id.count(parent))
          tuned_.insert(parent + "|" + tune_label(by_id[parent].code, s->second["tune"].get<std::map<std::string, int>>()));
      } else {
        expanded_.insert(combo(s->second.value("parent_id", ""), s->second.value("bottleneck_id", 1),
                               s->second.value("model", ""), s->second.value("sample_idx", 0)));
      }
    }
    if (p.status == store::program_status::verified && !diverged_.count(p.id) && is_measured(measured_or_not(p.time_ms)))
      tunable_.push_back(entry_of(p));
    if (p.status == store::program_status::verified && is_variant_id(p.id) &&
        is_measured(measured_or_not(p.time_ms)) && (!best_variant_ || *p.time_ms < best_variant_->time_ms))
      best_variant_ = entry_of(p);
    if (p.status == store::program_status::pending) pending.push_back(&p);
  }

  // Replay the strategy from the committed results: round by round, or in arrival order for async.
  // That gives exactly the state an uninterrupted run had at this point.
  auto fed = [&](const store::program_record& p) {
    const bool duplicate = parse_failure_kind(p.failure_cause.value_or("")) == failure_kind::duplicate;
    return feeds(p.id, p.status, duplicate, p.time_ms.has_value());
  };
  if (rules_.async) {
    for (const auto& p : programs)
      if (fed(p)) strategy_->update_with_results({entry_of(p)}, p.round);
    round_ = max_round;
  } else {
    for (int r = 1; r <= round_done; ++r) {
      std::vector<program_entry> rs;
      for (const auto& p : programs)
        if (p.round == r && fed(p)) rs.push_back(entry_of(p));
      strategy_->update_with_results(rs, r);
    }
    round_ = std::max(round_done, max_round);
    for (const auto& p : programs)
      if (p.round == round_ && round_ > round_done && fed(p)) round_results_.push_back(entry_of(p));
  }

  // The pending candidates again, with their original ids and plans: none lost, none run twice.
  out.pending = static_cast<int>(pending.size());
  for (const auto* p : pending) {
    auto s = plans.find(p->id);
    if (s == plans.end()) continue;
    const auto& j = s->second;
    planned q;
    q.id = p->id;
    const std::string parent = j.value("parent_id", "initial");
    q.parent = by_id.count(parent) ? by_id[parent] : by_id["initial"];
    q.round = j.value("round", p->round);
    q.direction = j.value("bottleneck_id", 1);
    q.sample = j.value("sample_idx", 0);
    q.model = j.value("model", default_model);
    if (j.contains("tune")) {
      q.tune = j["tune"].get<std::map<std::string, int>>();
      q.tune_label = tune_label(q.parent.code, q.tune);
      auto code = apply_tune(q.parent.code, q.tune);
      if (!code) continue;  // cannot happen for a plan made from this parent's code
      q.code = std::move(*code);
      seen_code_.insert(store::sha256_hex(q.code));
    }
    outstanding_[q.id] = q;
    out.requeued.push_back(q);
  }
  if (!rules_.async && round_ > round_done && round_done >= 1) {
    // A kill while the round was being planned leaves only part of it in program.db: the strategy,
    // replayed to the state it had then, plans the same round again; what is missing is added,
    // under the ids of pending rows whose plan was never committed (they were the last ones).
    const int after = next_candidate_;
    int first_orphan = after;
    for (const auto* p : pending)
      if (!plans.count(p->id) && candidate_number(p->id) >= 0) first_orphan = std::min(first_orphan, candidate_number(p->id));
    next_candidate_ = first_orphan;
    // What this round committed, not what any round did: greedy expands the same best along the same
    // direction again when the round before brought no improvement.
    std::set<std::string> this_round;
    for (const auto& [id, j] : plans)
      if (j.value("round", 0) == round_)
        this_round.insert(combo(j.value("parent_id", ""), j.value("bottleneck_id", 1), j.value("model", ""),
                                j.value("sample_idx", 0)));
    for (const auto& plan : strategy_->select_candidates(round_))
      if (!this_round.count(combo(plan.parent.id, plan.bottleneck_id, plan.model, plan.sample_idx)))
        out.replanned.push_back(take(plan, round_));
    next_candidate_ = std::max(next_candidate_, after);
  }

  if (rules_.async) {
    out.next = resume_step::refill;
  } else if (!out.requeued.empty() || !out.replanned.empty()) {
    out.next = resume_step::dispatch;
  } else if (round_ > round_done) {
    // The round was planned: if every candidate of it had finished, close it; else plan it again.
    const bool any = std::any_of(programs.begin(), programs.end(), [&](const auto& p) { return p.round == round_; });
    out.next = any ? resume_step::end_round : resume_step::start_round;
    out.start_round = round_;
  } else if (round_done == 0) {
    out.next = resume_step::start_round;
    out.start_round = 1;
  } else if (strategy_->should_terminate(round_done, rules_.max_rounds)) {
    out.next = resume_step::finish;
  } else {
    out.next = resume_step::start_round;
    out.start_round = round_done + 1;
  }
  return out;
}

} // namespace kagent::search
