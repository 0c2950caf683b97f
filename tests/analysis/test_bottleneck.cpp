// Bottleneck reply parsing (SPEC §7.3), JSON round trip, and the synthetic diagnosis (§7.4).
#include <gtest/gtest.h>

#include "platform/analysis/bottleneck.hpp"

using namespace kagent;
using nlohmann::json;

namespace {

const char* two_directions = R"([
  {"category": "memory", "summary": "DRAM bound", "reasoning": "dram 91%",
   "root_causes": [
     {"cause": "uncoalesced loads",
      "evidence": [{"metric": "dram__throughput", "value": 91.5, "interpretation": "saturated"}],
      "fixes": [{"fix": "vectorize loads", "rationale": "fewer sectors"}]},
     {"cause": "re-reads", "evidence": [], "fixes": [{"fix": "cache in registers", "rationale": "reuse"}]}]},
  {"category": "compute", "summary": "FMA bound", "reasoning": "fp32 pipe 80%",
   "root_causes": [{"cause": "scalar math", "evidence": [], "fixes": [{"fix": "use tl.dot", "rationale": "tensor cores"}]}]}
])";

} // namespace

TEST(ParseBottleneck, ArrayOfDirectionsInOrder) {
  auto v = parse_bottleneck_reply(two_directions);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].category, "memory");
  EXPECT_EQ(v[0].summary, "DRAM bound");
  EXPECT_EQ(v[0].reasoning, "dram 91%");
  ASSERT_EQ(v[0].root_causes.size(), 2u);
  EXPECT_EQ(v[0].root_causes[0].cause, "uncoalesced loads");
  ASSERT_EQ(v[0].root_causes[0].evidence.size(), 1u);
  EXPECT_EQ(v[0].root_causes[0].evidence[0].metric, "dram__throughput");
  EXPECT_EQ(v[0].root_causes[0].evidence[0].value, "91.5");  // numbers kept as text
  EXPECT_EQ(v[0].root_causes[0].evidence[0].interpretation, "saturated");
  EXPECT_EQ(v[1].category, "compute");
  // recommended_fixes: every cause's fixes, in order.
  ASSERT_EQ(v[0].recommended_fixes.size(), 2u);
  EXPECT_EQ(v[0].recommended_fixes[0].fix, "vectorize loads");
  EXPECT_EQ(v[0].recommended_fixes[1].fix, "cache in registers");
}

TEST(ParseBottleneck, FencedReplyWithProse) {
  const std::string text = std::string("Here is my analysis.\n```json\n") + two_directions + "\n```\nHope it helps.";
  auto v = parse_bottleneck_reply(text);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].summary, "FMA bound");
}

TEST(ParseBottleneck, SingleObjectIsOneDirectionNotItsInnerArray) {
  const std::string text = R"(Result: {"category": "compute", "summary": "s",
    "root_causes": [{"cause": "c1", "evidence": [], "fixes": [{"fix": "f1", "rationale": "r1"}]}]})";
  auto v = parse_bottleneck_reply(text);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].category, "compute");
  ASSERT_EQ(v[0].root_causes.size(), 1u);
  EXPECT_EQ(v[0].root_causes[0].cause, "c1");
}

TEST(ParseBottleneck, ObjectWrappingAnArrayIsUnwrapped) {
  auto v = parse_bottleneck_reply(std::string(R"({"bottlenecks": )") + two_directions + "}");
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].category, "memory");
}

TEST(ParseBottleneck, BracketsInProseBeforeTheArrayFallBackToTheObjectSpan) {
  // The first '['..last ']' span is not JSON; the '{'..'}' span is one direction.
  auto v = parse_bottleneck_reply(R"(See [1]: {"category": "memory", "summary": "x", "root_causes": []} and [2])");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].summary, "x");
}

TEST(ParseBottleneck, GarbageGivesNothing) {
  EXPECT_TRUE(parse_bottleneck_reply("").empty());
  EXPECT_TRUE(parse_bottleneck_reply("I cannot tell.").empty());
  EXPECT_TRUE(parse_bottleneck_reply("[not json]").empty());
  EXPECT_TRUE(parse_bottleneck_reply("{broken: }").empty());
  EXPECT_TRUE(parse_bottleneck_reply("[1, 2, \"x\"]").empty());
  EXPECT_TRUE(parse_bottleneck_reply("[]").empty());
}

