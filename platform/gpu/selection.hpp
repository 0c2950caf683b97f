#pragma once
// Which GPUs a run uses (SPEC §10.2, §14 A.54-A.70). select_gpus is a pure function of the request,
// the environment and the two listings; the listings are passed lazily so that the common NVIDIA
// case never runs amd-smi (rule 5). detect_gpus wires it to the real tools.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "platform/common/env.hpp"
#include "platform/config/config.hpp"
#include "platform/gpu/listing.hpp"

namespace kagent {

// The error texts of §10.2, kept verbatim: users and scripts match on them.
inline constexpr const char* err_rocm_none_visible = "ROCm platform was requested but no devices are visible";
inline constexpr const char* err_nvidia_got_rocm = "NVIDIA platform was requested but ROCm devices were selected";
inline constexpr const char* err_rocm_got_nvidia = "ROCm platform was requested but NVIDIA devices were selected";
inline constexpr const char* err_no_gpu = "no GPU visible";
/// Prefix of the rule-2 conflict error; the full text names the variables and their values.
inline constexpr const char* err_mask_conflict = "conflicting GPU visibility masks";

struct selection_request {
  platform_spec platform;     ///< `given` false: no platform requested (detection decides)
  std::vector<int> gpu_ids;   ///< non-empty: explicit ids, detection is skipped (§14 A.68)
};

struct gpu_selection {
  std::string vendor;              ///< "nvidia", "rocm", or "" when the platform needs no GPU (noop, cpu)
  std::vector<int> ids;            ///< nvidia-smi indexes or HIP ids, in the order workers use them
  gpu_listing devices;             ///< one per id when detected; explicit ids carry only the id
  std::string reason;              ///< which mask or rule decided, for logs and `kagent-actors gpus`
  bool detected = false;           ///< false: explicit gpu_ids or a GPU-less platform
};

/// A listing computed on first use, at most once.
using lazy_listing = std::function<gpu_listing()>;

/// "nvidia", "rocm", or "" (no platform named, or a GPU-less one). Only a platform the user gave
/// counts: target_platform is never a signal (§10.1).
std::string requested_vendor(const platform_spec& p);

/// True for a given platform whose device-side components need no GPU (noop, cpu).
bool platform_needs_no_gpu(const platform_spec& p);

/// Rule 2, checked before anything else: throws user_error when a non-empty CUDA_VISIBLE_DEVICES is
/// combined with a non-empty HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES.
void check_mask_conflict(const env_map& env);

/// Rule 4: the AMD devices left visible by ROCR_VISIBLE_DEVICES (selects by HIP-id value) and then
/// HIP_VISIBLE_DEVICES (indexes by position into that result). An empty mask, an unparsable or an
/// unmatched entry selects nothing. `detected` is amd-smi's listing in print order.
gpu_listing visible_hip_devices(const gpu_listing& detected, const std::optional<std::string>& rocr,
                                const std::optional<std::string>& hip);
std::vector<int> visible_hip_ids(const std::vector<int>& detected, const std::optional<std::string>& rocr,
                                 const std::optional<std::string>& hip);

/// The NVIDIA devices CUDA_VISIBLE_DEVICES leaves, by nvidia-smi index or GPU-UUID (prefix), in mask
/// order. Unset: all. Empty: none. Never invents a device nvidia-smi does not list (rule 10).
gpu_listing visible_cuda_devices(const gpu_listing& detected, const std::optional<std::string>& cuda);

/// Every rule of §10.2. Throws user_error with the verbatim texts above.
gpu_selection select_gpus(const selection_request& req, const env_map& env, const lazy_listing& nvidia,
                          const lazy_listing& amd);
/// Same, over listings already in hand.
gpu_selection select_gpus(const selection_request& req, const env_map& env, const gpu_listing& nvidia,
                          const gpu_listing& amd);

/// Lists with the real tools (lazily) and selects. The manager's and `kagent-actors gpus`' entry point.
/// Selection errors: user_error; a tool that hangs, crashes or fails: run_error.
gpu_selection detect_gpus(const selection_request& req, const env_map& env, const tool_locations& where);

/// The platform the run uses: the detected vendor replaces `p` only when no platform was given
/// (rule 11). A given string, a map, noop and cpu are returned unchanged.
platform_spec apply_detected_vendor(const platform_spec& p, const gpu_selection& sel);

/// On a GPU-less platform each device is an evaluator process that needs a core of its own: with
/// more devices than `cores`, their timings bend (and the search follows its timings). The note that
/// says so, or "" when every device has a core (`cores` 0: unknown, no note).
std::string cpu_device_note(size_t devices, unsigned cores);

}  // namespace kagent
