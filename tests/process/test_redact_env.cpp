// The redactor and the scrub of our own environment (/proc/<pid>/environ included).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "platform/common/env.hpp"
#include "platform/common/redact.hpp"
#include "platform/process/runner.hpp"

using namespace kagent;

namespace {

struct RedactTest : ::testing::Test {
  void SetUp() override { clear_secrets_for_testing(); }
  void TearDown() override { clear_secrets_for_testing(); }
};

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

const char* kSecret = "sk-ant-test-0123456789abcdef";
const char* kOther = "my-llm-key-fedcba9876543210";

} // namespace

TEST_F(RedactTest, ReplacesEveryOccurrenceByName) {
  register_secret("ANTHROPIC_API_KEY", kSecret);
  EXPECT_EQ(redact(std::string("a ") + kSecret + " b " + kSecret),
            "a [REDACTED:ANTHROPIC_API_KEY] b [REDACTED:ANTHROPIC_API_KEY]");
  EXPECT_TRUE(contains_secret(std::string("x") + kSecret));
  EXPECT_FALSE(contains_secret("nothing here"));
  EXPECT_EQ(redact("nothing here"), "nothing here");
}

TEST_F(RedactTest, IgnoresShortValuesAndDuplicates) {
  register_secret("DEBUG_TOKEN", "1");
  register_secret("SHORT_SECRET", "1234567");  // 7 < min_secret_length
  EXPECT_EQ(registered_secret_count(), 0u);
  EXPECT_EQ(redact("1 1234567"), "1 1234567");
  register_secret("A_TOKEN", "12345678");
  register_secret("B_TOKEN", "12345678");
  EXPECT_EQ(registered_secret_count(), 1u);
}

TEST_F(RedactTest, LongestValueFirst) {
  register_secret("SHORT_KEY", "abcdefgh");
  register_secret("LONG_KEY", "abcdefgh-and-more");
  EXPECT_EQ(redact("abcdefgh-and-more abcdefgh"), "[REDACTED:LONG_KEY] [REDACTED:SHORT_KEY]");
}

// Runs in a child of the test below (KAGENT_SCRUB_CHILD=1): scrubs its own environment, then lets a
// grandchild read /proc/<this pid>/environ and its own environment, and prints what they saw.
TEST(EnvScrub, ChildMode) {
  if (!std::getenv("KAGENT_SCRUB_CHILD")) GTEST_SKIP() << "only runs as the child of ProcEnvironHidesSecrets";
  auto removed = scrub_own_environment(default_secret_patterns(), {"MY_LLM_KEY"});
  std::cout << "REMOVED " << removed.size() << "\n";
  EXPECT_EQ(std::getenv("ANTHROPIC_API_KEY"), nullptr);
  EXPECT_EQ(std::getenv("MY_LLM_KEY"), nullptr);
  auto vault = scrubbed_secrets();
  EXPECT_EQ(vault["ANTHROPIC_API_KEY"], kSecret);
  EXPECT_EQ(vault["MY_LLM_KEY"], kOther);
  EXPECT_EQ(redact(kSecret), "[REDACTED:ANTHROPIC_API_KEY]");
  process_spec s;  // inherits our (scrubbed) environment
  s.argv = {"/bin/sh", "-c", "tr '\\0' '\\n' < /proc/" + std::to_string(::getpid()) + "/environ; echo ---; env"};
  auto r = run_process(s);
  ASSERT_TRUE(r.ok()) << r.describe();
  std::cout << "SEEN\n" << r.out << "END\n";
}

TEST(EnvScrub, ProcEnvironHidesSecrets) {
  process_spec s;
  s.argv = {self_exe(), "--gtest_filter=EnvScrub.ChildMode"};
  s.env = env_map{{"PATH", "/usr/bin:/bin"},
                  {"KAGENT_SCRUB_CHILD", "1"},
                  {"ANTHROPIC_API_KEY", kSecret},
                  {"MY_LLM_KEY", kOther},
                  {"PLAIN_VALUE", "visible-plain-value"}};
  s.timeout = std::chrono::seconds(60);
  auto r = run_process(s);
  ASSERT_TRUE(r.ok()) << r.describe() << r.out << r.err;
  ASSERT_NE(r.out.find("SEEN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("REMOVED 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kSecret), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kOther), std::string::npos) << r.out;
  // The scrub removed secrets only: the ordinary variable is still in both views.
  const auto seen = r.out.substr(r.out.find("SEEN"));
  EXPECT_NE(seen.find("PLAIN_VALUE=visible-plain-value"), std::string::npos) << seen;
  EXPECT_NE(seen.find("---"), std::string::npos);
  EXPECT_EQ(seen.find("ANTHROPIC_API_KEY=sk"), std::string::npos);
}
