#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "platform/llm/extract.hpp"

using namespace kagent;

namespace {
const std::string fffd = "\xEF\xBF\xBD";
const std::string body =
    "import torch\nimport triton\n\n@triton.jit\ndef _k(x_ptr):\n    pass\n\n"
    "def kernel_function(x):\n    # a comment long enough to pass the minimum length of a kernel\n    return x\n";
} // namespace

TEST(Utf8, ValidTextIsUntouched) {
  for (const std::string& s : {std::string{}, std::string("plain ascii"), std::string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                              std::string("\xef\xbf\xbd"), std::string("\xf4\x8f\xbf\xbf")}) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    size_t n = 99;
    EXPECT_EQ(to_valid_utf8(s, &n), s);
    EXPECT_EQ(n, 0u);
  }
}

TEST(Utf8, IllFormedSequencesAreReplacedOnePerMaximalSubpart) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"caf\xe9", "caf" + fffd},                       // latin-1 byte
      {"\x80", fffd},                                  // lone continuation
      {"\xc0\xaf", fffd + fffd},                       // overlong: C0 never starts a sequence
      {"\xe0\x80\xaf", fffd + fffd + fffd},            // overlong 3-byte
      {"\xed\xa0\x80", fffd + fffd + fffd},            // surrogate
      {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd}, // past U+10FFFF
      {"\xe2\x82", fffd},                              // truncated at the end: one subpart
      {"\xe2\x82x", fffd + "x"},                       // truncated before an ASCII byte
      {"\xf0\x9f\x98", fffd},
      {"a\xff\xfe" "b", "a" + fffd + fffd + "b"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_FALSE(is_valid_utf8(in));
    const auto out = to_valid_utf8(in);
    EXPECT_EQ(out, want) << nlohmann::json(out).dump();
    EXPECT_TRUE(is_valid_utf8(out));
  }
  EXPECT_EQ(first_invalid_utf8("ab\xc3\xa9z\xe9"), 5u);
  EXPECT_EQ(first_invalid_utf8("ok"), std::string_view::npos);
}

// The harness receives the code through JSON dumped with error_handler_t::replace: after
// normalisation that round trip must not change a byte, or the saved kernel is not the verified one.
TEST(Utf8, NormalisedTextSurvivesTheJsonRoundTripToTheHarness) {
  for (const std::string& in : {std::string("x = '\xe9\xff\xc3'\n"), std::string("\xed\xa0\x80\xe2\x82\xf0\x9f\x98\x80"),
                               std::string("\xc0\xaf\xe0\x80\xaf")}) {
    const auto norm = to_valid_utf8(in);
    const auto wire = nlohmann::json{{"code", norm}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    EXPECT_EQ(nlohmann::json::parse(wire)["code"].get<std::string>(), norm);
    // And it equals what JSON's own replacement would have produced from the raw bytes.
    const auto raw = nlohmann::json{{"code", in}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    EXPECT_EQ(nlohmann::json::parse(raw)["code"].get<std::string>(), norm);
  }
}

TEST(Extract, NonUtf8CodeIsNormalisedAndCounted) {
  const std::string reply = "Here:\n```python\n# caf\xe9 \xff\n" + body + "```\n";
  auto x = extract_kernel(reply);
  ASSERT_TRUE(x.ok) << x.reason;
  EXPECT_TRUE(is_valid_utf8(x.code));
  EXPECT_EQ(x.replaced_bytes, 2u);
  EXPECT_EQ(x.code.rfind("# caf" + fffd + " " + fffd + "\n", 0), 0u) << x.code;
  EXPECT_EQ(extract_kernel("```python\n" + body + "```\n").replaced_bytes, 0u);
}

TEST(Extract, OversizedCodeIsRejectedWithTheBound) {
  const std::string big = body + "# " + std::string(5000, 'x') + "\n";
  auto x = extract_kernel("```python\n" + big + "```\n", 100, 4096);
  EXPECT_FALSE(x.ok);
  EXPECT_NE(x.reason.find("too large (" + std::to_string(big.size()) + " bytes, at most 4096 allowed by max_kernel_bytes)"),
            std::string::npos)
      << x.reason;
  EXPECT_TRUE(extract_kernel("```python\n" + big + "```\n", 100, 8192).ok);
  EXPECT_TRUE(extract_kernel("```python\n" + big + "```\n").ok);  // 0: no bound
}
