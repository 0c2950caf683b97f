#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platform/config/config.hpp"

using namespace kagent;
namespace fs = std::filesystem;

namespace {
std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "cfg.yaml");
  } catch (const user_error& e) {
    return e.what();
  }
  return "";
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() / ("kagent_cfg_" + std::to_string(::getpid()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};
const std::string builtin = std::string{KAGENT_SOURCE_DIR} + "/configs";
} // namespace

TEST(Config, DefaultsFollowSpecWhenKeysAreAbsent) {
  auto c = parse_config("strategy: beam_search\n", "x.yaml");
  EXPECT_EQ(c.num_workers, 4);
  EXPECT_EQ(c.max_rounds, 10);
  EXPECT_EQ(c.strategy_cfg.num_top_kernels, 2);
  EXPECT_EQ(c.strategy_cfg.num_bottlenecks, 2);
  EXPECT_EQ(c.strategy_cfg.max_no_improvement, 5);
  EXPECT_DOUBLE_EQ(c.benchmark_warmup, 25);
  EXPECT_DOUBLE_EQ(c.benchmark_repeat, 100);
  EXPECT_DOUBLE_EQ(c.divergence_threshold, 50.0);
  EXPECT_FALSE(c.test_timeout_s.has_value());  // resolved per platform later (SPEC §14 A.39)
  EXPECT_FALSE(c.platform.given);
  EXPECT_EQ(c.llm.max_tokens, 24576);
}

TEST(Config, UnknownKeyNamesFileLineAndKey) {
  auto e = error_of("strategy: greedy\nnum_wokers: 3\n");
  EXPECT_NE(e.find("cfg.yaml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'num_wokers'"), std::string::npos) << e;
}

