#include "platform/config/config.hpp"

#include "platform/common/env.hpp"
#include "platform/common/suggest.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace kagent {

// ---------------------------------------------------------------------------------------------
// platform_spec

const std::vector<std::string>& platform_spec::component_names() {
  static const std::vector<std::string> names{"verifier",         "benchmarker",       "worker_runner",
                                              "specs_provider",   "profiler",          "roofline_analyzer",
                                              "bottleneck_analyzer", "rag_prescriber"};
  return names;
}

std::string& platform_spec::component(const std::string& n) {
  if (n == "verifier") return verifier;
  if (n == "benchmarker") return benchmarker;
  if (n == "worker_runner") return worker_runner;
  if (n == "specs_provider") return specs_provider;
  if (n == "profiler") return profiler;
  if (n == "roofline_analyzer") return roofline_analyzer;
  if (n == "bottleneck_analyzer") return bottleneck_analyzer;
  if (n == "rag_prescriber") return rag_prescriber;
  throw std::invalid_argument("unknown platform component '" + n + "'");
}

const std::string& platform_spec::component(const std::string& n) const {
  return const_cast<platform_spec*>(this)->component(n);
}

std::string platform_spec::uniform() const {
  const auto& first = verifier;
  for (const auto& c : component_names())
    if (component(c) != first) return "mixed";
  return first;
}

std::string platform_spec::vendor() const {
  // SPEC §10.1: the requested vendor is read from the worker runner (the component that places work
  // on devices); cpu and noop need no GPU at all.
  if (worker_runner == "nvidia" || worker_runner == "rocm") return worker_runner;
  return "";
}

// ---------------------------------------------------------------------------------------------
// strict reader

namespace {

class reader {
public:
  explicit reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& msg) const {
    const auto m = at.Mark();
    if (m.line >= 0) throw user_error(fmt::format("{}:{}: {}", origin_, m.line + 1, msg));
    throw user_error(fmt::format("{}: {}", origin_, msg));
  }

  void only_keys(const YAML::Node& map, const std::string& section, const std::vector<std::string>& allowed) const {
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const auto key = it->first.as<std::string>();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        fail(it->first, fmt::format("unknown key '{}'{}{}; expected one of: {}", key,
                                    section.empty() ? "" : " in '" + section + "'", did_you_mean(key, allowed), list));
      }
      if (!seen.insert(key).second) fail(it->first, fmt::format("duplicate key '{}'", qualify(section, key)));
    }
  }

  static std::string qualify(const std::string& section, const std::string& key) {
    return section.empty() ? key : section + "." + key;
  }

  // Typed getters: absent keys keep the default; a present key must convert, or it is an error
  // naming the key, the line and the expected type (yaml-cpp's as<T>(fallback) would swallow it).
  template <class T>
  bool get(const YAML::Node& map, const std::string& section, const char* key, T& out,
           const char* type_name) const {
    const YAML::Node n = map[key];
    if (!n.IsDefined() || n.IsNull()) return false;
    if (!n.IsScalar()) fail(n, fmt::format("key '{}' must be {}, got a {}", qualify(section, key), type_name, kind(n)));
    try {
      out = n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, fmt::format("key '{}' must be {}, got '{}'", qualify(section, key), type_name, n.Scalar()));
    }
    return true;
  }

  // Every number has a range: an absurd value (a timeout of 1e308 s, 100000 bottlenecks) is a typo
  // or a test of the limits, never a run anyone wants; refusing it costs nothing, running it costs
  // a run that fails every candidate or plans 100k LLM calls.
  bool get_int(const YAML::Node& m, const std::string& s, const char* k, int& out, int min, int max) const {
    if (!get(m, s, k, out, "an integer")) return false;
    if (out < min || out > max)
      fail(m[k], fmt::format("key '{}' must be an integer from {} to {}, got {}", qualify(s, k), min, max, out));
    return true;
  }
  bool get_double(const YAML::Node& m, const std::string& s, const char* k, double& out, double min,
                  double max) const {
    if (!get(m, s, k, out, "a number")) return false;
    // NaN compares false with everything: test finiteness first, or '.nan' passes every range.
    if (!std::isfinite(out) || out < min || out > max)
      fail(m[k], fmt::format("key '{}' must be a finite number from {} to {}, got {}", qualify(s, k), min, max,
                             m[k].Scalar()));
    return true;
  }
  bool get_bool(const YAML::Node& m, const std::string& s, const char* k, bool& out) const {
    return get(m, s, k, out, "true or false");
  }
  bool get_string(const YAML::Node& m, const std::string& s, const char* k, std::string& out) const {
    return get(m, s, k, out, "a string");
  }
  void get_choice(const YAML::Node& m, const std::string& s, const char* k, std::string& out,
                  const std::vector<std::string>& choices) const {
    if (!get_string(m, s, k, out)) return;
    if (std::find(choices.begin(), choices.end(), out) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      fail(m[k], fmt::format("key '{}' has value '{}'; expected one of: {}", qualify(s, k), out, list));
    }
  }

  YAML::Node section(const YAML::Node& m, const std::string& parent, const char* key) const {
    const YAML::Node n = m[key];
    if (!n.IsDefined() || n.IsNull()) return YAML::Node{};
    if (!n.IsMap()) fail(n, fmt::format("key '{}' must be a mapping, got a {}", qualify(parent, key), kind(n)));
    return n;
  }

  static const char* kind(const YAML::Node& n) {
    if (n.IsMap()) return "mapping";
    if (n.IsSequence()) return "list";
    if (n.IsScalar()) return "scalar";
    return "null";
  }