TEST(ParseBottleneck, CategoriesAreCoercedAndDefaultsFilled) {
  auto v = parse_bottleneck_reply(R"([{"category": " Memory "}, {"category": "latency"}, {}, 7,
      {"category": "compute", "root_causes": [{"evidence": "looks slow"}, "just text"]}])");
  ASSERT_EQ(v.size(), 4u);  // the number is dropped
  EXPECT_EQ(v[0].category, "memory");
  EXPECT_EQ(v[0].summary, "memory-bound");
  EXPECT_EQ(v[0].reasoning, "");
  EXPECT_EQ(v[1].category, "underutilized");
  EXPECT_EQ(v[1].summary, "underutilized-bound");
  EXPECT_EQ(v[2].category, "underutilized");
  ASSERT_EQ(v[3].root_causes.size(), 2u);
  EXPECT_EQ(v[3].root_causes[0].cause, "Unknown");
  ASSERT_EQ(v[3].root_causes[0].evidence.size(), 1u);
  EXPECT_EQ(v[3].root_causes[0].evidence[0].interpretation, "looks slow");
  EXPECT_EQ(v[3].root_causes[1].cause, "just text");
  EXPECT_TRUE(v[3].recommended_fixes.empty());
}

TEST(ParseBottleneck, LegacyRecommendedFixesAreAppendedWithoutDuplicates) {
  auto v = parse_bottleneck_reply(R"([{"category": "memory",
      "root_causes": [{"cause": "a", "fixes": [{"fix": "f1", "rationale": "r1"}, "f2"]},
                      {"cause": "b", "fixes": [{"fix": "f3"}]}],
      "recommended_fixes": [{"fix": "f1", "rationale": "dup"}, {"fix": "legacy", "rationale": "old"}, {"fix": ""}]}])");
  ASSERT_EQ(v.size(), 1u);
  std::vector<std::string> fixes;
  for (const auto& f : v[0].recommended_fixes) fixes.push_back(f.fix);
  EXPECT_EQ(fixes, (std::vector<std::string>{"f1", "f2", "f3", "legacy"}));
  EXPECT_EQ(v[0].recommended_fixes[0].rationale, "r1");
  EXPECT_EQ(v[0].recommended_fixes[3].rationale, "old");
}

TEST(BottleneckJson, RoundTrip) {
  auto v = parse_bottleneck_reply(two_directions);
  ASSERT_FALSE(v.empty());
  json j = to_json(v[0]);
  EXPECT_EQ(j["category"], "memory");
  EXPECT_EQ(j["root_causes"][0]["evidence"][0]["metric"], "dram__throughput");
  EXPECT_EQ(j["recommended_fixes"].size(), 2u);
  EXPECT_EQ(to_json(bottleneck_from_json(j)), j);
  auto s = synthetic_bottleneck("memory", "rocprofv3 exited 1");
  EXPECT_EQ(to_json(bottleneck_from_json(to_json(s))), to_json(s));
  EXPECT_EQ(bottleneck_from_json(nullptr).category, "underutilized");
}

TEST(SyntheticBottleneck, CategoryFromOverrideElseUnderutilized) {
  EXPECT_EQ(synthetic_bottleneck("memory", "r").category, "memory");
  EXPECT_EQ(synthetic_bottleneck("compute", "r").category, "compute");
  EXPECT_EQ(synthetic_bottleneck("", "r").category, "underutilized");
  EXPECT_EQ(synthetic_bottleneck("bogus", "r").category, "underutilized");
}

TEST(SyntheticBottleneck, SaysItIsSyntheticAndRecommendsConservativeAmdTuning) {
  auto b = synthetic_bottleneck("", "rocprof PMC pass 5 failed (rc=38)");
  EXPECT_NE(b.summary.find("unavailable"), std::string::npos) << b.summary;
  EXPECT_NE(b.summary.find("ynthetic"), std::string::npos);
  EXPECT_NE(b.reasoning.find("synthetic"), std::string::npos);
  EXPECT_NE(b.reasoning.find("rocprof PMC pass 5 failed (rc=38)"), std::string::npos) << b.reasoning;
  ASSERT_EQ(b.root_causes.size(), 1u);
  EXPECT_EQ(b.root_causes[0].cause, "ROCm profiling unavailable");
  ASSERT_EQ(b.root_causes[0].fixes.size(), 1u);
  EXPECT_NE(b.root_causes[0].fixes[0].fix.find("AMD"), std::string::npos);
  ASSERT_FALSE(b.recommended_fixes.empty());
  const std::string rec = b.recommended_fixes[0].fix;
  for (const char* w : {"re-profile", "BLOCK", "num_warps", "num_stages", "conservatively", "AMD"})
    EXPECT_NE(rec.find(w), std::string::npos) << w << " in " << rec;
}
