#pragma once
// Worker pinning (SPEC §10.6, §14 A.38, A.69, A.70): the environment a child gets so that it sees
// exactly one device. One code path with a per-vendor hook; the manager's own environment is never
// touched (the result is a modified copy).
#include <string>

#include "platform/common/env.hpp"

namespace kagent {

/// NVIDIA: CUDA_VISIBLE_DEVICES=<nvidia-smi index> (and CUDA_DEVICE_ORDER=PCI_BUS_ID, so the index
/// means what nvidia-smi meant by it). ROCm: removes CUDA_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES and
/// sets HIP_VISIBLE_DEVICES=<HIP id> (an empty CUDA mask would hide the AMD GPU too). Any other vendor
/// ("", "noop", "cpu"): `parent` unchanged. Throws std::invalid_argument for a negative id.
env_map pin_environment(const env_map& parent, const std::string& vendor, int device_id);

}  // namespace kagent