private:
  std::string origin_;
};

const std::vector<std::string> k_top_keys{
    "strategy", "num_workers", "max_rounds", "strategy_config", "openai_model", "high_reasoning_effort",
    "bottleneck_override", "platform", "gpu_ids", "gpu_name", "ncu_bin_path", "benchmark_warmup",
    "benchmark_repeat", "divergence_threshold", "target_platform", "roofline_config", "use_rag", "templates",
    "platform_kwargs", "test_timeout_s", "benchmark_timeout_s", "candidate_timeout_s", "profile_budget_s", "profile",
    "isolation", "compile_reference", "max_refine_attempts", "tune_variants", "secret_env_patterns", "nodes", "local_devices", "llm", "python", "user_test",
    "user_test_timeout_s", "dtype", "rtol", "atol", "sandbox", "max_kernel_bytes", "node_tls"};

void read_platform(const reader& r, const YAML::Node& root, platform_spec& p) {
  const YAML::Node n = root["platform"];
  if (!n.IsDefined() || n.IsNull()) return;
  const std::vector<std::string> names(std::begin(platform_names), std::end(platform_names));
  auto check_name = [&](const YAML::Node& at, const std::string& key, const std::string& v) {
    if (std::find(names.begin(), names.end(), v) == names.end())
      r.fail(at, fmt::format("key '{}' has value '{}'; expected one of: nvidia, rocm, noop, cpu", key, v));
  };
  if (n.IsScalar()) {
    const auto v = n.as<std::string>();
    check_name(n, "platform", v);
    for (const auto& c : platform_spec::component_names()) p.component(c) = v;
    p.given = true;
    return;
  }
  if (!n.IsMap()) r.fail(n, "key 'platform' must be a platform name or a per-component mapping");
  auto allowed = platform_spec::component_names();
  allowed.push_back("default");
  r.only_keys(n, "platform", allowed);
  std::string dflt = "nvidia";
  if (r.get_string(n, "platform", "default", dflt)) check_name(n["default"], "platform.default", dflt);
  for (const auto& c : platform_spec::component_names()) {
    std::string v = dflt;
    if (r.get_string(n, "platform", c.c_str(), v)) check_name(n[c], "platform." + c, v);
    p.component(c) = v;
  }
  p.given = true;
  p.is_map = true;
}

void read_string_list(const reader& r, const YAML::Node& m, const std::string& s, const char* k,
                      std::vector<std::string>& out) {
  const YAML::Node n = m[k];
  if (!n.IsDefined() || n.IsNull()) return;
  if (!n.IsSequence()) r.fail(n, fmt::format("key '{}' must be a list of strings", reader::qualify(s, k)));
  out.clear();
  for (const auto& e : n) {
    if (!e.IsScalar()) r.fail(e, fmt::format("key '{}' must be a list of strings", reader::qualify(s, k)));
    out.push_back(e.as<std::string>());
  }
}

