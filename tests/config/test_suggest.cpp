// "Did you mean": the typo rule behind flag, subcommand, strategy and config-key suggestions.
#include <gtest/gtest.h>

#include "platform/common/suggest.hpp"
#include "platform/config/config.hpp"
#include "platform/common/errors.hpp"

using namespace kagent;

TEST(Suggest, EditDistanceCountsASwapAsOneEdit) {
  EXPECT_EQ(edit_distance("nvidia", "nvidia"), 0u);
  EXPECT_EQ(edit_distance("nvidai", "nvidia"), 1u);
  EXPECT_EQ(edit_distance("gpuz", "gpus"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Suggest, NearestOnlyForTyposNeverForStrangers) {
  const std::vector<std::string> strategies{"amd", "beam_search", "cpu", "greedy", "noop", "nvidia"};
  EXPECT_EQ(nearest("nvidai", strategies).value_or(""), "nvidia");
  EXPECT_EQ(nearest("beam-search", strategies).value_or(""), "beam_search");
  EXPECT_EQ(nearest("NOOP", strategies), std::nullopt);  // the same word is not a suggestion
  EXPECT_EQ(nearest("fastest", strategies), std::nullopt);
  EXPECT_EQ(nearest("x", strategies), std::nullopt);
  const std::vector<std::string> flags{"--max-rounds", "--kernel-dir", "--strategy", "--run-dir"};
  EXPECT_EQ(nearest("--max-round", flags).value_or(""), "--max-rounds");
  EXPECT_EQ(nearest("--kernel_dir", flags).value_or(""), "--kernel-dir");
  EXPECT_EQ(did_you_mean("--stratgy", flags), " (did you mean '--strategy'?)");
  EXPECT_EQ(did_you_mean("--frobnicate", flags), "");
}

TEST(Suggest, AMistypedConfigKeyGetsItsName) {
  try {
    parse_config("strategy: beam_search\nmax_round: 3\n", "cfg.yaml");
    FAIL() << "accepted an unknown key";
  } catch (const user_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown key 'max_round' (did you mean 'max_rounds'?)"), std::string::npos) << m;
  }
  try {
    parse_config("strategy_config:\n  num_top_kernel: 2\n", "cfg.yaml");
    FAIL() << "accepted an unknown key";
  } catch (const user_error& e) {
    EXPECT_NE(std::string{e.what()}.find("did you mean 'num_top_kernels'?"), std::string::npos) << e.what();
  }
}
