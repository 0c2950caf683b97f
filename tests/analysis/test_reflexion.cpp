// Reflexion: config changes, the prompt, and parsing with its fallback (SPEC §8.4, §2.7).
#include <gtest/gtest.h>

#include <set>

#include "platform/analysis/reflexion.hpp"
#include "platform/common/errors.hpp"
#include "tests/prompt/prompt_test_util.hpp"

using namespace kagent;
using kagent::test::root;
using kagent::test::temp_file;
using nlohmann::json;

namespace {

const std::string arrow = "\xe2\x86\x92";

std::string autotuned(const std::string& first_config, const std::string& rest = "") {
  return "import triton\n"
         "@triton.autotune(configs=[\n"
         "    " + first_config + ",\n" + rest +
         "], key=['n'])\n"
         "@triton.jit\n"
         "def k(x_ptr, n, BLOCK_SIZE: tl.constexpr):\n"
         "    pass\n";
}

json attempt(double before, double after, bool passed = true) {
  return {{"round_num", 4},
          {"worker_id", 1},
          {"bottleneck_category", "memory"},
          {"root_cause", "uncoalesced loads"},
          {"recommended_fix", "vectorize"},
          {"config_changes", {{"BLOCK_SIZE", "64" + arrow + "128"}}},
          {"time_before_ms", before},
          {"time_after_ms", after},
          {"improvement_pct", passed && after > 0 ? 100.0 * (before - after) / before : 0.0},
          {"is_improvement", passed && after > 0 && after < before},
          {"compute_sol_pct", 12.0},
          {"memory_sol_pct", 70.5},
          {"combined_sol_pct", 70.5},
          {"passed_verification", passed},
          {"error_message", passed ? "" : std::string(250, 'e') + "END"}};
}

const std::set<std::string> reflexion_keys = {
    "round_num",         "root_cause_diagnosed", "fix_applied",           "expected_outcome",
    "actual_outcome",    "performance_delta_pct", "was_diagnosis_correct", "was_fix_effective",
    "reasoning",         "lessons",              "avoid_patterns",        "try_patterns"};

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> k;
  for (auto it = j.begin(); it != j.end(); ++it) k.insert(it.key());
  return k;
}

} // namespace

TEST(ConfigChanges, ChangedKeysOfTheFirstConfigOnly) {
  const std::string old_code =
      autotuned("triton.Config({'BLOCK_SIZE': 64, 'GROUP': 8}, num_warps=4, num_stages=2)",
                "    triton.Config({'BLOCK_SIZE': 1024}, num_warps=16),\n");
  const std::string new_code =
      autotuned("triton.Config({\"BLOCK_SIZE\": 128, \"GROUP\": 8}, num_warps=8, num_stages=2, maxnreg=128)");
  json c = config_changes(old_code, new_code);
  EXPECT_EQ(c, (json{{"BLOCK_SIZE", "64" + arrow + "128"}, {"num_warps", "4" + arrow + "8"},
                     {"maxnreg", "unset" + arrow + "128"}}))
      << c.dump();
}

TEST(ConfigChanges, KwargsFormCommentsAndNoConfig) {
  const std::string a = "# triton.Config({'BLOCK': 1})\ncfg = triton.Config(kwargs={'BLOCK': 32}, num_warps=2)\n";
  const std::string b = "cfg = triton.Config(kwargs={'BLOCK': 64}, num_warps=2)  # triton.Config({'BLOCK': 9})\n";
  EXPECT_EQ(config_changes(a, b), (json{{"BLOCK", "32" + arrow + "64"}}));
  EXPECT_EQ(config_changes(a, a), json::object());
  EXPECT_EQ(config_changes("def f(): pass", "def g(): pass"), json::object());
  // A config added where there was none: every key was unset before.
  EXPECT_EQ(config_changes("def f(): pass", b), (json{{"BLOCK", "unset" + arrow + "64"}, {"num_warps", "unset" + arrow + "2"}}));
}

TEST(ReflexionPrompt, CarriesTheAttemptAndItsResult) {
  const std::string p = render_reflexion_prompt(attempt(2.0, 1.6), {}, root());
  EXPECT_NE(p.find("Round: 4"), std::string::npos) << p;
  EXPECT_NE(p.find("Bottleneck targeted: memory"), std::string::npos);
  EXPECT_NE(p.find("Diagnosed root cause: uncoalesced loads"), std::string::npos);
  EXPECT_NE(p.find("Fix applied: vectorize"), std::string::npos);
  EXPECT_NE(p.find("Configuration changes: BLOCK_SIZE: 64" + arrow + "128"), std::string::npos);
  EXPECT_NE(p.find("Passed verification: yes"), std::string::npos);
  EXPECT_NE(p.find("Time: 2.0000 ms -> 1.6000 ms (+20.00% improvement)"), std::string::npos);
  EXPECT_NE(p.find("Compute SOL after: 12.0%"), std::string::npos);
  EXPECT_NE(p.find("Memory SOL after: 70.5%"), std::string::npos);
  EXPECT_EQ(p.find("Error:"), std::string::npos);
  for (const char* k : {"was_diagnosis_correct", "was_fix_effective", "expected_outcome", "actual_outcome",
                        "reasoning", "lessons", "avoid_patterns", "try_patterns"})
    EXPECT_NE(p.find(k), std::string::npos) << k;
}