/// `strategy_config.models`: model names, or maps {model, provider, base_url, api_key_env} for a
/// model reached through its own provider, endpoint or key.
void read_models(const reader& r, const YAML::Node& sc, strategy_config& s) {
  const YAML::Node n = sc["models"];
  if (!n.IsDefined() || n.IsNull()) return;
  const char* expected = "key 'strategy_config.models' must be a list of model names or of maps "
                         "{model, provider, base_url, api_key_env}";
  if (!n.IsSequence()) r.fail(n, expected);
  s.models.clear();
  s.model_endpoints.clear();
  for (const auto& e : n) {
    if (e.IsScalar()) {
      s.models.push_back(e.as<std::string>());
      continue;
    }
    if (!e.IsMap()) r.fail(e, expected);
    r.only_keys(e, "strategy_config.models[]", {"model", "provider", "base_url", "api_key_env"});
    std::string model;
    model_endpoint ep;
    r.get_string(e, "strategy_config.models[]", "model", model);
    if (model.empty()) r.fail(e, "key 'strategy_config.models[]' needs 'model' (the model's name)");
    r.get_choice(e, "strategy_config.models[]", "provider", ep.provider,
                 {"anthropic", "openai", "openai_responses", "openai_compatible", "relay", "replay"});
    r.get_string(e, "strategy_config.models[]", "base_url", ep.base_url);
    r.get_string(e, "strategy_config.models[]", "api_key_env", ep.api_key_env);
    if (s.model_endpoints.count(model)) r.fail(e, fmt::format("model '{}' is listed twice in strategy_config.models", model));
    s.models.push_back(model);
    s.model_endpoints[model] = ep;
  }
}

