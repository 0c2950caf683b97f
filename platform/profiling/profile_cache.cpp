#include "platform/profiling/profile_cache.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <system_error>

#include "platform/common/files.hpp"
#include "platform/nvidia/ncu_plan.hpp"
#include "platform/rocm/rocprof_plan.hpp"
#include "platform/store/util.hpp"

namespace kagent {

namespace fs = std::filesystem;

namespace {

constexpr int cache_version = 1;

std::string file_identity(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) return path;
  const auto time = fs::last_write_time(path, ec).time_since_epoch().count();
  return fmt::format("{} {} {}", path, size, time);
}

} // namespace

fs::path default_cache_root(const env_map& env) {
  if (auto v = env_get(env, "KAGENT_CACHE_DIR"); v && !v->empty()) return *v == "off" ? fs::path{} : fs::path(*v);
  if (auto x = env_get(env, "XDG_CACHE_HOME"); x && !x->empty()) return fs::path(*x) / "kagent-actors";
  if (auto h = env_get(env, "HOME"); h && !h->empty()) return fs::path(*h) / ".cache" / "kagent-actors";
  return {};
}

std::string profile_cache_key(const kernel_profile_request& req) {
  std::string tool;
  std::string metrics;
  try {
    if (req.platform == "nvidia") {
      tool = find_ncu_binary(req.kwargs, req.env);
      for (const auto& m : ncu_metric_list()) metrics += m + ",";
    } else if (req.platform == "rocm") {
      tool = find_rocprof_binary(req.kwargs, req.env, req.python);
      metrics = req.with_mfma ? "mfma" : "no-mfma";
    } else {
      return "";
    }
  } catch (const std::exception&) {
    return "";
  }
  const auto problem = read_file_if_present(req.problem_path);
  if (!problem) return "";
  const nlohmann::json parts{{"version", cache_version},
                             {"platform", req.platform},
                             {"tool", file_identity(tool)},
                             {"metrics", store::sha256_hex(metrics)},
                             {"code", store::sha256_hex(req.code)},
                             {"problem", store::sha256_hex(*problem)},
                             {"kernel_name", req.kernel_name},
                             {"device", req.device},
                             {"dtype", req.dtype},
                             {"size", req.size},
                             {"gpu_name", req.gpu_name},
                             {"visible", env_get(req.env, req.platform == "rocm" ? "HIP_VISIBLE_DEVICES"
                                                                                 : "CUDA_VISIBLE_DEVICES")
                                             .value_or("")}};
  return store::sha256_hex(parts.dump());
}

std::optional<kernel_profile_outcome> load_cached_profile(const fs::path& root, const std::string& key) {
  if (root.empty() || key.empty()) return std::nullopt;
  const auto path = root / "profiles" / (key + ".json");
  const auto text = read_file_if_present(path);
  if (!text) return std::nullopt;
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || j.value("version", 0) != cache_version || !j.contains("metrics")) return std::nullopt;
  kernel_profile_outcome o;
  try {
    o.ok = true;
    o.platform = j.at("platform").get<std::string>();
    o.kernel_name = j.at("kernel_name").get<std::string>();
    o.metrics = metrics_from_json(j.at("metrics"));
    o.detail = j.value("detail", nlohmann::json::object());
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (o.metrics.empty()) return std::nullopt;
  o.detail["cached"] = key;
  o.notes.push_back(fmt::format("from the profile cache ({}, profiled {})", path.string(), j.value("stored_at", "?")));
  return o;
}

void store_cached_profile(const fs::path& root, const std::string& key, const kernel_profile_outcome& o) {
  if (root.empty() || key.empty() || !o.ok || o.metrics.empty()) return;
  try {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char when[32] = {};
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    nlohmann::json detail = o.detail;
    if (detail.is_object()) detail.erase("cached");
    const nlohmann::json j{{"version", cache_version}, {"platform", o.platform}, {"kernel_name", o.kernel_name},
                           {"metrics", o.metrics},     {"detail", detail},     {"stored_at", when}};
    fs::create_directories(root / "profiles");
    store::write_file_atomic(root / "profiles" / (key + ".json"), j.dump());
  } catch (const std::exception&) {
    // A cache that cannot be written is no failure of the profile.
  }
}

} // namespace kagent
