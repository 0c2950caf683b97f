// `kagent-actors gpus`: shows which GPUs a run would use and why (SPEC §10), without starting a run.
// It reads the real environment and runs nvidia-smi / amd-smi exactly as the manager does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "actors/node_link.hpp"
#include "app/command.hpp"
#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/config/config.hpp"
#include "platform/gpu/gpu_name.hpp"
#include "platform/gpu/listing.hpp"
#include "platform/gpu/selection.hpp"
#include "platform/gpu/specs.hpp"

namespace kagent::app {
namespace {

struct gpus_options {
  std::vector<std::string> nodes;
  std::string strategy;
  std::string platform;
  std::vector<int> gpu_ids;
  std::string python;
  bool json = false;
};

nlohmann::ordered_json spec_json(const gpu_specs& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["vendor"] = s.vendor;
  j["architecture"] = s.architecture;
  if (!s.gfx_target.empty()) j["gfx_target"] = s.gfx_target;
  j["peak_fp32_tflops"] = s.peak_fp32_tflops;
  j["peak_fp16_tflops"] = s.peak_fp16_tflops;
  j["peak_bf16_tflops"] = s.peak_bf16_tflops;
  j["peak_memory_bw_gbps"] = s.peak_memory_bw_gbps;
  j["sm_count"] = s.sm_count;
  j["max_threads_per_sm"] = s.max_threads_per_sm;
  j["l1_cache_kb"] = s.l1_cache_kb;
  j["l2_cache_mb"] = s.l2_cache_mb;
  j["memory_gb"] = s.memory_gb;
  j["memory_type"] = s.memory_type;
  j["form_factor"] = s.form_factor;
  j["tdp_w"] = s.tdp_w;
  j["wavefront_size"] = s.wavefront_size;
  return j;
}

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

/// What the nodes offer (a run with --node would add these devices), instead of this machine's.
int run_node_gpus(const gpus_options& o) {
  const auto answers =
      query_nodes(o.nodes, o.strategy.empty() ? node_tls_config{} : load_strategy(o.strategy, config_search_dirs()).node_tls);
  bool all = true;
  if (o.json) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& q : answers) {
      nlohmann::ordered_json n;
      n["address"] = q.address;
      if (q.offer) {
        n["node"] = q.offer->node_name;
        n["platform"] = q.offer->platform;
        n["vendor"] = q.offer->vendor.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(q.offer->vendor);
        n["devices"] = nlohmann::ordered_json::array();
        for (const auto& d : q.offer->devices)
          n["devices"].push_back({{"id", d.device_id}, {"device", q.offer->node_name + "/gpu" + std::to_string(d.device_id)},
                                  {"name", d.name}, {"gpu_name", d.gpu_name}});
      } else {
        n["error"] = q.error;
        all = false;
      }
      j.push_back(n);
    }
    std::cout << nlohmann::ordered_json{{"nodes", j}}.dump(2) << "\n";
    return all ? 0 : 2;
  }
  for (const auto& q : answers) {
    if (!q.offer) {
      std::cerr << "error: node " << q.address << ": " << q.error << "\n";
      all = false;
      continue;
    }
    std::cout << fmt::format("node {} ({}): {} platform, {} device(s)\n", q.offer->node_name, q.address,
                             q.offer->platform, q.offer->devices.size());
    for (const auto& d : q.offer->devices)
      std::cout << fmt::format("  {}/gpu{}  {}{}\n", q.offer->node_name, d.device_id, or_dash(d.name),
                               d.gpu_name.empty() ? "" : "  (" + d.gpu_name + ")");
  }
  return all ? 0 : 2;
}

