#include "platform/search/concurrency.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace kagent::search {

namespace {
double median_of_sorted(const std::vector<double>& v) {
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The mean of the middle half (the median below 7 samples, where the middle half is one or two).
/// A median of candidates that fall into two clusters (those that failed early against those that
/// were timed) jumps from one cluster to the other when one sample crosses: on an H100 (20 s
/// replies) `auto` went 41, 57, 41, 57 within 6 s. The middle half's mean moves by a fraction of the
/// gap per sample, and an outlier still moves it by at most one sample's share of the middle.
double center(const std::deque<double>& xs) {
  if (xs.empty()) return 0;
  std::vector<double> v(xs.begin(), xs.end());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  const std::size_t lo = (n + 3) / 4, hi = n - lo;
  if (hi <= lo + 2) return median_of_sorted(v);
  double sum = 0;
  for (std::size_t i = lo; i < hi; ++i) sum += v[i];
  return sum / static_cast<double>(hi - lo);
}
}  // namespace

int pipelines_for(double llm_s, double device_s, const concurrency_limits& lim) {
  const int devices = std::max(1, lim.devices);
  const int lo = std::max(1, lim.floor);
  const int hi = std::max(lo, lim.cap);
  if (!(device_s > 0) || !std::isfinite(device_s) || !std::isfinite(llm_s)) return lo;
  const double per_device = (std::max(0.0, llm_s) + device_s) / device_s;
  const double want = std::ceil(devices * per_device) + devices;  // + one waiting per device
  if (want >= hi) return hi;
  return std::clamp(static_cast<int>(want), lo, hi);
}

concurrency_meter::concurrency_meter(concurrency_limits lim, std::size_t window, std::size_t min_samples)
    : lim_(lim), window_(std::max<std::size_t>(1, window)), min_samples_(std::max<std::size_t>(1, min_samples)) {}

void concurrency_meter::record(double llm_s, double device_s) {
  if (!(device_s > 0) || !(llm_s >= 0) || !std::isfinite(llm_s) || !std::isfinite(device_s)) return;
  llm_.push_back(llm_s);
  device_.push_back(device_s);
  while (llm_.size() > window_) {
    llm_.pop_front();
    device_.pop_front();
  }
}

void concurrency_meter::prime(double llm_s, double device_s) {
  if (!(device_s > 0) || !(llm_s >= 0) || !std::isfinite(llm_s) || !std::isfinite(device_s)) return;
  primed_ = true;
  prime_llm_ = llm_s;
  prime_device_ = device_s;
}

double concurrency_meter::llm_median() const { return center(llm_); }
double concurrency_meter::device_median() const { return center(device_); }

int concurrency_meter::suggest() const {
  if (llm_.size() < min_samples_)
    return primed_ ? pipelines_for(prime_llm_, prime_device_, lim_) : std::max(1, lim_.floor);
  return pipelines_for(llm_median(), device_median(), lim_);
}

int concurrency_meter::next(int current) const {
  const int n = suggest();
  const int step = std::max(2, current / 4);
  return std::abs(n - current) >= step ? n : current;
}

std::string concurrency_meter::reason() const {
  const int n = suggest();
  const int d = std::max(1, lim_.devices);
  if (llm_.size() < min_samples_ && primed_)
    return fmt::format("auto: {} (first estimate from the starting kernel: LLM {:.1f} s, device {:.2f} s per "
                       "candidate, {} device{})",
                       n, prime_llm_, prime_device_, d, d == 1 ? "" : "s");
  if (llm_.size() < min_samples_)
    return fmt::format("auto: {} (not yet measured; {} device{})", n, d, d == 1 ? "" : "s");
  return fmt::format("auto: {} (LLM {:.1f} s, device {:.2f} s per candidate, {} device{})", n, llm_median(),
                     device_median(), d, d == 1 ? "" : "s");
}

}  // namespace kagent::search
