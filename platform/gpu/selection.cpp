#include "platform/gpu/selection.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "platform/common/errors.hpp"
#include "platform/common/text.hpp"

namespace kagent {
namespace {

constexpr const char* cuda_var = "CUDA_VISIBLE_DEVICES";
constexpr const char* hip_var = "HIP_VISIBLE_DEVICES";
constexpr const char* rocr_var = "ROCR_VISIBLE_DEVICES";

std::vector<std::string> split_mask(const std::string& mask) {
  std::vector<std::string> out;
  std::stringstream ss(mask);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(trim(item));
  return out;
}

/// A mask entry as a non-negative integer, else nullopt ("GPU-…", "x", "-1" select nothing).
std::optional<int> mask_int(const std::string& entry) {
  if (entry.empty() || entry.size() > 9) return std::nullopt;
  for (char c : entry)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::stoi(entry);
}

bool nonempty(const std::optional<std::string>& v) { return v && !v->empty(); }
bool empty_set(const std::optional<std::string>& v) { return v && v->empty(); }

std::string describe_mask(const char* var, const std::optional<std::string>& v) {
  if (!v) return fmt::format("{} unset", var);
  return fmt::format("{}='{}'", var, *v);
}

std::vector<int> ids_of(const gpu_listing& l) {
  std::vector<int> ids;
  for (const auto& d : l) ids.push_back(d.id);
  return ids;
}

gpu_selection chosen(std::string vendor, gpu_listing devices, std::string reason) {
  gpu_selection s;
  s.vendor = std::move(vendor);
  s.ids = ids_of(devices);
  s.devices = std::move(devices);
  s.reason = std::move(reason);
  s.detected = true;
  return s;
}

/// Memoises a lazy listing so a rule can ask twice without running the tool twice.
class once {
public:
  explicit once(const lazy_listing& f) : f_(f) {}
  const gpu_listing& get() {
    if (!value_) value_ = f_ ? f_() : gpu_listing{};
    return *value_;
  }

private:
  const lazy_listing& f_;
  std::optional<gpu_listing> value_;
};

}  // namespace

std::string requested_vendor(const platform_spec& p) { return p.given ? p.vendor() : ""; }

bool platform_needs_no_gpu(const platform_spec& p) { return p.given && p.vendor().empty(); }

void check_mask_conflict(const env_map& env) {
  const auto cuda = env_get(env, cuda_var);
  const auto hip = env_get(env, hip_var);
  const auto rocr = env_get(env, rocr_var);
  if (!nonempty(cuda) || !(nonempty(hip) || nonempty(rocr))) return;
  std::string amd;
  if (nonempty(hip)) amd += fmt::format("{}={}", hip_var, *hip);
  if (nonempty(rocr)) amd += fmt::format("{}{}={}", amd.empty() ? "" : " and ", rocr_var, *rocr);
  throw user_error(fmt::format(
      "{}: {}={} and {} are both set, but a run uses one vendor; unset {} for an AMD run, or {} and {} for an "
      "NVIDIA run",
      err_mask_conflict, cuda_var, *cuda, amd, cuda_var, hip_var, rocr_var));
}

gpu_listing visible_hip_devices(const gpu_listing& detected, const std::optional<std::string>& rocr,
                                const std::optional<std::string>& hip) {
  gpu_listing current = detected;
  if (rocr) {
    // ROCR_VISIBLE_DEVICES names HIP-id values (not HSA_IDs, not positions), in mask order.
    gpu_listing picked;
    for (const auto& entry : split_mask(*rocr)) {
      auto v = mask_int(entry);
      if (!v) continue;
      auto it = std::find_if(current.begin(), current.end(), [&](const gpu_device& d) { return d.id == *v; });
      bool dup = std::any_of(picked.begin(), picked.end(), [&](const gpu_device& d) { return d.id == *v; });
      if (it != current.end() && !dup) picked.push_back(*it);
    }
    current = std::move(picked);
  }
  if (hip) {
    // HIP_VISIBLE_DEVICES indexes by position into what ROCR left (the runtimes stack).
    gpu_listing picked;
    for (const auto& entry : split_mask(*hip)) {
      auto pos = mask_int(entry);
      if (!pos || *pos >= static_cast<int>(current.size())) continue;
      const auto& d = current[static_cast<size_t>(*pos)];
      bool dup = std::any_of(picked.begin(), picked.end(), [&](const gpu_device& x) { return x.id == d.id; });
      if (!dup) picked.push_back(d);
    }
    current = std::move(picked);
  }
  return current;
}

std::vector<int> visible_hip_ids(const std::vector<int>& detected, const std::optional<std::string>& rocr,
                                 const std::optional<std::string>& hip) {
  gpu_listing l;
  for (int id : detected) {
    gpu_device d;
    d.id = id;
    l.push_back(d);
  }
  return ids_of(visible_hip_devices(l, rocr, hip));
}

gpu_listing visible_cuda_devices(const gpu_listing& detected, const std::optional<std::string>& cuda) {
  if (!cuda) return detected;
  gpu_listing picked;
  for (const auto& entry : split_mask(*cuda)) {
    if (entry.empty()) continue;
    auto v = mask_int(entry);
    auto it = std::find_if(detected.begin(), detected.end(), [&](const gpu_device& d) {
      if (v) return d.id == *v;
      // CUDA accepts GPU-UUIDs and unique prefixes of them.
      return entry.rfind("GPU-", 0) == 0 && !d.uuid.empty() && d.uuid.rfind(entry, 0) == 0;
    });
    if (it == detected.end()) continue;
    bool dup = std::any_of(picked.begin(), picked.end(), [&](const gpu_device& d) { return d.id == it->id; });
    if (!dup) picked.push_back(*it);
  }
  return picked;
}

namespace {

gpu_selection select_impl(const selection_request& req, const env_map& env, const lazy_listing& nvidia_src,
                          const lazy_listing& amd_src) {
  // Rule 2 comes before the platform is looked at, for every strategy (§14 A.59).
  check_mask_conflict(env);

  if (platform_needs_no_gpu(req.platform)) {
    // §14 A.67: noop / cpu never need a GPU. Like main, keep one slot (id 0) so that a caller that
    // round-robins over ids has something to count; nothing is pinned for these platforms.
    gpu_selection s;
    s.ids = req.gpu_ids.empty() ? std::vector<int>{0} : req.gpu_ids;
    s.reason = fmt::format("platform '{}' needs no GPU; detection skipped", req.platform.worker_runner);
    return s;
  }
  const std::string want = requested_vendor(req.platform);

  if (!req.gpu_ids.empty()) {
    // §14 A.68: explicit ids skip detection; with no platform named, the default platform (nvidia)
    // runs them.
    gpu_selection s;
    s.vendor = want.empty() ? "nvidia" : want;
    s.ids = req.gpu_ids;
    for (int id : req.gpu_ids) {
      gpu_device d;
      d.id = id;
      s.devices.push_back(d);
    }
    s.reason = fmt::format("explicit gpu_ids [{}]; detection skipped", fmt::join(req.gpu_ids, ", "));
    return s;
  }

  const auto cuda = env_get(env, cuda_var);
  const auto hip = env_get(env, hip_var);
  const auto rocr = env_get(env, rocr_var);
  const bool amd_disabled = empty_set(hip) || empty_set(rocr);  // rule 3
  const bool nvidia_disabled = empty_set(cuda);
  const bool rocm_mask = nonempty(hip) || nonempty(rocr);
  const std::string masks =
      fmt::format("{}, {}, {}", describe_mask(cuda_var, cuda), describe_mask(hip_var, hip), describe_mask(rocr_var, rocr));

  once nvidia(nvidia_src);
  once amd(amd_src);

  if (want == "rocm") {
    // Rules 6.2 / 6.3 / 7: a ROCm request uses HIP ids only; it never falls back to NVIDIA indexes.
    if (amd_disabled) throw user_error(err_rocm_none_visible);
    auto vis = visible_hip_devices(amd.get(), rocr, hip);
    if (vis.empty()) throw user_error(err_rocm_none_visible);
    std::string why = rocm_mask
        ? fmt::format("ROCm platform requested; {} leave HIP ids [{}] of amd-smi's [{}]", masks,
                      fmt::join(ids_of(vis), ", "), fmt::join(ids_of(amd.get()), ", "))
        : fmt::format("ROCm platform requested and both ROCm masks unset: all amd-smi HIP ids in print order");
    auto s = chosen("rocm", std::move(vis), std::move(why));
    return s;
  }

  // No platform, or NVIDIA requested.
  bool amd_masked_out = false;
  if (rocm_mask && !amd_disabled) {
    auto vis = visible_hip_devices(amd.get(), rocr, hip);
    if (!vis.empty()) {
      if (want == "nvidia") throw user_error(err_nvidia_got_rocm);  // rule 8
      auto why = fmt::format("{} select HIP ids [{}] of amd-smi's [{}] (a ROCm mask that selects a device picks AMD)",
                             masks, fmt::join(ids_of(vis), ", "), fmt::join(ids_of(amd.get()), ", "));
      return chosen("rocm", std::move(vis), std::move(why));
    }
    amd_masked_out = true;  // rule 7: the mask disables AMD; it does not fall through to all HIP ids
  }

  if (!nvidia_disabled) {
    auto vis = visible_cuda_devices(nvidia.get(), cuda);
    if (!vis.empty()) {
      std::string why;
      if (nonempty(cuda))
        why = fmt::format("{}={} selects nvidia-smi indexes [{}]", cuda_var, *cuda, fmt::join(ids_of(vis), ", "));
      else if (amd_masked_out)
        why = fmt::format("{} match no amd-smi HIP id, which disables AMD; nvidia-smi lists [{}]", masks,
                          fmt::join(ids_of(vis), ", "));
      else
        why = fmt::format("no ROCm mask and no ROCm platform requested; nvidia-smi lists [{}]",
                          fmt::join(ids_of(vis), ", "));
      return chosen("nvidia", std::move(vis), std::move(why));
    }
  }

  // Rule 6.1 / 10: NVIDIA shows nothing (a CUDA mask never invents a device), so AMD in print order.
  if (!amd_disabled && !amd_masked_out && !amd.get().empty()) {
    if (want == "nvidia") throw user_error(err_nvidia_got_rocm);
    std::string why = nonempty(cuda)
        ? fmt::format("{}={} matches no GPU nvidia-smi lists; amd-smi HIP ids in print order", cuda_var, *cuda)
        : std::string("nvidia-smi lists no GPU; amd-smi HIP ids in print order");
    return chosen("rocm", amd.get(), std::move(why));
  }
  throw user_error(err_no_gpu);  // rule 9: no fallback to GPU 0
}

}  // namespace

gpu_selection select_gpus(const selection_request& req, const env_map& env, const lazy_listing& nvidia,
                          const lazy_listing& amd) {
  auto sel = select_impl(req, env, nvidia, amd);
  // Defensive check kept from an earlier revision (§10.2 rule 8): the rules above never hand a ROCm
  // request NVIDIA devices, and this keeps it that way if they change.
  if (requested_vendor(req.platform) == "rocm" && sel.vendor == "nvidia") throw user_error(err_rocm_got_nvidia);
  return sel;
}

gpu_selection select_gpus(const selection_request& req, const env_map& env, const gpu_listing& nvidia,
                          const gpu_listing& amd) {
  return select_gpus(req, env, lazy_listing([&] { return nvidia; }), lazy_listing([&] { return amd; }));
}

gpu_selection detect_gpus(const selection_request& req, const env_map& env, const tool_locations& where) {
  return select_gpus(req, env, lazy_listing([&] { return list_nvidia_gpus(where); }),
                     lazy_listing([&] { return list_amd_gpus(where); }));
}

platform_spec apply_detected_vendor(const platform_spec& p, const gpu_selection& sel) {
  if (p.given || sel.vendor.empty()) return p;
  platform_spec out = p;
  for (const auto& c : platform_spec::component_names()) out.component(c) = sel.vendor;
  return out;
}

std::string cpu_device_note(size_t devices, unsigned cores) {
  if (cores == 0 || devices <= cores) return "";
  return "devices: " + std::to_string(devices) + " cpu devices on " + std::to_string(cores) +
         " cores: evaluators share cores, so their timings bend and the search follows them; use at most one "
         "device per core (gpu_ids)";
}

}  // namespace kagent
