#pragma once
// What one device request does (the evaluate message and the device backend share it).
#include <cstdint>

namespace kagent {

enum class device_mode : uint8_t {
  verify,     ///< correctness, on several input sets
  benchmark,  ///< the candidate's timing (and the kernel directory's test.py under user_test)
  initial,    ///< the starting kernel: verify, then its timing (what its analysis and the search need)
  start_checks,  ///< the starting kernel's other checks, run while the first LLM replies are written:
                 ///< test.py unless user_test is never, then PyTorch eager's and (compile_reference)
                 ///< torch.compile's timings
  warm,       ///< no kernel: start the device's evaluator and load problem.py, so that its first
              ///< candidate does not wait for them (sent once, when the device joins a run)
  verify_benchmark,  ///< a candidate's verify, then (when it passes) its benchmark, as one device step:
                     ///< no other request runs between them (the device actor runs both), so the
                     ///< verified candidate process is the one timed
};

/// "verify", "benchmark", "initial", "start_checks", "warm", "verify_benchmark": the names of logs,
/// files and messages.
inline const char* to_string(device_mode m) {
  switch (m) {
    case device_mode::verify: return "verify";
    case device_mode::benchmark: return "benchmark";
    case device_mode::initial: return "initial";
    case device_mode::start_checks: return "start_checks";
    case device_mode::warm: return "warm";
    case device_mode::verify_benchmark: return "verify_benchmark";
  }
  return "verify";
}

/// A device's analysis mode. It starts profiled; on ROCm a failed profile turns it synthetic for the
/// rest of the run (no profiler runs on it again; analyses are synthetic diagnoses).
enum class analysis_mode : uint8_t { profiled, synthetic };

/// "profiled", "synthetic": program.db's analysis_mode column and the run's device_modes state.
inline const char* to_string(analysis_mode m) { return m == analysis_mode::synthetic ? "synthetic" : "profiled"; }

} // namespace kagent