run_config from_node(const YAML::Node& root, const std::string& origin) {
  reader r{origin};
  run_config c;
  // An empty file (or one of comments only) would run every default: on most hosts "no GPU visible",
  // a cause far from the mistake.
  if (!root.IsDefined() || root.IsNull())
    r.fail(root, "the strategy config is empty; expected a mapping of configuration keys, e.g. 'strategy: beam_search'");
  if (!root.IsMap()) r.fail(root, "the top level must be a mapping of configuration keys");
  r.only_keys(root, "", k_top_keys);

  r.get_choice(root, "", "strategy", c.strategy, {"beam_search", "greedy"});
  if (auto nw = root["num_workers"]; nw.IsDefined() && nw.IsScalar() && nw.Scalar() == "auto") {
    c.num_workers_auto = true;
  } else if (nw.IsDefined() && !nw.IsNull()) {
    if (nw.IsScalar()) {
      int probe = 0;
      try {
        probe = nw.as<int>();
      } catch (const YAML::Exception&) {
        r.fail(nw, fmt::format("key 'num_workers' must be 'auto' or an integer from 1 to {}, got '{}'",
                               limits::max_workers, nw.Scalar()));
      }
      (void)probe;
    }
    r.get_int(root, "", "num_workers", c.num_workers, 1, limits::max_workers);
    c.num_workers_auto = false;
  }
  r.get_int(root, "", "max_rounds", c.max_rounds, 1, limits::max_rounds);
  if (auto sc = r.section(root, "", "strategy_config"); sc) {
    r.only_keys(sc, "strategy_config",
                {"num_top_kernels", "num_bottlenecks", "models", "samples_per_prompt", "num_expanding_parents",
                 "max_no_improvement", "schedule"});
    auto& s = c.strategy_cfg;
    r.get_int(sc, "strategy_config", "num_top_kernels", s.num_top_kernels, 1, limits::max_fanout);
    r.get_int(sc, "strategy_config", "num_bottlenecks", s.num_bottlenecks, 1, limits::max_fanout);
    read_models(r, sc, s);
    r.get_int(sc, "strategy_config", "samples_per_prompt", s.samples_per_prompt, 1, limits::max_fanout);
    r.get_int(sc, "strategy_config", "num_expanding_parents", s.num_expanding_parents, 1, limits::max_fanout);
    r.get_int(sc, "strategy_config", "max_no_improvement", s.max_no_improvement, 1, limits::max_rounds);
    r.get_choice(sc, "strategy_config", "schedule", s.schedule, {"rounds", "async"});
    if (s.models.size() > static_cast<size_t>(limits::max_fanout))
      r.fail(sc["models"], fmt::format("key 'strategy_config.models' lists {} models; at most {} allowed",
                                       s.models.size(), limits::max_fanout));
    if (c.strategy == "beam_search") {
      const long parents = s.num_expanding_parents > 0 ? std::min(s.num_expanding_parents, s.num_top_kernels)
                                                       : s.num_top_kernels;
      const long planned = parents * s.num_bottlenecks * std::max<long>(1, static_cast<long>(s.models.size())) *
                           s.samples_per_prompt;
      if (planned > limits::max_candidates_per_round)
        r.fail(sc, fmt::format("key 'strategy_config' plans {} candidates per round (expanding parents {} x "
                               "num_bottlenecks {} x models {} x samples_per_prompt {}); at most {} allowed",
                               planned, parents, s.num_bottlenecks, std::max<size_t>(1, s.models.size()),
                               s.samples_per_prompt, limits::max_candidates_per_round));
    }
  }
  r.get_string(root, "", "openai_model", c.openai_model);
  r.get_bool(root, "", "high_reasoning_effort", c.high_reasoning_effort);
  r.get_choice(root, "", "bottleneck_override", c.bottleneck_override, {"memory", "compute", "underutilized"});
  read_platform(r, root, c.platform);
  if (const YAML::Node g = root["gpu_ids"]; g.IsDefined() && !g.IsNull()) {
    if (!g.IsSequence()) r.fail(g, "key 'gpu_ids' must be a list of device ids, e.g. [0, 1]");
    for (const auto& e : g) {
      int id = -1;
      try {
        id = e.as<int>();
      } catch (const YAML::Exception&) {
        r.fail(e, fmt::format("key 'gpu_ids' must hold integers, got '{}'", e.IsScalar() ? e.Scalar() : "?"));
      }
      if (id < 0) r.fail(e, "key 'gpu_ids' must hold non-negative integers");
      if (std::find(c.gpu_ids.begin(), c.gpu_ids.end(), id) != c.gpu_ids.end())
        r.fail(e, fmt::format("key 'gpu_ids' lists device {} twice; expected distinct device ids", id));
      c.gpu_ids.push_back(id);
    }
  }
  r.get_string(root, "", "gpu_name", c.gpu_name);
  r.get_string(root, "", "ncu_bin_path", c.pkwargs.ncu_bin_path);
  r.get_double(root, "", "benchmark_warmup", c.benchmark_warmup, 0, limits::max_benchmark_iterations);
  r.get_double(root, "", "benchmark_repeat", c.benchmark_repeat, 1, limits::max_benchmark_iterations);
  r.get_double(root, "", "divergence_threshold", c.divergence_threshold, 0, limits::max_divergence_pct);
  r.get_choice(root, "", "target_platform", c.target_platform, {"cuda", "xpu", "rocm", "cpu"});
  if (auto rc = r.section(root, "", "roofline_config"); rc) {
    r.only_keys(rc, "roofline_config",
                {"sol_threshold_pct", "underutilized_threshold_pct", "early_stop", "convergence_rounds",
                 "convergence_threshold_pct"});
    auto& f = c.roofline;
    r.get_double(rc, "roofline_config", "sol_threshold_pct", f.sol_threshold_pct, 0, 100);
    r.get_double(rc, "roofline_config", "underutilized_threshold_pct", f.underutilized_threshold_pct, 0, 100);
    bool es = false;
    if (r.get_bool(rc, "roofline_config", "early_stop", es)) f.early_stop = es;
    r.get_int(rc, "roofline_config", "convergence_rounds", f.convergence_rounds, 1, limits::max_rounds);
    r.get_double(rc, "roofline_config", "convergence_threshold_pct", f.convergence_threshold_pct, 0, 100);
  }
  r.get_bool(root, "", "use_rag", c.use_rag);
  if (auto t = r.section(root, "", "templates"); t) {
    r.only_keys(t, "templates",
                {"kernel_optimization", "kernel_refinement", "reflexion_prompt", "bottleneck_analysis",
                 "triton_guidelines", "platform_guidance"});
    for (auto it = t.begin(); it != t.end(); ++it) {
      std::string v;
      r.get_string(t, "templates", it->first.as<std::string>().c_str(), v);
      c.templates[it->first.as<std::string>()] = v;
    }
  }
  if (auto pk = r.section(root, "", "platform_kwargs"); pk) {
    r.only_keys(pk, "platform_kwargs", {"rocprof_bin_path", "ncu_bin_path"});
    r.get_string(pk, "platform_kwargs", "rocprof_bin_path", c.pkwargs.rocprof_bin_path);
    r.get_string(pk, "platform_kwargs", "ncu_bin_path", c.pkwargs.ncu_bin_path);
  }
  double tt = 0;
  if (r.get_double(root, "", "test_timeout_s", tt, 1, limits::max_timeout_s)) c.test_timeout_s = tt;
  r.get_double(root, "", "benchmark_timeout_s", c.benchmark_timeout_s, 1, limits::max_timeout_s);
  r.get_double(root, "", "candidate_timeout_s", c.candidate_timeout_s, 1, limits::max_timeout_s);
  r.get_double(root, "", "profile_budget_s", c.profile_budget_s, 0, limits::max_timeout_s);
  r.get_choice(root, "", "profile", c.profile, {"parents", "every", "never"});
  r.get_choice(root, "", "isolation", c.isolation, {"warm", "process"});
  r.get_bool(root, "", "compile_reference", c.compile_reference);
  r.get_int(root, "", "max_refine_attempts", c.max_refine_attempts, 0, limits::max_refine_attempts);
  r.get_int(root, "", "tune_variants", c.tune_variants, 0, limits::max_tune_variants);
  read_string_list(r, root, "", "secret_env_patterns", c.secret_env_patterns);
  read_string_list(r, root, "", "nodes", c.nodes);
  r.get_bool(root, "", "local_devices", c.local_devices);
  r.get_choice(root, "", "user_test", c.user_test, {"best", "every", "never"});
  r.get_double(root, "", "user_test_timeout_s", c.user_test_timeout_s, 1, limits::max_timeout_s);
  r.get_choice(root, "", "dtype", c.dtype, {"bfloat16", "float16", "float32"});
  double tol = 0;
  if (r.get_double(root, "", "rtol", tol, 0, limits::max_rtol)) c.rtol = tol;
  if (r.get_double(root, "", "atol", tol, 0, limits::max_atol)) c.atol = tol;
  if (auto tls = r.section(root, "", "node_tls"); tls.IsMap()) {
    r.only_keys(tls, "node_tls", {"certificate", "key", "cafile"});
    r.get_string(tls, "node_tls", "certificate", c.node_tls.certificate);
    r.get_string(tls, "node_tls", "key", c.node_tls.key);
    r.get_string(tls, "node_tls", "cafile", c.node_tls.cafile);
    if (c.node_tls.certificate.empty() || c.node_tls.key.empty() || c.node_tls.cafile.empty())
      r.fail(tls, "node_tls needs certificate, key and cafile together (PEM files)");
  }
  if (auto sb = r.section(root, "", "sandbox"); sb) {
    r.only_keys(sb, "sandbox", {"mode", "memory_mb", "max_processes", "max_file_mb", "max_cpu_s"});
    r.get_choice(sb, "sandbox", "mode", c.sandbox.mode, {"auto", "bwrap", "rlimits", "off"});
    r.get_double(sb, "sandbox", "max_cpu_s", c.sandbox.max_cpu_s, 0, limits::max_timeout_s);
    r.get_double(sb, "sandbox", "memory_mb", c.sandbox.memory_mb, 0, limits::max_memory_mb);
    r.get_int(sb, "sandbox", "max_processes", c.sandbox.max_processes, 1, limits::max_processes);
    r.get_double(sb, "sandbox", "max_file_mb", c.sandbox.max_file_mb, 1, limits::max_memory_mb);
  }
  r.get_string(root, "", "python", c.python);
  r.get_int(root, "", "max_kernel_bytes", c.max_kernel_bytes, limits::min_size_bytes, limits::max_kernel_bytes);
  if (auto l = r.section(root, "", "llm"); l) {
    r.only_keys(l, "llm",
                {"provider", "base_url", "model", "api_key_env", "max_tokens", "max_concurrency",
                 "requests_per_minute", "tokens_per_minute", "max_retries", "timeout_s", "connect_timeout_s",
                 "idle_timeout_s", "stream", "budget_usd", "call_budget_usd", "prices", "replay_dir",
                 "max_reply_bytes", "preflight"});
    auto& m = c.llm;
    r.get_choice(l, "llm", "provider", m.provider,
                 {"anthropic", "openai", "openai_compatible", "relay", "replay"});
    r.get_string(l, "llm", "base_url", m.base_url);
    r.get_string(l, "llm", "model", m.model);
    r.get_string(l, "llm", "api_key_env", m.api_key_env);
    r.get_int(l, "llm", "max_tokens", m.max_tokens, 1, limits::max_llm_tokens);
    m.max_concurrency_set = r.get_int(l, "llm", "max_concurrency", m.max_concurrency, 1, limits::max_workers);
    r.get_int(l, "llm", "requests_per_minute", m.requests_per_minute, 0, limits::max_requests_per_minute);
    r.get_int(l, "llm", "tokens_per_minute", m.tokens_per_minute, 0, limits::max_tokens_per_minute);
    r.get_int(l, "llm", "max_retries", m.max_retries, 0, limits::max_llm_retries);
    r.get_double(l, "llm", "timeout_s", m.timeout_s, 1, limits::max_llm_timeout_s);
    r.get_double(l, "llm", "connect_timeout_s", m.connect_timeout_s, 0.1, limits::max_llm_timeout_s);
    r.get_double(l, "llm", "idle_timeout_s", m.idle_timeout_s, 0.1, limits::max_llm_timeout_s);
    r.get_bool(l, "llm", "stream", m.stream);
    r.get_bool(l, "llm", "preflight", m.preflight);
    r.get_double(l, "llm", "budget_usd", m.budget_usd, 0, limits::max_usd);
    r.get_double(l, "llm", "call_budget_usd", m.call_budget_usd, 0, limits::max_usd);
    r.get_string(l, "llm", "replay_dir", m.replay_dir);
    r.get_int(l, "llm", "max_reply_bytes", m.max_reply_bytes, limits::min_size_bytes, limits::max_reply_bytes);
    if (auto pr = r.section(l, "llm", "prices"); pr) {
      for (auto it = pr.begin(); it != pr.end(); ++it) {
        const auto model = it->first.as<std::string>();
        const YAML::Node v = it->second;
        if (!v.IsMap()) r.fail(v, fmt::format("key 'llm.prices.{}' must be a mapping {{input, output}} in USD per million tokens", model));
        r.only_keys(v, "llm.prices." + model, {"input", "output"});
        std::pair<double, double> p{0, 0};
        r.get_double(v, "llm.prices." + model, "input", p.first, 0, limits::max_price_per_mtok);
        r.get_double(v, "llm.prices." + model, "output", p.second, 0, limits::max_price_per_mtok);
        m.prices[model] = p;
      }
    }
  }
  return c;
}