TEST(Config, UnknownNestedKeyNamesSection) {
  auto e = error_of("strategy_config:\n  num_top_kernels: 2\n  num_botlenecks: 2\n");
  EXPECT_NE(e.find("cfg.yaml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("'num_botlenecks' in 'strategy_config'"), std::string::npos) << e;
}

TEST(Config, WrongTypeNamesKeyLineAndExpectedType) {
  auto e = error_of("strategy: greedy\nnum_workers: four\n");
  EXPECT_NE(e.find("cfg.yaml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("'num_workers' must be 'auto' or an integer from 1 to 1024, got 'four'"), std::string::npos) << e;
  auto b = error_of("high_reasoning_effort: maybe\n");
  EXPECT_NE(b.find("'high_reasoning_effort' must be true or false"), std::string::npos) << b;
  auto l = error_of("openai_model: [a, b]\n");
  EXPECT_NE(l.find("'openai_model' must be a string, got a list"), std::string::npos) << l;
  auto f = error_of("max_rounds: 1.5\n");
  EXPECT_NE(f.find("'max_rounds' must be an integer"), std::string::npos) << f;
}

TEST(Config, NumWorkersIsAutoByDefaultAFixedCountWhenGivenAndRoundTrips) {
  auto d = parse_config("strategy: beam_search\n", "x.yaml");
  EXPECT_TRUE(d.num_workers_auto);
  EXPECT_EQ(d.num_workers, 4);  // auto's floor
  EXPECT_FALSE(d.llm.max_concurrency_set);
  auto a = parse_config("num_workers: auto\n", "x.yaml");
  EXPECT_TRUE(a.num_workers_auto);
  auto f = parse_config("num_workers: 3\nllm: {max_concurrency: 2}\n", "x.yaml");
  EXPECT_FALSE(f.num_workers_auto);
  EXPECT_EQ(f.num_workers, 3);
  EXPECT_TRUE(f.llm.max_concurrency_set);
  for (const auto& c : {d, f}) {
    auto back = parse_config(to_yaml(c), "back.yaml");
    EXPECT_EQ(back.num_workers_auto, c.num_workers_auto);
    EXPECT_EQ(back.num_workers, c.num_workers);
    EXPECT_EQ(back.llm.max_concurrency_set, c.llm.max_concurrency_set);
    EXPECT_EQ(back.llm.max_concurrency, c.llm.max_concurrency);
  }
  EXPECT_NE(to_yaml(d).find("num_workers: auto"), std::string::npos);
}

TEST(Config, OutOfRangeAndBadChoicesAreRejected) {
  EXPECT_NE(error_of("num_workers: 0\n").find("'num_workers' must be an integer from 1 to 1024"), std::string::npos);
  EXPECT_NE(error_of("strategy: beam\n").find("expected one of: beam_search, greedy"), std::string::npos);
  EXPECT_NE(error_of("platform: cuda\n").find("expected one of: nvidia, rocm, noop, cpu"), std::string::npos);
  EXPECT_NE(error_of("strategy_config: {schedule: later}\n").find("rounds, async"), std::string::npos);
  EXPECT_NE(error_of("gpu_ids: [0, x]\n").find("'gpu_ids' must hold integers"), std::string::npos);
  EXPECT_NE(error_of("gpu_ids: 3\n").find("'gpu_ids' must be a list"), std::string::npos);
}

TEST(Config, BrokenSyntaxNamesFileAndLine) {
  auto e = error_of("strategy: greedy\nstrategy_config: {a: [1, 2\nmax_rounds: 3\n");
  EXPECT_NE(e.find("cfg.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("YAML syntax error"), std::string::npos) << e;
  auto t = error_of("strategy: greedy\n\tmax_rounds: 3\n");
  EXPECT_NE(t.find("YAML syntax error"), std::string::npos) << t;
}

TEST(Config, DuplicateKeyIsAnError) {
  auto e = error_of("max_rounds: 3\nmax_rounds: 4\n");
  EXPECT_NE(e.find("duplicate key 'max_rounds'"), std::string::npos) << e;
}

TEST(Config, TopLevelMustBeAMapping) {
  EXPECT_NE(error_of("- a\n- b\n").find("top level must be a mapping"), std::string::npos);
}

TEST(Config, PlatformStringAppliesToEveryComponent) {
  auto c = parse_config("platform: rocm\n", "x");
  EXPECT_TRUE(c.platform.given);
  EXPECT_FALSE(c.platform.is_map);
  for (const auto& n : platform_spec::component_names()) EXPECT_EQ(c.platform.component(n), "rocm");
  EXPECT_EQ(c.platform.vendor(), "rocm");
}

TEST(Config, PlatformMapKeepsEachComponentAndDefault) {
  auto c = parse_config("platform: {default: cpu, profiler: rocm, roofline_analyzer: rocm}\n", "x");
  EXPECT_TRUE(c.platform.is_map);
  EXPECT_EQ(c.platform.verifier, "cpu");
  EXPECT_EQ(c.platform.profiler, "rocm");
  EXPECT_EQ(c.platform.roofline_analyzer, "rocm");
  EXPECT_EQ(c.platform.uniform(), "mixed");
  EXPECT_EQ(c.platform.vendor(), "");  // the worker runner is cpu: no GPU needed
  EXPECT_NE(error_of("platform: {verifier: rocm, profilr: rocm}\n").find("unknown key 'profilr' in 'platform'"),
            std::string::npos);
}

TEST(Config, PlatformKwargsCarryProfilerBinaries) {
  auto c = parse_config("platform_kwargs: {rocprof_bin_path: /opt/r/rocprofv3}\nncu_bin_path: /x/ncu\n", "x");
  EXPECT_EQ(c.pkwargs.rocprof_bin_path, "/opt/r/rocprofv3");
  EXPECT_EQ(c.pkwargs.ncu_bin_path, "/x/ncu");
}

TEST(Config, RooflineConfigAcceptsAMapping) {  // SPEC §14 B.102
  auto c = parse_config("roofline_config: {sol_threshold_pct: 80, early_stop: false}\n", "x");
  EXPECT_DOUBLE_EQ(c.roofline.sol_threshold_pct, 80);
  ASSERT_TRUE(c.roofline.early_stop.has_value());
  EXPECT_FALSE(*c.roofline.early_stop);
}

TEST(Config, LlmBlockIsTypedIncludingPrices) {
  auto c = parse_config(
      "llm:\n  provider: openai_compatible\n  base_url: http://127.0.0.1:8000/v1\n  model: qwen\n"
      "  prices: {qwen: {input: 0.1, output: 0.2}}\n",
      "x");
  EXPECT_EQ(c.llm.provider, "openai_compatible");
  EXPECT_EQ(c.llm.prices.at("qwen").second, 0.2);
  EXPECT_NE(error_of("llm: {provider: bedrock}\n").find("'llm.provider'"), std::string::npos);
}

TEST(Config, ResolvedConfigRoundTripsThroughYaml) {
  auto c = parse_config(
      "strategy: greedy\nplatform: {default: cpu, profiler: nvidia}\ngpu_ids: [1, 3]\ntest_timeout_s: 45\n"
      "llm: {provider: replay}\nroofline_config: {early_stop: true}\n",
      "x");
  auto again = parse_config(to_yaml(c), "round-trip");
  EXPECT_EQ(again.strategy, "greedy");
  EXPECT_EQ(again.platform.profiler, "nvidia");
  EXPECT_EQ(again.platform.verifier, "cpu");
  EXPECT_EQ(again.gpu_ids, (std::vector<int>{1, 3}));
  EXPECT_EQ(*again.test_timeout_s, 45);
  EXPECT_EQ(again.llm.provider, "replay");
  EXPECT_TRUE(*again.roofline.early_stop);
}

TEST(Config, EveryShippedConfigLoads) {
  auto all = discover_strategies({builtin});
  for (const char* n : {"amd", "nvidia", "noop", "beam_search", "greedy", "cpu"}) {
    ASSERT_EQ(all.count(n), 1u) << n;
    auto c = load_config_file(all[n]);
    EXPECT_EQ(c.name, n);
  }
  EXPECT_EQ(load_config_file(all["amd"]).platform.vendor(), "rocm");
  EXPECT_EQ(load_config_file(all["amd"]).target_platform, "rocm");
  EXPECT_EQ(load_config_file(all["noop"]).platform.uniform(), "noop");
  EXPECT_EQ(load_config_file(all["nvidia"]).platform.vendor(), "nvidia");
}

TEST(Config, UserDirectoryAddsAndShadowsStrategies) {
  temp_dir d;
  d.write("mine.yaml", "strategy: greedy\nplatform: noop\n");
  d.write("noop.yaml", "strategy: beam_search\nplatform: noop\n");
  auto all = discover_strategies({d.path.string(), builtin});
  EXPECT_EQ(all.count("mine"), 1u);
  EXPECT_EQ(load_strategy("noop", {d.path.string(), builtin}).strategy, "beam_search");
  EXPECT_EQ(load_strategy("amd", {d.path.string(), builtin}).name, "amd");
}

TEST(Config, UnknownStrategyListsKnownOnes) {
  try {
    load_strategy("fastest", {builtin});
    FAIL();
  } catch (const user_error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown strategy 'fastest'"), std::string::npos);
    EXPECT_NE(m.find("amd"), std::string::npos);
    EXPECT_NE(m.find("noop"), std::string::npos);
  }
}

TEST(Config, FileErrorsNameThePath) {
  temp_dir d;
  auto p = d.write("bad.yaml", "strategy: greedy\nmax_rounds: lots\n");
  try {
    load_config_file(p);
    FAIL();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find(p + ":2:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_config_file((d.path / "missing.yaml").string()), user_error);
}

TEST(Config, TemplatePathsAreRelativeToTheYaml) {
  temp_dir d;
  auto p = d.write("t.yaml", "templates: {kernel_optimization: my/opt.mustache}\n");
  auto c = load_config_file(p);
  EXPECT_EQ(c.templates.at("kernel_optimization"), (d.path / "my/opt.mustache").string());
}

// ---------------------------------------------------------------------------------------------
// Containment: numbers that make no sense are refused at load time, naming the key and its range.

namespace {
// The error for `yaml`, which must name `key` and come with the file and line.
void expect_refused(const std::string& yaml, const std::string& key, int line = 1) {
  const auto e = error_of(yaml);
  EXPECT_NE(e.find("cfg.yaml:" + std::to_string(line) + ":"), std::string::npos) << yaml << " -> " << e;
  EXPECT_NE(e.find("'" + key + "'"), std::string::npos) << yaml << " -> " << e;
}
} // namespace

TEST(ConfigLimits, NonFiniteNumbersAreRefused) {
  // Today's failures: a run that "succeeds" with every candidate failed, a test that never times out.
  for (const char* v : {".nan", ".NaN", ".inf", "-.inf", "1e308"}) {
    expect_refused(std::string("candidate_timeout_s: ") + v + "\n", "candidate_timeout_s");
    expect_refused(std::string("test_timeout_s: ") + v + "\n", "test_timeout_s");
    expect_refused(std::string("rtol: ") + v + "\n", "rtol");
    expect_refused(std::string("atol: ") + v + "\n", "atol");
  }
  const auto e = error_of("candidate_timeout_s: .nan\n");
  EXPECT_NE(e.find("must be a finite number from 1 to 604800, got .nan"), std::string::npos) << e;
}

TEST(ConfigLimits, EveryNumericKeyHasAnUpperBound) {
  const std::vector<std::pair<std::string, std::string>> absurd{
      {"num_workers: 5000\n", "num_workers"},
      {"max_rounds: 1000000\n", "max_rounds"},
      {"strategy_config: {num_top_kernels: 100}\n", "strategy_config.num_top_kernels"},
      {"strategy_config: {num_bottlenecks: 100000}\n", "strategy_config.num_bottlenecks"},
      {"strategy_config: {samples_per_prompt: 1000}\n", "strategy_config.samples_per_prompt"},
      {"strategy_config: {num_expanding_parents: 1000}\n", "strategy_config.num_expanding_parents"},
      {"strategy_config: {max_no_improvement: 100000}\n", "strategy_config.max_no_improvement"},
      {"benchmark_warmup: 1e9\n", "benchmark_warmup"},
      {"benchmark_repeat: 1e9\n", "benchmark_repeat"},
      {"divergence_threshold: 1e9\n", "divergence_threshold"},
      {"roofline_config: {sol_threshold_pct: 150}\n", "roofline_config.sol_threshold_pct"},
      {"roofline_config: {underutilized_threshold_pct: 101}\n", "roofline_config.underutilized_threshold_pct"},
      {"roofline_config: {convergence_rounds: 100000}\n", "roofline_config.convergence_rounds"},
      {"roofline_config: {convergence_threshold_pct: 1000}\n", "roofline_config.convergence_threshold_pct"},
      {"test_timeout_s: 604801\n", "test_timeout_s"},
      {"benchmark_timeout_s: 1e7\n", "benchmark_timeout_s"},
      {"candidate_timeout_s: 1e308\n", "candidate_timeout_s"},
      {"profile_budget_s: 1e9\n", "profile_budget_s"},
      {"user_test_timeout_s: .inf\n", "user_test_timeout_s"},
      {"max_refine_attempts: 1000\n", "max_refine_attempts"},
      {"tune_variants: 1000\n", "tune_variants"},
      {"tune_variants: -1\n", "tune_variants"},
      {"rtol: 100\n", "rtol"},
      {"atol: 1e9\n", "atol"},
      {"rtol: -0.1\n", "rtol"},
      {"sandbox: {memory_mb: 1e12}\n", "sandbox.memory_mb"},
      {"sandbox: {max_processes: 100000000}\n", "sandbox.max_processes"},
      {"sandbox: {max_file_mb: 1e12}\n", "sandbox.max_file_mb"},
      {"sandbox: {max_cpu_s: .inf}\n", "sandbox.max_cpu_s"},
      {"sandbox: {max_cpu_s: -1}\n", "sandbox.max_cpu_s"},
      {"max_kernel_bytes: 100\n", "max_kernel_bytes"},
      {"max_kernel_bytes: 1000000000\n", "max_kernel_bytes"},
      {"llm: {max_tokens: 100000000}\n", "llm.max_tokens"},
      {"llm: {max_concurrency: 100000}\n", "llm.max_concurrency"},
      {"llm: {requests_per_minute: 2000000000}\n", "llm.requests_per_minute"},
      {"llm: {max_retries: 1000}\n", "llm.max_retries"},
      {"llm: {timeout_s: 1e9}\n", "llm.timeout_s"},
      {"llm: {connect_timeout_s: .nan}\n", "llm.connect_timeout_s"},
      {"llm: {idle_timeout_s: .inf}\n", "llm.idle_timeout_s"},
      {"llm: {budget_usd: 1e12}\n", "llm.budget_usd"},
      {"llm: {call_budget_usd: .nan}\n", "llm.call_budget_usd"},
      {"llm: {max_reply_bytes: 10}\n", "llm.max_reply_bytes"},
      {"llm: {max_reply_bytes: 1000000000}\n", "llm.max_reply_bytes"},
      {"llm: {prices: {m: {input: 1e9, output: 1}}}\n", "llm.prices.m.input"},
      {"llm: {prices: {m: {input: 1, output: .nan}}}\n", "llm.prices.m.output"},
  };
  for (const auto& [yaml, key] : absurd) expect_refused(yaml, key);
  // An integer too large for its type is a type error, still naming the key.
  expect_refused("num_workers: 99999999999999\n", "num_workers");
}

TEST(ConfigLimits, TheBoundsThemselvesAreAccepted) {
  auto c = parse_config(
      "num_workers: 1024\nmax_rounds: 10000\nbenchmark_warmup: 10000\nbenchmark_repeat: 10000\n"
      "candidate_timeout_s: 604800\ntest_timeout_s: 604800\nuser_test_timeout_s: 604800\nrtol: 0\natol: 0\n"
      "roofline_config: {sol_threshold_pct: 100, underutilized_threshold_pct: 0}\nmax_kernel_bytes: 1024\n"
      "strategy_config: {num_top_kernels: 8, num_bottlenecks: 32}\nllm: {max_reply_bytes: 67108864}\n",
      "x");
  EXPECT_EQ(c.num_workers, 1024);
  EXPECT_DOUBLE_EQ(c.candidate_timeout_s, 604800);
  EXPECT_EQ(*c.rtol, 0);
  EXPECT_EQ(c.max_kernel_bytes, 1024);
  EXPECT_EQ(c.llm.max_reply_bytes, 64 * 1024 * 1024);
}

TEST(ConfigLimits, PlannedCandidatesPerRoundAreBounded) {
  // 32 x 32 = 1024 LLM calls a round: each key is within its own bound, the product is not.
  auto e = error_of("strategy_config:\n  num_top_kernels: 32\n  num_bottlenecks: 32\n");
  EXPECT_NE(e.find("cfg.yaml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("plans 1024 candidates per round"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 256"), std::string::npos) << e;
  // Models and samples multiply too; expanding parents below num_top_kernels divide.
  EXPECT_NE(error_of("strategy_config: {num_bottlenecks: 8, samples_per_prompt: 8, models: [a, b, c, d, e]}\n")
                .find("plans 640 candidates"),
            std::string::npos);
  EXPECT_NO_THROW(parse_config("strategy_config: {num_top_kernels: 32, num_bottlenecks: 32, num_expanding_parents: 8}\n",
                               "x"));
  // Greedy expands one candidate a round whatever the fan-out keys say.
  EXPECT_NO_THROW(parse_config("strategy: greedy\nstrategy_config: {num_top_kernels: 32, num_bottlenecks: 32}\n", "x"));
  std::string many = "strategy_config:\n  models: [";
  for (int i = 0; i < 33; ++i) many += (i ? ", m" : "m") + std::to_string(i);
  expect_refused(many + "]\n", "strategy_config.models", 2);
}

TEST(ConfigLimits, DuplicateGpuIdsAreRefused) {
  auto e = error_of("gpu_ids: [0, 1, 0]\n");
  EXPECT_NE(e.find("cfg.yaml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("lists device 0 twice"), std::string::npos) << e;
}

TEST(ConfigLimits, AnEmptyConfigIsRefused) {
  for (const char* text : {"", "\n\n", "# nothing but a comment\n", "~\n"}) {
    const auto e = error_of(text);
    EXPECT_NE(e.find("cfg.yaml"), std::string::npos) << e;
    EXPECT_NE(e.find("the strategy config is empty"), std::string::npos) << "'" << text << "' -> " << e;
  }
  temp_dir d;
  auto p = d.write("empty.yaml", "");
  try {
    load_config_file(p);
    FAIL() << "an empty file loaded";
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find(p + ": the strategy config is empty"), std::string::npos) << e.what();
  }
}

TEST(ConfigLimits, AConfigPathThatIsADirectoryIsRefused) {
  temp_dir d;
  fs::create_directories(d.path / "dir.yaml");
  const auto p = (d.path / "dir.yaml").string();
  for (auto load : {+[](const std::string& x) { load_config_file(x); },
                    +[](const std::string& x) { load_strategy(x, {}); }}) {
    try {
      load(p);
      FAIL() << "a directory loaded as a config";
    } catch (const user_error& e) {
      EXPECT_EQ(std::string(e.what()), p + ": is a directory; expected a strategy YAML file");
    }
  }
  // A directory named like a strategy in a config dir is not a strategy.
  EXPECT_EQ(discover_strategies({d.path.string()}).count("dir"), 0u);
}

TEST(ConfigLimits, SizeBoundsHaveDefaultsAndRoundTrip) {
  auto c = parse_config("strategy: greedy\n", "x");
  EXPECT_EQ(c.max_kernel_bytes, 256 * 1024);
  EXPECT_EQ(c.llm.max_reply_bytes, 1024 * 1024);
  auto d = parse_config("max_kernel_bytes: 4096\nllm: {max_reply_bytes: 8192}\n", "x");
  auto again = parse_config(to_yaml(d), "round-trip");
  EXPECT_EQ(again.max_kernel_bytes, 4096);
  EXPECT_EQ(again.llm.max_reply_bytes, 8192);
}

TEST(ConfigLimits, SandboxModesAndCpuBoundRoundTrip) {
  auto c = parse_config("sandbox: {mode: rlimits, max_cpu_s: 120}\n", "x");  // every mode the docs name
  EXPECT_EQ(c.sandbox.mode, "rlimits");
  EXPECT_DOUBLE_EQ(c.sandbox.max_cpu_s, 120);
  auto again = parse_config(to_yaml(c), "round-trip");
  EXPECT_EQ(again.sandbox.mode, "rlimits");
  EXPECT_DOUBLE_EQ(again.sandbox.max_cpu_s, 120);
  EXPECT_DOUBLE_EQ(parse_config("strategy: greedy\n", "x").sandbox.max_cpu_s, 0);
  EXPECT_THROW(parse_config("sandbox: {mode: docker}\n", "x"), user_error);
}

TEST(ConfigLimits, ProfilePolicyDefaultsToParentsAndRoundTrips) {
  EXPECT_EQ(parse_config("strategy: greedy\n", "x").profile, "parents");
  for (const char* p : {"parents", "every", "never"}) {
    auto c = parse_config(std::string("profile: ") + p + "\n", "x");
    EXPECT_EQ(c.profile, p);
    EXPECT_EQ(parse_config(to_yaml(c), "round-trip").profile, p);
  }
  EXPECT_NE(error_of("profile: all\n").find("expected one of: parents, every, never"), std::string::npos);
  EXPECT_NE(error_of("profile: all\n").find("'profile'"), std::string::npos);
}

TEST(ConfigLimits, TuneVariantsAreOffByDefaultAndRoundTrip) {
  EXPECT_EQ(parse_config("strategy: greedy\n", "x").tune_variants, 0);
  auto c = parse_config("tune_variants: 12\n", "x");
  EXPECT_EQ(c.tune_variants, 12);
  EXPECT_EQ(parse_config(to_yaml(c), "round-trip").tune_variants, 12);
  EXPECT_NE(error_of("tune_variants: lots\n").find("tune_variants"), std::string::npos);
}

TEST(Config, ModelsMayNameTheirOwnProviderEndpointAndKeyAndRoundTrip) {
  auto c = parse_config("strategy: beam_search\nstrategy_config:\n  models:\n    - claude-opus-4-6\n"
                        "    - {model: gpt-5, provider: openai, api_key_env: MY_OPENAI}\n"
                        "    - {model: local-qwen, provider: openai_compatible, base_url: 'http://gpu7:8000/v1'}\n",
                        "x.yaml");
  ASSERT_EQ(c.strategy_cfg.models, (std::vector<std::string>{"claude-opus-4-6", "gpt-5", "local-qwen"}));
  EXPECT_EQ(c.strategy_cfg.model_endpoints.count("claude-opus-4-6"), 0u);
  EXPECT_EQ(c.strategy_cfg.model_endpoints.at("gpt-5").provider, "openai");
  EXPECT_EQ(c.strategy_cfg.model_endpoints.at("gpt-5").api_key_env, "MY_OPENAI");
  EXPECT_EQ(c.strategy_cfg.model_endpoints.at("local-qwen").base_url, "http://gpu7:8000/v1");
  auto back = parse_config(to_yaml(c), "back.yaml");  // config.yaml of a run, read again by --resume
  EXPECT_EQ(back.strategy_cfg.models, c.strategy_cfg.models);
  EXPECT_EQ(back.strategy_cfg.model_endpoints.at("local-qwen").provider, "openai_compatible");
  EXPECT_EQ(back.strategy_cfg.model_endpoints.at("gpt-5").api_key_env, "MY_OPENAI");
  // Mistakes name the entry.
  EXPECT_NE(error_of("strategy_config:\n  models:\n    - {provider: openai}\n").find("needs 'model'"), std::string::npos);
  EXPECT_NE(error_of("strategy_config:\n  models:\n    - {model: a, provder: openai}\n").find("unknown key 'provder'"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_config:\n  models:\n    - {model: a, provider: bedrock}\n").find("provider"),
            std::string::npos);
  EXPECT_NE(error_of("strategy_config:\n  models:\n    - [a, b]\n").find("list of model names or of maps"),
            std::string::npos);
}

TEST(Config, CompileReferenceIsOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(parse_config("strategy: beam_search\n", "x.yaml").compile_reference);
  EXPECT_FALSE(parse_config("compile_reference: false\n", "x.yaml").compile_reference);
  auto e = error_of("compile_reference: sometimes\n");
  EXPECT_NE(e.find("'compile_reference' must be true or false"), std::string::npos) << e;
}

TEST(Config, NodesLocalDevicesAndNodeTlsRoundTripAndTlsComesWhole) {
  auto c = parse_config("nodes: [gpu-node-1:7420, gpu-node-2:7420]\nlocal_devices: false\nnode_tls:\n"
                        "  certificate: /pki/m.pem\n  key: /pki/m.key\n  cafile: /pki/ca.pem\n",
                        "x.yaml");
  EXPECT_EQ(c.nodes, (std::vector<std::string>{"gpu-node-1:7420", "gpu-node-2:7420"}));
  EXPECT_FALSE(c.local_devices);
  EXPECT_TRUE(c.node_tls.enabled());
  auto back = parse_config(to_yaml(c), "again.yaml");  // what a resumed run and a node read
  EXPECT_EQ(back.nodes, c.nodes);
  EXPECT_FALSE(back.local_devices);
  EXPECT_EQ(back.node_tls.cafile, "/pki/ca.pem");
  EXPECT_FALSE(parse_config("strategy: greedy\n", "x.yaml").node_tls.enabled()) << "none by default";
  EXPECT_TRUE(parse_config("strategy: greedy\n", "x.yaml").local_devices);
  auto e = error_of("node_tls:\n  certificate: /pki/m.pem\n");
  EXPECT_NE(e.find("node_tls needs certificate, key and cafile together"), std::string::npos) << e;
  e = error_of("node_tls:\n  cert: /pki/m.pem\n");
  EXPECT_NE(e.find("cert"), std::string::npos) << e;
}