TEST(ReflexionPrompt, FailedAttemptShowsTheFirst200CharactersOfTheError) {
  json a = attempt(2.0, -1, false);
  a["config_changes"] = json::object();
  const std::string p = render_reflexion_prompt(a, {}, root());
  EXPECT_NE(p.find("Passed verification: no"), std::string::npos) << p;
  EXPECT_NE(p.find("Error: " + std::string(200, 'e') + "..."), std::string::npos);
  EXPECT_EQ(p.find("END"), std::string::npos);
  EXPECT_NE(p.find("Configuration changes: none"), std::string::npos);
  EXPECT_NE(p.find("-> not measured"), std::string::npos);
}

TEST(ReflexionPrompt, OverrideUsesTheLogicalNameReflexionPrompt) {
  temp_file t("R{{round}} {{passed}}");
  EXPECT_EQ(render_reflexion_prompt(attempt(2.0, 1.0), {{"reflexion_prompt", t.str()}}, root()), "R4 yes");
  EXPECT_THROW(render_reflexion_prompt(attempt(2.0, 1.0), {{"reflexion_prompt", "/nonexistent/x"}}, root()),
               user_error);
}

TEST(ReflexionParse, ReadsTheReplyAndTakesFactsFromTheAttempt) {
  const std::string reply = "Sure.\n```json\n"
                            R"({"was_diagnosis_correct": true, "was_fix_effective": "no",
                                "expected_outcome": "30% faster", "actual_outcome": "20% faster",
                                "reasoning": "partly right", "lessons": "vector loads help",
                                "avoid_patterns": ["BLOCK_SIZE 1024"], "try_patterns": ["num_warps 8", 3],
                                "extra_key": "dropped"})"
                            "\n```";
  json r = parse_reflexion_reply(reply, attempt(2.0, 1.6));
  EXPECT_EQ(keys_of(r), reflexion_keys);
  EXPECT_EQ(r["round_num"], 4);
  EXPECT_EQ(r["root_cause_diagnosed"], "uncoalesced loads");
  EXPECT_EQ(r["fix_applied"], "vectorize");
  EXPECT_NEAR(r["performance_delta_pct"].get<double>(), 20.0, 1e-9);
  EXPECT_EQ(r["was_diagnosis_correct"], true);
  EXPECT_EQ(r["was_fix_effective"], false);
  EXPECT_EQ(r["expected_outcome"], "30% faster");
  EXPECT_EQ(r["actual_outcome"], "20% faster");
  EXPECT_EQ(r["reasoning"], "partly right");
  EXPECT_EQ(r["lessons"], json::array({"vector loads help"}));
  EXPECT_EQ(r["avoid_patterns"], json::array({"BLOCK_SIZE 1024"}));
  EXPECT_EQ(r["try_patterns"], json::array({"num_warps 8", "3"}));
}

TEST(ReflexionParse, FallbackFollowsIsImprovement) {
  json up = parse_reflexion_reply("no json here", attempt(2.0, 1.5));
  EXPECT_EQ(keys_of(up), reflexion_keys);
  EXPECT_EQ(up["actual_outcome"], "Improved");
  EXPECT_EQ(up["was_diagnosis_correct"], true);
  EXPECT_EQ(up["was_fix_effective"], true);
  EXPECT_EQ(up["lessons"], json::array());
  EXPECT_EQ(up["reasoning"], "");

  json down = parse_reflexion_reply("{not: valid}", attempt(1.5, 2.0));
  EXPECT_EQ(down["actual_outcome"], "No improvement");
  EXPECT_EQ(down["was_diagnosis_correct"], false);
  EXPECT_EQ(down["was_fix_effective"], false);
  EXPECT_LT(down["performance_delta_pct"].get<double>(), 0);

  // A partial object: the fields it lacks fall back the same way.
  json partial = parse_reflexion_reply(R"({"reasoning": "r"})", attempt(2.0, 1.5));
  EXPECT_EQ(partial["reasoning"], "r");
  EXPECT_EQ(partial["actual_outcome"], "Improved");
  EXPECT_EQ(partial["was_fix_effective"], true);
}

TEST(ReflexionParse, UnknownTimesGiveANullDelta) {
  json a = attempt(-1, -1);
  a.erase("improvement_pct");
  a.erase("is_improvement");
  json r = parse_reflexion_reply("", a);
  EXPECT_TRUE(r["performance_delta_pct"].is_null());
  EXPECT_EQ(r["actual_outcome"], "No improvement");
  EXPECT_EQ(r["round_num"], 4);
}