[[noreturn]] void rethrow_yaml(const YAML::Exception& e, const std::string& origin) {
  if (e.mark.line >= 0)
    throw user_error(fmt::format("{}:{}:{}: YAML syntax error: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  throw user_error(fmt::format("{}: YAML syntax error: {}", origin, e.msg));
}

} // namespace

run_config parse_config(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    rethrow_yaml(e, origin);
  }
  try {
    auto c = from_node(root, origin);
    c.source_path = origin;
    return c;
  } catch (const user_error&) {
    throw;
  } catch (const YAML::Exception& e) {
    rethrow_yaml(e, origin);
  }
}

run_config load_config_file(const std::string& path) {
  // An ifstream opens a directory and reads nothing from it: that ran every default.
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw user_error(fmt::format("{}: is a directory; expected a strategy YAML file", path));
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw user_error(fmt::format("{}: cannot read strategy config ({})", path, ec.message()));
  std::ifstream f(path);
  if (!f) throw user_error(fmt::format("{}: cannot read strategy config (file missing or unreadable)", path));
  std::stringstream ss;
  ss << f.rdbuf();
  auto c = parse_config(ss.str(), path);
  c.name = fs::path(path).stem().string();
  // Template paths are relative to the YAML file that names them.
  for (auto& [k, v] : c.templates)
    if (!v.empty() && fs::path(v).is_relative()) v = (fs::path(path).parent_path() / v).lexically_normal().string();
  return c;
}

