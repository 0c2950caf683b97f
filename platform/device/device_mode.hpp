#pragma once
// What one device request does (the evaluate message and the device backend share it).
#include <cstdint>

namespace kagent {

enum class device_mode : uint8_t {
  verify,     ///< correctness, on several input sets
  benchmark,  ///< the candidate's timing (and the kernel directory's test.py under user_test)
  initial,    ///< the starting kernel: test.py unless user_test is never, verify, then the candidate's,
              ///< PyTorch eager's and (compile_reference) torch.compile's timings
};

/// "verify", "benchmark", "initial": the names of logs, files and messages.
inline const char* to_string(device_mode m) {
  switch (m) {
    case device_mode::verify: return "verify";
    case device_mode::benchmark: return "benchmark";
    case device_mode::initial: return "initial";
  }
  return "verify";
}

} // namespace kagent
