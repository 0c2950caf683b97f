// Prompt rendering: platform guidance, the optimization and refinement prompts, overrides.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "platform/common/errors.hpp"
#include "platform/gpu/specs.hpp"
#include "platform/prompt/format.hpp"
#include "platform/prompt/prompt.hpp"
#include "tests/prompt/prompt_test_util.hpp"

using namespace kagent;
using kagent::test::count_of;
using kagent::test::root;
using kagent::test::temp_file;
using nlohmann::json;

namespace {

const std::string kernel = "import triton\n@triton.jit\ndef k(x_ptr):\n    pass\n\ndef kernel_function(x):\n    return x\n";

optimization_prompt_input opt_input(const std::string& platform, const std::string& gpu) {
  optimization_prompt_input in;
  in.kernel_code = kernel;
  in.platform = platform;
  in.gpu_name = gpu;
  in.problem_code = "class Model:\n    pass\n";
  in.eager_ms = 2.0;
  in.current_best_ms = 1.0;
  return in;
}

json attempt(int round, bool passed, double before, double after) {
  return {{"round_num", round},
          {"worker_id", 0},
          {"bottleneck_category", "memory"},
          {"root_cause", "cause-r" + std::to_string(round)},
          {"recommended_fix", "fix-r" + std::to_string(round)},
          {"config_changes", json::object()},
          {"time_before_ms", before},
          {"time_after_ms", after},
          {"improvement_pct", 100.0 * (before - after) / before},
          {"is_improvement", after < before},
          {"compute_sol_pct", 10.0},
          {"memory_sol_pct", 60.0},
          {"combined_sol_pct", 60.0},
          {"passed_verification", passed},
          {"error_message", passed ? "" : "boom-r" + std::to_string(round)}};
}

json reflexion(int round) {
  const std::string r = std::to_string(round);
  return {{"round_num", round},
          {"root_cause_diagnosed", "diag-r" + r},
          {"fix_applied", "applied-r" + r},
          {"expected_outcome", "faster"},
          {"actual_outcome", "slower"},
          {"performance_delta_pct", -3.5},
          {"was_diagnosis_correct", false},
          {"was_fix_effective", false},
          {"reasoning", "analysis-r" + r},
          {"lessons", {"lesson-r" + r}},
          {"avoid_patterns", {"avoid-r" + r}},
          {"try_patterns", {"try-r" + r}}};
}

/// Every AMD spec row's CU count and bandwidth, as printed in prompts.
std::vector<std::string> amd_sku_numbers() {
  std::vector<std::string> out;
  for (const auto& name : known_gpu_names()) {
    auto s = find_gpu_specs(name);
    if (!s || s->vendor != "amd") continue;
    out.push_back(std::to_string(s->sm_count));
    out.push_back(promptfmt::plain(s->peak_memory_bw_gbps));
  }
  return out;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// platform guidance and Triton guidelines

TEST(PlatformGuidance, RocmStatesTheRestrictionsAndThatTheyWin) {
  const std::string g = platform_guidance("rocm", {}, root());
  EXPECT_NE(g.find("wavefront has 64 lanes"), std::string::npos) << g;
  EXPECT_NE(g.find("multiple of 64"), std::string::npos);
  EXPECT_NE(g.find("tensor descriptors"), std::string::npos);
  EXPECT_NE(g.find("TMA"), std::string::npos);
  EXPECT_NE(g.find("warp_specialize"), std::string::npos);
  EXPECT_NE(g.find("take precedence over the general Triton guidelines"), std::string::npos);
  EXPECT_NE(g.find("compute units (CUs)"), std::string::npos);
  // The one-argument form uses the same built-in template.
  EXPECT_EQ(platform_guidance("rocm"), g);
  EXPECT_EQ(platform_guidance("amd", {}, root()), g);
}

TEST(PlatformGuidance, EmptyOnCudaAndXpuShortNoteOnCpu) {
  EXPECT_EQ(platform_guidance("cuda", {}, root()), "");
  EXPECT_EQ(platform_guidance("nvidia", {}, root()), "");
  EXPECT_EQ(platform_guidance("xpu", {}, root()), "");
  EXPECT_EQ(platform_guidance("noop", {}, root()), "");
  const std::string cpu = platform_guidance("cpu", {}, root());
  EXPECT_NE(cpu.find("interpreter"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("CPU tensors"), std::string::npos);
  EXPECT_EQ(cpu.find("wavefront"), std::string::npos);
}

TEST(PlatformGuidance, RocmGuidanceAndGuidelinesHaveNoSkuNumbers) {
  const std::string g = platform_guidance("rocm", {}, root());
  const std::string tg = render_prompt("triton_guidelines", {{"rocm", true}}, {}, root());
  for (const auto& n : amd_sku_numbers()) {
    EXPECT_EQ(g.find(n), std::string::npos) << "guidance quotes " << n;
    EXPECT_EQ(tg.find(n), std::string::npos) << "guidelines quote " << n;
  }
  EXPECT_EQ(g.find("MI3"), std::string::npos);
  EXPECT_EQ(g.find("MI2"), std::string::npos);
}

TEST(TritonGuidelines, RocmVersionDropsTmaAndWarpSpecialize) {
  const std::string rocm = render_prompt("triton_guidelines", {{"rocm", true}}, {}, root());
  const std::string cuda = render_prompt("triton_guidelines", {{"rocm", false}}, {}, root());
  for (const char* w : {"TMA", "warp_specialize", "tensor descriptor"}) {
    EXPECT_EQ(rocm.find(w), std::string::npos) << w;
    EXPECT_NE(cuda.find(w), std::string::npos) << w;
  }
  EXPECT_NE(rocm.find("platform rules for this GPU take precedence"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// kernel_optimization

TEST(OptimizationPrompt, Mi300xUsesCuLabelsAndNumbersOnlyFromTheSpecRow) {
  const std::string p = render_optimization_prompt(opt_input("rocm", "AMD Instinct MI300X"), {}, root());
  auto row = find_gpu_specs("AMD Instinct MI300X");
  ASSERT_TRUE(row);
  const std::string cus = std::to_string(row->sm_count);
  EXPECT_NE(p.find("- CU Count: " + cus), std::string::npos) << p;
  EXPECT_NE(p.find("Max Threads per CU"), std::string::npos);
  EXPECT_NE(p.find("L1 Cache per CU"), std::string::npos);
  EXPECT_NE(p.find("Wavefront Size: 64"), std::string::npos);
  EXPECT_EQ(p.find("SM Count"), std::string::npos);
  EXPECT_EQ(p.find("per SM"), std::string::npos);
  // The CU count appears once: in the line that comes from the spec row.
  EXPECT_EQ(count_of(p, cus), 1u) << p;
  EXPECT_EQ(count_of(p, promptfmt::plain(row->peak_memory_bw_gbps)), 1u);
  // Other SKUs' numbers never appear.
  EXPECT_EQ(p.find("256 CU"), std::string::npos);
}

TEST(OptimizationPrompt, NvidiaUsesSmLabelsAndNoGuidance) {
  const std::string p = render_optimization_prompt(opt_input("cuda", "NVIDIA H200"), {}, root());
  auto row = find_gpu_specs("NVIDIA H200");
  ASSERT_TRUE(row);
  EXPECT_NE(p.find("- SM Count: " + std::to_string(row->sm_count)), std::string::npos) << p;
  EXPECT_NE(p.find("Max Threads per SM"), std::string::npos);
  EXPECT_EQ(p.find("CU Count"), std::string::npos);
  EXPECT_EQ(p.find("PLATFORM RULES"), std::string::npos);
  EXPECT_EQ(p.find("wavefront"), std::string::npos);
}

TEST(OptimizationPrompt, RocmGuidanceIsIncludedAndStatedToWin) {
  const std::string p = render_optimization_prompt(opt_input("rocm", "AMD Instinct MI350X"), {}, root());
  EXPECT_NE(p.find(platform_guidance("rocm", {}, root())), std::string::npos) << p;
  // Only the guidance mentions TMA / warp_specialize, to forbid them.
  EXPECT_EQ(count_of(p, "warp_specialize"), 1u);
}

TEST(OptimizationPrompt, UnknownGpuLeavesOutTheSpecsSection) {
  const std::string p = render_optimization_prompt(opt_input("cuda", "NVIDIA Imaginary 9000"), {}, root());
  EXPECT_EQ(p.find("TARGET GPU"), std::string::npos);
  const std::string q = render_optimization_prompt(opt_input("cuda", ""), {}, root());
  EXPECT_EQ(q.find("TARGET GPU"), std::string::npos);
  EXPECT_NE(q.find("CURRENT KERNEL"), std::string::npos);
}

TEST(OptimizationPrompt, TargetUsesBestThenEagerAndIsGuardedWhenBothAreUnknown) {
  auto in = opt_input("cuda", "NVIDIA H200");
  in.current_best_ms = 2.0;
  in.eager_ms = 5.0;
  std::string p = render_optimization_prompt(in, {}, root());
  EXPECT_NE(p.find("Aim for under 1.8000 ms"), std::string::npos) << p;
  EXPECT_NE(p.find("the best kernel so far (2.0000 ms)"), std::string::npos);

  in.current_best_ms = -1;
  p = render_optimization_prompt(in, {}, root());
  EXPECT_NE(p.find("Aim for under 4.5000 ms"), std::string::npos) << p;
  EXPECT_NE(p.find("PyTorch eager (5.0000 ms)"), std::string::npos);

  for (double unknown : {-1.0, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 0.0}) {
    in.current_best_ms = unknown;
    in.eager_ms = unknown;
    p = render_optimization_prompt(in, {}, root());
    EXPECT_NE(p.find("PERFORMANCE TARGET"), std::string::npos);
    EXPECT_NE(p.find("No reference time is known yet"), std::string::npos) << p;
    EXPECT_EQ(p.find("Aim for under"), std::string::npos);
    EXPECT_EQ(p.find("inf"), std::string::npos);
    EXPECT_EQ(p.find("nan"), std::string::npos);
    EXPECT_EQ(p.find("PyTorch eager time for this problem"), std::string::npos);
  }
}

TEST(OptimizationPrompt, ShowsOnlyTheLastFiveAttemptsAndReflexions) {
  auto in = opt_input("cuda", "NVIDIA H200");
  in.attempts = json::array();
  in.reflexions = json::array();
  for (int r = 1; r <= 7; ++r) {
    in.attempts.push_back(attempt(r, true, 2.0, 1.5));
    in.reflexions.push_back(reflexion(r));
  }
  const std::string p = render_optimization_prompt(in, {}, root());
  for (int r = 1; r <= 7; ++r) {
    const std::string s = std::to_string(r);
    const bool shown = r >= 3;
    EXPECT_EQ(p.find("cause-r" + s) != std::string::npos, shown) << r;
    EXPECT_EQ(p.find("diag-r" + s) != std::string::npos, shown) << r;
    EXPECT_EQ(p.find("lesson-r" + s) != std::string::npos, shown) << r;
    EXPECT_EQ(p.find("avoid-r" + s) != std::string::npos, shown) << r;
    EXPECT_EQ(p.find("try-r" + s) != std::string::npos, shown) << r;
  }
  EXPECT_NE(p.find("RECENT OPTIMIZATION ATTEMPTS"), std::string::npos);
  EXPECT_NE(p.find("SELF-REFLECTION"), std::string::npos);
  EXPECT_NE(p.find("AVOID:"), std::string::npos);
  EXPECT_NE(p.find("PRIORITIZE:"), std::string::npos);
  // Oldest shown first.
  EXPECT_LT(p.find("cause-r3"), p.find("cause-r7"));
}

TEST(OptimizationPrompt, AttemptLinesCarryStatusChangeConfigAndErrors) {
  auto in = opt_input("cuda", "NVIDIA H200");
  json ok = attempt(1, true, 2.0, 1.5);
  ok["config_changes"] = {{"BLOCK_SIZE", "64\xe2\x86\x92" "128"}};
  json slow = attempt(2, true, 1.5, 1.8);
  json bad = attempt(3, false, 1.5, -1);
  bad["error_message"] = std::string(300, 'E') + "TAIL";
  in.attempts = {ok, slow, bad};
  const std::string p = render_optimization_prompt(in, {}, root());
  EXPECT_NE(p.find("Round 1: improved, 25.0% faster"), std::string::npos) << p;
  EXPECT_NE(p.find("Config changes: BLOCK_SIZE: 64\xe2\x86\x92" "128"), std::string::npos);
  EXPECT_NE(p.find("Time: 2.0000 ms -> 1.5000 ms"), std::string::npos);
  EXPECT_NE(p.find("SOL after: compute 10.0%, memory 60.0%, combined 60.0%"), std::string::npos);
  EXPECT_NE(p.find("Round 2: no improvement, 20.0% slower"), std::string::npos);
  EXPECT_NE(p.find("Round 3: failed verification"), std::string::npos);
  EXPECT_NE(p.find("Error: " + std::string(200, 'E') + "..."), std::string::npos);
  EXPECT_EQ(p.find("TAIL"), std::string::npos);
}

TEST(OptimizationPrompt, BottleneckRooflineAndErrorFeedbackSections) {
  auto in = opt_input("cuda", "NVIDIA H200");
  in.bottleneck = {{"category", "memory"},
                   {"summary", "bandwidth bound"},
                   {"reasoning", "dram high"},
                   {"root_causes",
                    {{{"cause", "uncoalesced loads"},
                      {"evidence", {{{"metric", "dram__throughput"}, {"value", "91"}, {"interpretation", "saturated"}}}},
                      {"fixes", {{{"fix", "vectorize"}, {"rationale", "fewer sectors"}}}}}}},
                   {"recommended_fixes", {{{"fix", "vectorize"}, {"rationale", "fewer sectors"}}}}};
  in.roofline = {{"vendor", "nvidia"},         {"compute_sol_pct", 12.34},  {"memory_sol_pct", 91.0},
                 {"efficiency_pct", 91.0},     {"headroom_pct", 9.0},       {"at_roofline", false},
                 {"bottleneck", "memory"},     {"uses_tensor_cores", false}, {"warnings", json::array()}};
  in.error_feedback = "IndexError: out of range";
  const std::string p = render_optimization_prompt(in, {}, root());
  EXPECT_NE(p.find("BOTTLENECK TO WORK ON: MEMORY"), std::string::npos) << p;
  EXPECT_NE(p.find("Root cause: uncoalesced loads"), std::string::npos);
  EXPECT_NE(p.find("dram__throughput = 91 (saturated)"), std::string::npos);
  EXPECT_NE(p.find("Recommended fix: vectorize"), std::string::npos);
  EXPECT_NE(p.find("Compute SOL: 12.3%"), std::string::npos);
  EXPECT_NE(p.find("Bottleneck: MEMORY"), std::string::npos);
  EXPECT_NE(p.find("At roofline: No"), std::string::npos);
  EXPECT_NE(p.find("Tensor cores: No"), std::string::npos);
  EXPECT_NE(p.find("Warnings: None"), std::string::npos);
  EXPECT_NE(p.find("THE PREVIOUS ATTEMPT FAILED\nIndexError: out of range"), std::string::npos);
  EXPECT_NE(p.find("```python\n" + kernel), std::string::npos);
  EXPECT_NE(p.find("kernel_function"), std::string::npos);
}

TEST(OptimizationPrompt, AbsentSectionsAreLeftOut) {
  optimization_prompt_input in;
  in.kernel_code = kernel;
  in.platform = "cuda";
  const std::string p = render_optimization_prompt(in, {}, root());
  for (const char* s : {"TARGET GPU", "PROBLEM:", "ROOFLINE", "BOTTLENECK TO WORK ON", "RECENT OPTIMIZATION",
                        "SELF-REFLECTION", "PREVIOUS ATTEMPT FAILED"})
    EXPECT_EQ(p.find(s), std::string::npos) << s;
  EXPECT_EQ(p.find("{{"), std::string::npos);
  EXPECT_EQ(p.find("\n\n\n"), std::string::npos) << p;
}

TEST(OptimizationPrompt, OverrideFileIsUsedAndAMissingOneIsAUserError) {
  temp_file t("CUSTOM {{platform}} best={{current_best_ms}}\n{{{kernel_code}}}");
  auto in = opt_input("rocm", "AMD Instinct MI300X");
  const std::string p = render_optimization_prompt(in, {{"kernel_optimization", t.str()}}, root());
  // Code is shown without its trailing newline (the fence supplies one).
  EXPECT_EQ(p, "CUSTOM rocm best=1.0000\n" + kernel.substr(0, kernel.size() - 1));

  const std::string missing = "/nonexistent/kagent/opt.mustache";
  try {
    render_optimization_prompt(in, {{"kernel_optimization", missing}}, root());
    FAIL() << "expected user_error";
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find("templates.kernel_optimization"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  // The guidance template is resolved (and checked) first when it is overridden.
  EXPECT_THROW(render_optimization_prompt(in, {{"platform_guidance", missing}}, root()), user_error);
}

TEST(OptimizationPrompt, PlatformGuidanceOverrideReachesThePrompt) {
  temp_file g("{{#rocm}}MY ROCM RULES{{/rocm}}");
  const std::string p =
      render_optimization_prompt(opt_input("rocm", "AMD Instinct MI300X"), {{"platform_guidance", g.str()}}, root());
  EXPECT_NE(p.find("MY ROCM RULES"), std::string::npos);
  EXPECT_EQ(p.find("wavefront has 64 lanes"), std::string::npos);
  // An empty override file is a valid (empty) template.
  temp_file empty("");
  const std::string q =
      render_optimization_prompt(opt_input("rocm", "AMD Instinct MI300X"), {{"platform_guidance", empty.str()}}, root());
  EXPECT_EQ(q.find("PLATFORM RULES"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// kernel_refinement

refinement_prompt_input ref_input(const std::string& platform) {
  refinement_prompt_input in;
  in.kernel_code = kernel;
  in.platform = platform;
  in.test_code = "from kernel import kernel_function\n";
  in.stderr_text = "Traceback...\nRuntimeError: bad";
  in.stdout_text = "";
  return in;
}

TEST(RefinementPrompt, RocmIncludesGuidanceAndFilteredGuidelines) {
  const std::string p = render_refinement_prompt(ref_input("rocm"), {}, root());
  EXPECT_NE(p.find(platform_guidance("rocm", {}, root())), std::string::npos) << p;
  EXPECT_NE(p.find("TRITON GUIDELINES"), std::string::npos);
  // TMA and warp_specialize appear only where the guidance forbids them.
  EXPECT_EQ(count_of(p, "warp_specialize"), 1u) << p;
  EXPECT_EQ(count_of(p, "TMA"), 1u);
  EXPECT_LT(p.find("TRITON GUIDELINES"), p.find("PLATFORM RULES"));
}

TEST(RefinementPrompt, CudaHasNoGuidanceButFullGuidelines) {
  const std::string p = render_refinement_prompt(ref_input("cuda"), {}, root());
  EXPECT_EQ(p.find("PLATFORM RULES"), std::string::npos);
  EXPECT_NE(p.find("warp_specialize"), std::string::npos);
  EXPECT_EQ(p.find("and the platform rules"), std::string::npos);
}

TEST(RefinementPrompt, ErrorTypeStreamsAndTruncation) {
  auto in = ref_input("cuda");
  in.stderr_text = std::string(2500, 'x') + "SyntaxError: invalid syntax";
  in.stdout_text = "out-line";
  in.error_message = "Disallowed PyTorch usage detected: torch.matmul";
  const std::string p = render_refinement_prompt(in, {}, root());
  EXPECT_NE(p.find("(compilation error)"), std::string::npos) << p.substr(0, 400);
  EXPECT_NE(p.find("Verdict: Disallowed PyTorch usage detected: torch.matmul"), std::string::npos);
  EXPECT_NE(p.find("stderr:\n..."), std::string::npos);
  // The last 2000 characters of stderr: 1973 x's, then the 27-character error line.
  EXPECT_EQ(count_of(p, "\n..." + std::string(1973, 'x') + "SyntaxError: invalid syntax"), 1u);
  EXPECT_EQ(p.find(std::string(1974, 'x')), std::string::npos);
  EXPECT_NE(p.find("stdout:\nout-line"), std::string::npos);
  EXPECT_NE(p.find("TEST CODE"), std::string::npos);

  auto quiet = ref_input("cuda");
  quiet.stderr_text = " \n";
  quiet.stdout_text = "";
  const std::string q = render_refinement_prompt(quiet, {}, root());
  EXPECT_NE(q.find("None: the test produced no output."), std::string::npos);
  EXPECT_NE(q.find("(runtime error)"), std::string::npos);
}

TEST(RefinementPrompt, HistoryShowsTheLastEightDraftsShortened) {
  auto in = ref_input("cuda");
  in.history = json::array();
  for (int i = 1; i <= 10; ++i)
    in.history.push_back({{"kernel_code", "# draft-" + std::to_string(i) + "\n" + std::string(600, 'k')},
                          {"stderr", "err-" + std::to_string(i)},
                          {"stdout", ""}});
  const std::string p = render_refinement_prompt(in, {}, root());
  EXPECT_EQ(p.find("# draft-1\n"), std::string::npos);
  EXPECT_EQ(p.find("# draft-2\n"), std::string::npos);
  for (int i = 3; i <= 10; ++i) EXPECT_NE(p.find("# draft-" + std::to_string(i) + "\n"), std::string::npos) << i;
  EXPECT_NE(p.find("Draft 8,"), std::string::npos);
  EXPECT_EQ(p.find("Draft 9,"), std::string::npos);
  EXPECT_EQ(p.find(std::string(600, 'k')), std::string::npos);  // kernels cut at 500 characters
  EXPECT_NE(p.find("err-10"), std::string::npos);
}

TEST(RefinementPrompt, GuidelinesOverrideIsUsed) {
  temp_file t("MY GUIDELINES {{#rocm}}for rocm{{/rocm}}");
  const std::string p = render_refinement_prompt(ref_input("rocm"), {{"triton_guidelines", t.str()}}, root());
  EXPECT_NE(p.find("MY GUIDELINES for rocm"), std::string::npos);
  EXPECT_EQ(p.find("TRITON GUIDELINES"), std::string::npos);
  EXPECT_THROW(render_refinement_prompt(ref_input("rocm"), {{"kernel_refinement", "/nonexistent/r.mustache"}}, root()),
               user_error);
}

// ---------------------------------------------------------------------------------------------
// render_prompt and helpers

TEST(RenderPrompt, EmptyStringsAndNullAreFalseInSections) {
  temp_file t("[{{#a}}A={{a}}{{/a}}][{{#b}}B{{/b}}][{{^c}}no-c{{/c}}][{{#d}}D{{/d}}]");
  json data{{"a", "x"}, {"b", ""}, {"c", nullptr}, {"d", false}};
  EXPECT_EQ(render_prompt("anything", data, {{"anything", t.str()}}, root()), "[A=x][][no-c][]");
}

TEST(RenderPrompt, BuiltInMissingIsARunErrorAndNothingIsEscaped) {
  EXPECT_THROW(render_prompt("no_such_template", json::object(), {}, root()), run_error);
  temp_file t("{{code}}");
  EXPECT_EQ(render_prompt("x", {{"code", "a < b && c > \"d\""}}, {{"x", t.str()}}, root()), "a < b && c > \"d\"");
}

TEST(RenderPrompt, InvalidTemplateIsAUserErrorNamingTheFile) {
  temp_file t("{{#open}} never closed");
  try {
    render_prompt("x", json::object(), {{"x", t.str()}}, root());
    FAIL();
  } catch (const user_error& e) {
    EXPECT_NE(std::string(e.what()).find(t.str()), std::string::npos);
  }
}

TEST(PromptHelpers, TailHeadAndErrorType) {
  EXPECT_EQ(tail_text("abcdef", 3), "...def");
  EXPECT_EQ(tail_text("abc", 3), "abc");
  EXPECT_EQ(head_text("abcdef", 3), "abc...");
  EXPECT_EQ(classify_error_type("triton.compiler.errors.CompilationError: x", ""), "compilation");
  EXPECT_EQ(classify_error_type("", "SyntaxError: bad"), "compilation");
  EXPECT_EQ(classify_error_type("RuntimeError", "SyntaxError: in stdout only"), "runtime");
  EXPECT_EQ(classify_error_type("  \n", "AssertionError"), "runtime");
}

TEST(PromptHelpers, NumberFormats) {
  using namespace promptfmt;
  EXPECT_EQ(sig3(45.678), "45.7");
  EXPECT_EQ(sig3(0.012345), "0.0123");
  EXPECT_EQ(sig3(12345), "12300");
  EXPECT_EQ(sig3(304), "304");
  EXPECT_EQ(sig3(0.5), "0.5");
  EXPECT_EQ(sig3(0), "0");
  EXPECT_EQ(sig3(1.5e-5), "1.5e-05");
  EXPECT_EQ(plain(5300), "5300");
  EXPECT_EQ(plain(163.4), "163.4");
  EXPECT_EQ(platform_family("NVIDIA"), "cuda");
  EXPECT_EQ(platform_family("hip"), "rocm");
}

TEST(PromptHelpers, RooflineViewOmitsTensorCoresOnRocmAndMarksMissingSol) {
  json r{{"vendor", "rocm"},        {"compute_sol_pct", nullptr}, {"memory_sol_pct", 33.8},
         {"efficiency_pct", 33.8},  {"headroom_pct", 66.2},       {"at_roofline", false},
         {"bottleneck", "underutilized"}, {"warnings", {"w1", "w2"}}, {"notes", {"compute SOL needs MFMA counters"}}};
  json v = promptfmt::roofline_view(r);
  const std::string lines = v["lines"].dump();
  EXPECT_NE(lines.find("Compute SOL: not available"), std::string::npos) << lines;
  EXPECT_NE(lines.find("Memory SOL: 33.8%"), std::string::npos);
  EXPECT_EQ(lines.find("Tensor"), std::string::npos);
  EXPECT_EQ(v["warnings_text"], "w1; w2");
  EXPECT_EQ(v["bottleneck"], "UNDERUTILIZED");
  EXPECT_TRUE(promptfmt::roofline_view(nullptr).is_null());
}

TEST(PromptPlatform, TheChosenVendorDecidesTheGuidance) {
  // AMD detected, or `platform: rocm`, with the config's default target_platform: ROCm prompts.
  EXPECT_EQ(kagent::prompt_target_platform("cuda", "rocm", "rocm"), "rocm");
  EXPECT_EQ(kagent::prompt_target_platform("cuda", "", "rocm"), "rocm");
  EXPECT_NE(kagent::platform_guidance(kagent::prompt_target_platform("cuda", "rocm", "rocm")), "");
  // NVIDIA never gets the ROCm restrictions, even from a config copied from an AMD one.
  EXPECT_EQ(kagent::prompt_target_platform("rocm", "nvidia", "nvidia"), "cuda");
  EXPECT_EQ(kagent::prompt_target_platform("cuda", "nvidia", "nvidia"), "cuda");
  // GPU-less platforms keep what the config says.
  EXPECT_EQ(kagent::prompt_target_platform("cpu", "", "cpu"), "cpu");
  EXPECT_EQ(kagent::prompt_target_platform("cuda", "", "noop"), "cuda");
}