std::vector<std::string> config_search_dirs() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("KAGENT_CONFIG_DIR"); d && *d) dirs.emplace_back(d);
  dirs.push_back(install_root() + "/configs");
  return dirs;
}

std::map<std::string, std::string> discover_strategies(const std::vector<std::string>& dirs) {
  std::map<std::string, std::string> out;
  for (const auto& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (!e.is_regular_file() || e.path().extension() != ".yaml") continue;
      out.emplace(e.path().stem().string(), e.path().string());  // first dir wins: user shadows built-in
    }
  }
  return out;
}

run_config load_strategy(const std::string& name, const std::vector<std::string>& dirs) {
  if (name.size() > 5 && name.ends_with(".yaml")) return load_config_file(name);
  auto all = discover_strategies(dirs);
  auto it = all.find(name);
  if (it == all.end()) {
    std::string list;
    std::vector<std::string> names;
    for (const auto& [k, v] : all) {
      list += (list.empty() ? "" : ", ") + k;
      names.push_back(k);
    }
    std::string where;
    for (const auto& d : dirs) where += (where.empty() ? "" : ", ") + d;
    throw user_error(fmt::format("--strategy: unknown strategy '{}'{}; expected one of: {} (searched {})", name,
                                 did_you_mean(name, names), list.empty() ? "(none)" : list,
                                 where.empty() ? "no directories" : where));
  }
  return load_config_file(it->second);
}

