// Launch-constant sweeps (platform/search/tune.hpp): which literals are launch constants, which the
// sweep may change, the variants in their order, and the rewritten source.
#include <gtest/gtest.h>

#include "platform/search/tune.hpp"

using namespace kagent::search;

namespace {

// The shape of the replayed H200 matvec candidates: a tuple assignment, a later non-literal
// assignment to one of its names, keyword arguments at the launch.
const std::string kSplitK = R"(import triton
@triton.jit
def k(a_ptr, K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    pass

def kernel_function(A, B):
    M, K = A.shape
    BLOCK_M, BLOCK_K, SPLIT = 16, 512, 64
    SPLIT = max(1, min(SPLIT, K // BLOCK_K))
    grid = (triton.cdiv(M, BLOCK_M), SPLIT)
    k[grid](A, B, acc, M,
            K=K, BLOCK_M=BLOCK_M, BLOCK_K=BLOCK_K, num_warps=4)
    return acc
)";

std::vector<std::string> names(const std::vector<tune_axis>& axes) {
  std::vector<std::string> out;
  for (const auto& a : axes) out.push_back(a.name + "=" + std::to_string(a.value));
  return out;
}

} // namespace

TEST(Tune, FindsTupleAssignmentsAndKeywordArguments) {
  EXPECT_EQ(names(tune_axes(kSplitK)),
            (std::vector<std::string>{"BLOCK_M=16", "BLOCK_K=512", "SPLIT=64", "num_warps=4"}));
  // `K=K` and `BLOCK_M=BLOCK_M` are names, not literals; `M, K = A.shape` sets no literal.
  for (const auto& s : tune_sites(kSplitK)) EXPECT_EQ(kSplitK.substr(s.offset, s.length), std::to_string(s.value));
}

TEST(Tune, SkipsCommentsStringsComparisonsAndOtherNames) {
  const std::string code = "# BLOCK_SIZE = 64 in a comment\n"
                           "doc = 'BLOCK_SIZE = 32'\n"
                           "s = \"\"\"\nnum_warps=8\n\"\"\"\n"
                           "if BLOCK_SIZE == 128: pass\n"
                           "N_ELEMS = 1024\n"
                           "BLOCK_SIZE = 256\n"
                           "x = f(y, BLOCK_SIZE=256)\n";
  EXPECT_EQ(names(tune_axes(code)), (std::vector<std::string>{"BLOCK_SIZE=256"}));
  EXPECT_EQ(tune_sites(code).size(), 2u);
}

TEST(Tune, LeavesAloneWhatItCannotChangeSafely) {
  // Different values in two places, a value outside the name's domain, an expression, autotune.
  EXPECT_TRUE(tune_axes("BLOCK = 128\ndef f():\n    BLOCK = 64\n").empty());
  EXPECT_TRUE(tune_axes("BLOCK = 100\nnum_warps = 3\n").empty());
  EXPECT_TRUE(tune_axes("BLOCK = 128 * 2\nBLOCK_K = 64 + 0\n").empty());
  EXPECT_TRUE(tune_axes("@triton.autotune(configs=[])\ndef f(BLOCK=128): pass\n").empty());
  // num_stages is not a power of two; it has its own domain.
  EXPECT_EQ(names(tune_axes("f(num_stages=3)\n")), (std::vector<std::string>{"num_stages=3"}));
}

TEST(Tune, VariantsGoNearestFirstAndStayInsideEachDomain) {
  const auto v = tune_variants("f(BLOCK=1, num_warps=4)\n", 100);
  ASSERT_GE(v.size(), 5u);
  // BLOCK=1 cannot go down: its first variant is up; then num_warps down and up.
  EXPECT_EQ(v[0].label, "BLOCK 1->2");
  EXPECT_EQ(v[1].label, "num_warps 4->2");
  EXPECT_EQ(v[2].label, "num_warps 4->8");
  // Then both at once, one step each.
  EXPECT_EQ(v[3].label, "BLOCK 1->2; num_warps 4->2");
  EXPECT_EQ(v[4].label, "BLOCK 1->2; num_warps 4->8");
  for (const auto& x : v) {
    if (auto it = x.values.find("num_warps"); it != x.values.end()) {
      EXPECT_GE(it->second, 1);
      EXPECT_LE(it->second, 16);
    }
    EXPECT_FALSE(x.label.empty());
  }
  // No variant twice.
  std::set<std::string> labels;
  for (const auto& x : v) EXPECT_TRUE(labels.insert(x.label).second) << x.label;
  EXPECT_EQ(tune_variants("f(BLOCK=1, num_warps=4)\n", 2).size(), 2u);
  EXPECT_TRUE(tune_variants("def kernel_function(x):\n    return x\n", 10).empty());
}

TEST(Tune, ApplyRewritesEveryLiteralOfTheConstantAndNothingElse) {
  auto out = apply_tune(kSplitK, {{"BLOCK_K", 1024}, {"num_warps", 8}});
  ASSERT_TRUE(out);
  EXPECT_NE(out->find("BLOCK_M, BLOCK_K, SPLIT = 16, 1024, 64"), std::string::npos);
  EXPECT_NE(out->find("num_warps=8)"), std::string::npos);
  EXPECT_NE(out->find("BLOCK_K=BLOCK_K"), std::string::npos);
  EXPECT_EQ(names(tune_axes(*out)), (std::vector<std::string>{"BLOCK_M=16", "BLOCK_K=1024", "SPLIT=64", "num_warps=8"}));
  EXPECT_EQ(tune_label(kSplitK, {{"BLOCK_K", 1024}, {"num_warps", 8}}), "BLOCK_K 512->1024; num_warps 4->8");
  // Not an axis of this code, or outside the domain: no rewrite.
  EXPECT_FALSE(apply_tune(kSplitK, {{"BLOCK_N", 64}}));
  EXPECT_FALSE(apply_tune(kSplitK, {{"num_warps", 3}}));
  // Both literals of a constant set in two places to the same value change together.
  auto twice = apply_tune("BLOCK = 128\ngrid = f(BLOCK=128)\n", {{"BLOCK", 64}});
  ASSERT_TRUE(twice);
  EXPECT_EQ(*twice, "BLOCK = 64\ngrid = f(BLOCK=64)\n");
}

TEST(Tune, ProgramDbNamesAVariantByItsIdAndItsBottleneck) {
  EXPECT_EQ(variant_bottleneck("BLOCK_K 512->1024"), "tune: BLOCK_K 512->1024");
  EXPECT_EQ(variant_label("tune: BLOCK_K 512->1024"), "BLOCK_K 512->1024");
  EXPECT_FALSE(variant_label("memory"));
  EXPECT_FALSE(variant_label("direction 1"));
  EXPECT_TRUE(is_variant_id("r1_t0"));
  EXPECT_TRUE(is_variant_id("r12_t345"));
  EXPECT_FALSE(is_variant_id("r1_c0"));
  EXPECT_FALSE(is_variant_id("initial"));
  EXPECT_FALSE(is_variant_id("r1_t0@run-3"));
}
