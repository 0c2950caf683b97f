#pragma once
// How many candidate pipelines to keep in flight when `num_workers: auto` (the default).
//
// A pipeline spends most of its life waiting for the LLM and a short while on a device. To keep
// every device fed, enough pipelines must be in their LLM phase that one reaches its device work
// whenever a device frees up: with L seconds of LLM per candidate and D device seconds per candidate,
// each device needs about (L + D) / D pipelines, plus one waiting for it (the backlog). More than that
// only plans candidates from an older beam, so the backlog is one per device, and the whole is capped.
#include <cstddef>
#include <deque>
#include <string>

namespace kagent::search {

inline constexpr int auto_pipeline_cap = 64;  ///< the most pipelines `auto` keeps in flight

struct concurrency_limits {
  int devices = 1;   ///< devices candidates run on
  int floor = 4;     ///< never fewer (the fixed default before `auto`)
  int cap = auto_pipeline_cap;  ///< never more (also bounded by llm.max_concurrency where that is set)
};

/// Pipelines needed for `devices` devices when a candidate spends `llm_s` waiting for the LLM and
/// `device_s` on a device (both medians, in seconds); clamped to [floor, cap]. Without a usable
/// measurement (device_s <= 0) the floor.
int pipelines_for(double llm_s, double device_s, const concurrency_limits& lim);

/// The rolling measurement behind `auto`: the last `window` finished candidates that reached a
/// device; `suggest()` is pipelines_for over the mean of the middle half of each (the median below
/// 7 samples; the floor until `min_samples` exist).
class concurrency_meter {
 public:
  explicit concurrency_meter(concurrency_limits lim, std::size_t window = 16, std::size_t min_samples = 2);
  /// Records one finished candidate; candidates that never reached a device (device_s <= 0) or got
  /// no LLM reply (llm_s < 0) are ignored.
  void record(double llm_s, double device_s);
  /// A first estimate from before any candidate has finished (the starting kernel's analysis reply
  /// and its evaluation): suggest() uses it until `min_samples` candidates are recorded. Without it
  /// `auto` keeps the floor until two candidates have gone through their whole pipeline, which with
  /// 20 s LLM replies is the first 40 s of the search; the first generation is planned from the
  /// starting kernel alone, so sizing it early plans nothing from a stale beam. Unusable values
  /// (device_s <= 0, llm_s < 0, not finite) are ignored.
  void prime(double llm_s, double device_s);
  bool primed() const { return primed_; }
  int suggest() const;
  /// What to run with now, given `current`: suggest() once it differs from `current` by at least
  /// max(2, current / 4), else `current` (medians of a few samples flicker; on the H200 a run
  /// alternated 4 and 5 every candidate without this).
  int next(int current) const;
  double llm_median() const;     ///< the middle half's mean (see suggest); 0 without samples
  double device_median() const;  ///< the middle half's mean (see suggest); 0 without samples
  std::size_t samples() const { return llm_.size(); }
  /// "auto: 12 (LLM 20.1 s, device 0.74 s per candidate, 1 device)": why the current value.
  std::string reason() const;

 private:
  concurrency_limits lim_;
  std::size_t window_, min_samples_;
  std::deque<double> llm_, device_;
  bool primed_ = false;
  double prime_llm_ = 0, prime_device_ = 0;
};

}  // namespace kagent::search
