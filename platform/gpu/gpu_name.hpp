#pragma once
// The run's gpu_name (SPEC §9.1, §9.4, §14 A.72, B.104): validated at startup against the specs
// database, and reconciled with the device the visibility rules actually selected.
#include <string>

#include "platform/gpu/selection.hpp"

namespace kagent {

/// The database key for a configured gpu_name: an exact key, or a name resolve_gpu_name() maps onto
/// one ("AMD Instinct MI300X OAM", "NVIDIA H100 80GB HBM3", "gfx942"). Unknown: user_error
/// "gpu_name '<x>' is not in the GPU specs database; known names: ...".
std::string validate_gpu_name(const std::string& configured);

struct gpu_name_choice {
  std::string name;   ///< specs key the run uses; "" only for a GPU-less platform with none configured
  std::string note;   ///< one line for the run log when the name was derived or overridden; else ""
};

/// The detected device wins over the YAML (the mask picks the device, the YAML name is static).
/// No device resolvable: the configured name (validated). Neither: user_error naming the device and
/// listing known names.
gpu_name_choice reconcile_gpu_name(const std::string& configured, const gpu_selection& sel);

}  // namespace kagent