int run_gpus(const gpus_options& o) {
  try {
    if (!o.nodes.empty()) return run_node_gpus(o);
    selection_request req;
    std::string python = "python3";
    std::string configured_name;
    if (!o.strategy.empty()) {
      auto cfg = load_strategy(o.strategy, config_search_dirs());
      req.platform = cfg.platform;
      req.gpu_ids = cfg.gpu_ids;
      python = cfg.python;
      configured_name = cfg.gpu_name;
    }
    if (!o.platform.empty()) {
      platform_spec p;
      for (const auto& c : platform_spec::component_names()) p.component(c) = o.platform;
      p.given = true;
      req.platform = p;
    }
    if (!o.gpu_ids.empty()) req.gpu_ids = o.gpu_ids;
    if (!o.python.empty()) python = o.python;

    const env_map env = current_environment();
    const auto where = tool_locations::from_env(env, python);
    gpu_selection sel;
    try {
      sel = detect_gpus(req, env, where);
    } catch (const user_error& e) {
      if (std::string{e.what()} != err_no_gpu) throw;
      // No device: say what was looked for and what to run instead, in the format asked for.
      const std::string nv = find_nvidia_smi(where), amd = find_amd_smi(where);
      const std::string looked = fmt::format(
          "looked for NVIDIA GPUs with {} and AMD GPUs with {}", nv.empty() ? "nvidia-smi (not on PATH)" : nv,
          amd.empty() ? fmt::format("amd-smi (not on PATH, beside {} or in {}/bin)", python, where.rocm_dir) : amd);
      const std::string hint = "without a GPU, run the CPU platform: kagent-actors --strategy cpu --kernel-dir DIR";
      if (o.json) {
        nlohmann::ordered_json j;
        j["vendor"] = nullptr;
        j["ids"] = nlohmann::ordered_json::array();
        j["devices"] = nlohmann::ordered_json::array();
        j["reason"] = e.what();
        j["looked_for"] = looked;
        j["suggestion"] = hint;
        std::cout << j.dump(2) << "\n";
      }
      std::cerr << "error: " << e.what() << " (" << looked << ")\n" << hint << "\n";
      return 2;
    }
    const auto platform = apply_detected_vendor(req.platform, sel);

    // The name the run would hand the specs provider; an unknown device is reported, not fatal here.
    std::optional<gpu_name_choice> name;
    std::string name_error;
    try {
      name = reconcile_gpu_name(configured_name, sel);
    } catch (const user_error& e) {
      name_error = e.what();
    }

    if (o.json) {
      nlohmann::ordered_json j;
      j["vendor"] = sel.vendor.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(sel.vendor);
      j["ids"] = sel.ids;
      j["devices"] = nlohmann::ordered_json::array();
      for (const auto& d : sel.devices) {
        nlohmann::ordered_json dj;
        dj["id"] = d.id;
        dj["name"] = d.name;
        dj["chip_id"] = d.chip_id;
        dj["compute_units"] = d.compute_units;
        if (sel.vendor == "rocm") {
          dj["hsa_id"] = d.hsa_id;
          dj["gfx_target"] = d.gfx_target;
        }
        auto spec = d.spec_key.empty() ? std::nullopt : find_gpu_specs(d.spec_key);
        dj["spec"] = spec ? spec_json(*spec) : nlohmann::ordered_json(nullptr);
        j["devices"].push_back(dj);
      }
      j["reason"] = sel.reason;
      j["platform"] = platform.uniform();
      j["gpu_name"] = name && !name->name.empty() ? nlohmann::ordered_json(name->name) : nlohmann::ordered_json(nullptr);
      j["gpu_name_note"] = name ? name->note : name_error;
      std::cout << j.dump(2) << "\n";
      return 0;
    }

    std::cout << fmt::format("vendor:   {}\n", sel.vendor.empty() ? "none (no GPU needed)" : sel.vendor);
    std::cout << fmt::format("platform: {}\n", platform.uniform());
    std::cout << fmt::format("ids:      {}\n", fmt::join(sel.ids, ", "));
    std::cout << fmt::format("reason:   {}\n", sel.reason);
    if (name && !name->name.empty()) std::cout << fmt::format("gpu_name: {}\n", name->name);
    if (name && !name->note.empty()) std::cout << fmt::format("note:     {}\n", name->note);
    if (!name_error.empty()) std::cout << fmt::format("note:     {}\n", name_error);
    if (!sel.devices.empty()) {
      const char* row = "{:<4} {:<30} {:<8} {:>4}  {:<24} {:<13} {:>8} {:>10} {:>7}\n";
      std::cout << "\n" << fmt::format(fmt::runtime(row), "ID", "NAME", "CHIP", "CUs", "SPEC", "ARCH", "BW GB/s",
                                       "FP16 TF", "MEM GB");
      for (const auto& d : sel.devices) {
        auto spec = d.spec_key.empty() ? std::nullopt : find_gpu_specs(d.spec_key);
        std::cout << fmt::format(fmt::runtime(row), d.id, or_dash(d.name), or_dash(d.chip_id),
                                 d.compute_units ? std::to_string(d.compute_units) : "-",
                                 spec ? spec->name : "(not in specs database)", spec ? spec->architecture : "-",
                                 spec ? fmt::format("{:g}", spec->peak_memory_bw_gbps) : "-",
                                 spec ? fmt::format("{:g}", spec->peak_fp16_tflops) : "-",
                                 spec ? fmt::format("{:g}", spec->memory_gb) : "-");
      }
    }
    return 0;
  } catch (const user_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const run_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

const register_command gpus_command{"gpus", [](CLI::App& root, int& exit_code) {
  auto opts = std::make_shared<gpus_options>();
  auto* sub = root.add_subcommand("gpus", "show the GPUs a run would use (vendor, ids, specs) and why");
  sub->add_option("--strategy", opts->strategy, "strategy name or YAML path whose platform and gpu_ids to use");
  sub->add_option("--platform", opts->platform, "requested platform (overrides the strategy's)")
      ->check(CLI::IsMember({"nvidia", "rocm", "noop", "cpu"}));
  sub->add_option("--gpu-ids", opts->gpu_ids, "explicit device ids (skip detection), e.g. 0,1")->delimiter(',');
  sub->add_option("--python", opts->python, "interpreter whose directory is searched for amd-smi");
  sub->add_flag("--json", opts->json, "print JSON instead of a table");
  sub->add_option("--node", opts->nodes, "HOST:PORT of a `kagent-actors serve` node: list what it offers instead "
                  "(repeatable; KAGENT_NODE_SECRET)");
  sub->callback([opts, &exit_code] { exit_code = run_gpus(*opts); });
}};

}  // namespace
}  // namespace kagent::app
