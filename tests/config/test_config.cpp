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
  EXPECT_NE(e.find("'num_workers' must be an integer"), std::string::npos) << e;
  auto b = error_of("high_reasoning_effort: maybe\n");
  EXPECT_NE(b.find("'high_reasoning_effort' must be true or false"), std::string::npos) << b;
  auto l = error_of("openai_model: [a, b]\n");
  EXPECT_NE(l.find("'openai_model' must be a string, got a list"), std::string::npos) << l;
  auto f = error_of("max_rounds: 1.5\n");
  EXPECT_NE(f.find("'max_rounds' must be an integer"), std::string::npos) << f;
}

TEST(Config, OutOfRangeAndBadChoicesAreRejected) {
  EXPECT_NE(error_of("num_workers: 0\n").find("'num_workers' must be >= 1"), std::string::npos);
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