std::string to_yaml(const run_config& c) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "strategy" << YAML::Value << c.strategy;
  if (c.num_workers_auto)
    e << YAML::Key << "num_workers" << YAML::Value << "auto";
  else
    e << YAML::Key << "num_workers" << YAML::Value << c.num_workers;
  e << YAML::Key << "max_rounds" << YAML::Value << c.max_rounds;
  e << YAML::Key << "strategy_config" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "num_top_kernels" << YAML::Value << c.strategy_cfg.num_top_kernels;
  e << YAML::Key << "num_bottlenecks" << YAML::Value << c.strategy_cfg.num_bottlenecks;
  if (!c.strategy_cfg.models.empty()) {
    e << YAML::Key << "models" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& m : c.strategy_cfg.models) {
      auto ep = c.strategy_cfg.model_endpoints.find(m);
      if (ep == c.strategy_cfg.model_endpoints.end()) {
        e << m;
        continue;
      }
      e << YAML::BeginMap << YAML::Key << "model" << YAML::Value << m;
      if (!ep->second.provider.empty()) e << YAML::Key << "provider" << YAML::Value << ep->second.provider;
      if (!ep->second.base_url.empty()) e << YAML::Key << "base_url" << YAML::Value << ep->second.base_url;
      if (!ep->second.api_key_env.empty()) e << YAML::Key << "api_key_env" << YAML::Value << ep->second.api_key_env;
      e << YAML::EndMap;
    }
    e << YAML::EndSeq;
  }
  e << YAML::Key << "samples_per_prompt" << YAML::Value << c.strategy_cfg.samples_per_prompt;
  if (c.strategy_cfg.num_expanding_parents > 0)
    e << YAML::Key << "num_expanding_parents" << YAML::Value << c.strategy_cfg.num_expanding_parents;
  e << YAML::Key << "max_no_improvement" << YAML::Value << c.strategy_cfg.max_no_improvement;
  e << YAML::Key << "schedule" << YAML::Value << c.strategy_cfg.schedule;
  e << YAML::EndMap;
  e << YAML::Key << "openai_model" << YAML::Value << c.openai_model;
  e << YAML::Key << "high_reasoning_effort" << YAML::Value << c.high_reasoning_effort;
  if (!c.bottleneck_override.empty()) e << YAML::Key << "bottleneck_override" << YAML::Value << c.bottleneck_override;
  e << YAML::Key << "platform" << YAML::Value;
  if (c.platform.uniform() != "mixed") {
    e << c.platform.uniform();
  } else {
    e << YAML::BeginMap;
    for (const auto& n : platform_spec::component_names()) e << YAML::Key << n << YAML::Value << c.platform.component(n);
    e << YAML::EndMap;
  }
  if (!c.gpu_ids.empty()) e << YAML::Key << "gpu_ids" << YAML::Value << YAML::Flow << c.gpu_ids;
  if (!c.gpu_name.empty()) e << YAML::Key << "gpu_name" << YAML::Value << c.gpu_name;
  e << YAML::Key << "benchmark_warmup" << YAML::Value << c.benchmark_warmup;
  e << YAML::Key << "benchmark_repeat" << YAML::Value << c.benchmark_repeat;
  e << YAML::Key << "divergence_threshold" << YAML::Value << c.divergence_threshold;
  e << YAML::Key << "target_platform" << YAML::Value << c.target_platform;
  e << YAML::Key << "roofline_config" << YAML::Value << YAML::BeginMap;
  if (c.roofline.sol_threshold_pct >= 0) e << YAML::Key << "sol_threshold_pct" << YAML::Value << c.roofline.sol_threshold_pct;
  if (c.roofline.underutilized_threshold_pct >= 0)
    e << YAML::Key << "underutilized_threshold_pct" << YAML::Value << c.roofline.underutilized_threshold_pct;
  if (c.roofline.early_stop) e << YAML::Key << "early_stop" << YAML::Value << *c.roofline.early_stop;
  e << YAML::Key << "convergence_rounds" << YAML::Value << c.roofline.convergence_rounds;
  e << YAML::Key << "convergence_threshold_pct" << YAML::Value << c.roofline.convergence_threshold_pct;
  e << YAML::EndMap;
  e << YAML::Key << "use_rag" << YAML::Value << c.use_rag;
  if (!c.templates.empty()) {
    e << YAML::Key << "templates" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : c.templates) e << YAML::Key << k << YAML::Value << v;
    e << YAML::EndMap;
  }
  if (!c.pkwargs.rocprof_bin_path.empty() || !c.pkwargs.ncu_bin_path.empty()) {
    e << YAML::Key << "platform_kwargs" << YAML::Value << YAML::BeginMap;
    if (!c.pkwargs.rocprof_bin_path.empty()) e << YAML::Key << "rocprof_bin_path" << YAML::Value << c.pkwargs.rocprof_bin_path;
    if (!c.pkwargs.ncu_bin_path.empty()) e << YAML::Key << "ncu_bin_path" << YAML::Value << c.pkwargs.ncu_bin_path;
    e << YAML::EndMap;
  }
  if (c.test_timeout_s) e << YAML::Key << "test_timeout_s" << YAML::Value << *c.test_timeout_s;
  e << YAML::Key << "benchmark_timeout_s" << YAML::Value << c.benchmark_timeout_s;
  e << YAML::Key << "candidate_timeout_s" << YAML::Value << c.candidate_timeout_s;
  if (c.profile_budget_s > 0) e << YAML::Key << "profile_budget_s" << YAML::Value << c.profile_budget_s;
  e << YAML::Key << "profile" << YAML::Value << c.profile;
  e << YAML::Key << "isolation" << YAML::Value << c.isolation;
  e << YAML::Key << "compile_reference" << YAML::Value << c.compile_reference;
  e << YAML::Key << "max_refine_attempts" << YAML::Value << c.max_refine_attempts;
  if (c.tune_variants > 0) e << YAML::Key << "tune_variants" << YAML::Value << c.tune_variants;
  if (!c.secret_env_patterns.empty())
    e << YAML::Key << "secret_env_patterns" << YAML::Value << YAML::Flow << c.secret_env_patterns;
  if (!c.nodes.empty()) e << YAML::Key << "nodes" << YAML::Value << YAML::Flow << c.nodes;
  if (!c.local_devices) e << YAML::Key << "local_devices" << YAML::Value << false;
  if (c.node_tls.enabled()) {
    e << YAML::Key << "node_tls" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "certificate" << YAML::Value << c.node_tls.certificate;
    e << YAML::Key << "key" << YAML::Value << c.node_tls.key;
    e << YAML::Key << "cafile" << YAML::Value << c.node_tls.cafile;
    e << YAML::EndMap;
  }
  e << YAML::Key << "user_test" << YAML::Value << c.user_test;
  e << YAML::Key << "user_test_timeout_s" << YAML::Value << c.user_test_timeout_s;
  e << YAML::Key << "dtype" << YAML::Value << c.dtype;
  if (c.rtol) e << YAML::Key << "rtol" << YAML::Value << *c.rtol;
  if (c.atol) e << YAML::Key << "atol" << YAML::Value << *c.atol;
  e << YAML::Key << "sandbox" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "mode" << YAML::Value << c.sandbox.mode;
  e << YAML::Key << "memory_mb" << YAML::Value << c.sandbox.memory_mb;
  e << YAML::Key << "max_processes" << YAML::Value << c.sandbox.max_processes;
  e << YAML::Key << "max_file_mb" << YAML::Value << c.sandbox.max_file_mb;
  e << YAML::Key << "max_cpu_s" << YAML::Value << c.sandbox.max_cpu_s;
  e << YAML::EndMap;
  e << YAML::Key << "python" << YAML::Value << c.python;
  e << YAML::Key << "max_kernel_bytes" << YAML::Value << c.max_kernel_bytes;
  e << YAML::Key << "llm" << YAML::Value << YAML::BeginMap;
  const auto& l = c.llm;
  if (!l.provider.empty()) e << YAML::Key << "provider" << YAML::Value << l.provider;
  if (!l.base_url.empty()) e << YAML::Key << "base_url" << YAML::Value << l.base_url;
  if (!l.model.empty()) e << YAML::Key << "model" << YAML::Value << l.model;
  if (!l.api_key_env.empty()) e << YAML::Key << "api_key_env" << YAML::Value << l.api_key_env;
  e << YAML::Key << "max_tokens" << YAML::Value << l.max_tokens;
  if (l.max_concurrency_set) e << YAML::Key << "max_concurrency" << YAML::Value << l.max_concurrency;
  e << YAML::Key << "requests_per_minute" << YAML::Value << l.requests_per_minute;
  e << YAML::Key << "tokens_per_minute" << YAML::Value << l.tokens_per_minute;
  e << YAML::Key << "max_retries" << YAML::Value << l.max_retries;
  e << YAML::Key << "timeout_s" << YAML::Value << l.timeout_s;
  e << YAML::Key << "connect_timeout_s" << YAML::Value << l.connect_timeout_s;
  e << YAML::Key << "idle_timeout_s" << YAML::Value << l.idle_timeout_s;
  e << YAML::Key << "stream" << YAML::Value << l.stream;
  e << YAML::Key << "budget_usd" << YAML::Value << l.budget_usd;
  e << YAML::Key << "call_budget_usd" << YAML::Value << l.call_budget_usd;
  if (!l.prices.empty()) {
    e << YAML::Key << "prices" << YAML::Value << YAML::BeginMap;
    for (const auto& [m, p] : l.prices)
      e << YAML::Key << m << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "input" << YAML::Value
        << p.first << YAML::Key << "output" << YAML::Value << p.second << YAML::EndMap;
    e << YAML::EndMap;
  }
  if (!l.replay_dir.empty()) e << YAML::Key << "replay_dir" << YAML::Value << l.replay_dir;
  e << YAML::Key << "max_reply_bytes" << YAML::Value << l.max_reply_bytes;
  e << YAML::Key << "preflight" << YAML::Value << l.preflight;
  e << YAML::EndMap;
  e << YAML::EndMap;
  return std::string{e.c_str()} + "\n";
}

} // namespace kagent
