#include "platform/search/summary.hpp"
#include "platform/search/tune.hpp"

#include <algorithm>
#include <cmath>

namespace kagent::search {

namespace {

bool measured(double v) { return v >= 0 && std::isfinite(v); }
nlohmann::json num_or_null(double v) { return measured(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// Verified programs with a time, fastest first (ties: the earlier one), as program.db ranks them.
std::vector<const store::program_record*> ranked_verified(const std::vector<store::program_record>& programs) {
  std::vector<const store::program_record*> out;
  for (const auto& p : programs)
    if (p.status == store::program_status::verified && p.time_ms) out.push_back(&p);
  std::stable_sort(out.begin(), out.end(), [](const auto* a, const auto* b) {
    if (*a->time_ms != *b->time_ms) return *a->time_ms < *b->time_ms;
    return a->seq < b->seq;
  });
  return out;
}

void add(llm_tally& t, const store::llm_usage_row& u) {
  t.calls += u.calls;
  t.failed_calls += u.failed_calls;
  t.tokens_in += u.tokens_in;
  t.tokens_out += u.tokens_out;
  t.cost_usd += u.cost_usd;
}

} // namespace

std::optional<program_entry> answer_of(const std::vector<store::program_record>& programs,
                                       const std::optional<program_entry>& strategy_best) {
  const auto ranked = ranked_verified(programs);
  if (ranked.empty()) return strategy_best;
  const auto* p = ranked.front();
  return program_entry{p->id, p->parent_id.value_or(""), p->code, *p->time_ms, p->round, p->code_hash.value_or("")};
}

run_summary summarize(const run_identity& id, const summary_facts& f) {
  run_summary s;
  s.run = id;
  s.initial_ms = f.initial_ms;
  s.eager_ms = f.eager_ms;
  s.compile_ms = f.compile_ms;
  s.references_cached_at = f.references_cached_at;
  s.session_wall_s = f.session_wall_s;
  s.interrupted_by = f.interrupted_by;
  const bool interrupted = !f.interrupted_by.empty();

  // The answer is the fastest verified, measured kernel of the whole run, not whatever the strategy
  // happens to hold.
  const auto ranked = ranked_verified(f.programs);
  const std::optional<program_entry> best = answer_of(f.programs, f.strategy_best);
  const store::program_record* best_rec = ranked.empty() ? nullptr : ranked.front();

  bool ok = f.ok;
  std::string why = f.error;
  if (ok && !interrupted && f.programs.size() > 1) {
    // A search in which no candidate ever got an LLM reply found nothing: it failed, with the first
    // LLM error as the reason (a dead endpoint, an exhausted replay set, a spent budget).
    std::int64_t replies = 0;
    for (const auto& u : f.llm_usage) replies += u.calls - u.failed_calls;
    if (replies == 0) {
      ok = false;
      std::string first;
      for (const auto& p : f.programs)
        if (p.failure_cause.value_or("") == "llm" && p.error) {
          first = p.error->substr(0, 300);
          break;
        }
      why = "no candidate got an LLM reply" + (first.empty() ? std::string{} : "; the first error: " + first);
    }
  }
  s.success = !interrupted && ok && best && is_measured(best->time_ms);
  s.error = why;
  s.run_state = interrupted ? "interrupted" : s.success ? "finished" : "failed";
  if (s.success || (interrupted && best && is_measured(best->time_ms) && best->id != "initial")) {
    s.best = best;
    if (best_rec && best_rec->id == best->id && best_rec->floor_pct) s.best_floor_pct = *best_rec->floor_pct;
  }

  // Counts of candidates: the starting kernel is none of them, and a duplicate is not a failure.
  const store::program_record* initial = nullptr;
  std::int64_t verified = 0, failed = 0, pending = 0;
  for (const auto& p : f.programs) {
    if (p.id == "initial") initial = &p;
    if (p.status == store::program_status::verified) ++verified;
    if (p.status == store::program_status::pending) ++pending;
    if (p.status == store::program_status::failed) {
      ++failed;
      ++s.failures_by_cause[p.failure_cause.value_or("unknown")];
    }
  }
  auto initial_is = [&](const char* status) { return initial && initial->status == status ? 1 : 0; };
  s.duplicates = s.failures_by_cause.count("duplicate") ? s.failures_by_cause.at("duplicate") : 0;
  s.candidates = static_cast<std::int64_t>(f.programs.size()) - (initial ? 1 : 0);
  s.verified = verified - initial_is(store::program_status::verified);
  s.failed = failed - s.duplicates - initial_is(store::program_status::failed);
  s.pending = pending - initial_is(store::program_status::pending);
  s.diverged = f.diverged.size();
  for (const auto& p : f.programs) {
    const auto label = variant_label(p.bottleneck.value_or(""));
    if (!label) continue;
    ++s.variants;
    if (p.status == store::program_status::verified) ++s.variants_verified;
    if (s.best && s.best->id == p.id) s.best_tune = *label;
  }

  // Diverged kernels (verified, but too slow to be a parent) are not top kernels.
  for (const auto* p : ranked) {
    if (s.top_kernels.size() >= 5) break;
    if (f.diverged.count(p->id)) continue;
    top_kernel t{p->id, *p->time_ms, p->round, std::nullopt};
    if (auto sp = f.spreads.find(p->id); sp != f.spreads.end()) t.spread_pct = sp->second;
    s.top_kernels.push_back(t);
  }

  std::map<std::string, run_summary::llm_row> per_model;
  for (const auto& u : f.llm_usage) {
    add(s.llm, u);
    run_summary::llm_row row{u.purpose, u.model, "", {}};
    add(row.tally, u);
    s.llm_by_purpose_and_model.push_back(row);
    auto& m = per_model[u.model];
    if (m.model.empty()) {
      m.model = u.model;
      auto it = f.provider_of.find(u.model);
      m.provider = it != f.provider_of.end() ? it->second : f.default_provider;
    }
    add(m.tally, u);
  }
  for (auto& [name, m] : per_model) s.llm_by_model.push_back(m);

  s.totals = store::totals_of(f.sessions);
  s.gpu_busy_pct = store::busy_pct(s.totals.device_s, s.totals.capacity_s);
  return s;
}

nlohmann::json run_summary::to_json() const {
  nlohmann::json j;
  j["success"] = success;
  if (!error.empty()) j["error"] = error;
  j["run_state"] = run_state;
  if (!interrupted_by.empty()) {
    j["interrupted"] = true;
    j["interrupted_by"] = interrupted_by;
    j["resume_command"] = run.resume_command;
  }
  j["strategy"] = run.strategy;
  j["search"] = run.search;
  j["schedule"] = run.schedule;
  j["num_workers"] = run.num_workers;
  j["num_workers_mode"] = run.num_workers_mode;
  if (run.num_workers_mode == "auto") j["num_workers_reason"] = run.num_workers_reason;
  j["kernel_dir"] = run.kernel_dir;
  j["run_dir"] = run.run_dir;
  j["run_id"] = run.run_id;
  j["vendor"] = run.vendor;
  j["devices"] = run.devices;
  j["gpu_name"] = run.gpu_name;
  j["platform"] = run.platform;
  j["profiler_platform"] = run.profiler_platform;
  j["resumed"] = run.resumed;
  j["eager_ms"] = num_or_null(eager_ms);
  j["compile_ms"] = num_or_null(compile_ms);
  j["initial_ms"] = num_or_null(initial_ms);
  j["references_cached_at"] = references_cached_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(references_cached_at);
  if (best) {
    j["best_ms"] = best->time_ms;
    j["best_program_id"] = best->id;
    if (best_floor_pct) j["best_floor_pct"] = *best_floor_pct;
    if (!best_kernel_path.empty()) j["best_kernel_path"] = best_kernel_path;
    if (initial_ms > 0) j["speedup_vs_initial"] = initial_ms / best->time_ms;
    if (eager_ms > 0) j["speedup_vs_eager"] = eager_ms / best->time_ms;
    if (compile_ms > 0) j["speedup_vs_compile"] = compile_ms / best->time_ms;
  } else {
    j["best_ms"] = nullptr;
  }
  j["version"] = run.version;
  j["rounds"] = run.rounds;
  j["candidates"] = candidates;
  j["verified"] = verified;
  j["duplicates"] = duplicates;
  j["failed"] = failed;
  j["pending"] = pending;
  j["failures_by_cause"] = failures_by_cause;
  j["diverged"] = diverged;
  j["variants"] = {{"run", variants}, {"verified", variants_verified}};
  if (!best_tune.empty()) j["best_tune"] = best_tune;
  if (!early_stop_reason.empty()) j["early_stop_reason"] = early_stop_reason;
  j["synthetic_devices"] = synthetic_devices;
  j["profiling_failures"] = profiling_failures;
  if (!best_roofline.is_null()) j["best_roofline"] = best_roofline;
  j["mode_changes"] = mode_changes;
  nlohmann::json top = nlohmann::json::array();
  for (const auto& t : top_kernels) {
    nlohmann::json k{{"program_id", t.program_id}, {"time_ms", num_or_null(t.time_ms)}, {"generation", t.generation}};
    if (t.spread_pct) k["spread_pct"] = *t.spread_pct;
    top.push_back(k);
  }
  j["top_kernels"] = top;
  nlohmann::json by = nlohmann::json::array(), bm = nlohmann::json::array();
  for (const auto& r : llm_by_purpose_and_model)
    by.push_back({{"purpose", r.purpose}, {"model", r.model}, {"calls", r.tally.calls},
                  {"tokens_in", r.tally.tokens_in}, {"tokens_out", r.tally.tokens_out}, {"cost_usd", r.tally.cost_usd}});
  for (const auto& r : llm_by_model)
    bm.push_back({{"model", r.model}, {"provider", r.provider}, {"calls", r.tally.calls},
                  {"failed_calls", r.tally.failed_calls}, {"tokens_in", r.tally.tokens_in},
                  {"tokens_out", r.tally.tokens_out}, {"cost_usd", r.tally.cost_usd}});
  j["llm"] = {{"calls", llm.calls}, {"failed_calls", llm.failed_calls}, {"tokens_in", llm.tokens_in},
              {"tokens_out", llm.tokens_out}, {"cost_usd", llm.cost_usd}, {"by_purpose_and_model", by},
              {"by_model", bm}};
  j["wall_s"] = totals.wall_s;
  j["device_s"] = totals.device_s;
  j["user_test_s"] = totals.user_test_s;  // of device_s: the kernel directory's test.py runs
  j["sessions"] = totals.sessions;
  j["session_wall_s"] = session_wall_s;
  j["gpu_busy_pct"] = gpu_busy_pct ? nlohmann::json(*gpu_busy_pct) : nlohmann::json(nullptr);
  return j;
}

} // namespace kagent::search
