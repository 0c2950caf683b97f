#pragma once
// Per-platform defaults for the correctness-test timeout (SPEC §14 A.39-A.41, Appendix B).
#include <optional>
#include <string>

namespace kagent {

/// The configured value when set (must be > 0, else user_error); otherwise by platform: "rocm" 300 s
/// (first-call HIP/Triton JIT on ROCm is slow), "nvidia"/"cuda"/"xpu" 30 s, "cpu" 300 s (Triton's
/// interpreter emulates every program instance on the CPU in numpy, orders of magnitude slower than a
/// GPU), "noop"/"" 30 s. Unknown names: user_error.
double resolve_test_timeout_s(std::optional<double> configured, const std::string& vendor_or_platform);

}  // namespace kagent
