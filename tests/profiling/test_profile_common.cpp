#include <gtest/gtest.h>

#include <regex>

#include "platform/common/errors.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/common/files.hpp"

using namespace kagent;

TEST(ProfileCommon, CsvKeepsQuotedKernelNamesWithCommasAnglesAndParens) {
  auto t = parse_csv_table(
      "Dispatch_Id,Kernel_Name,Counter_Value\n"
      "7,\"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, (anon)> >(int, float)\",1.5\n"
      "8,\"say \"\"hi\"\"\",2\n");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.cell(t.rows[0], t.column({"Kernel_Name"})),
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, (anon)> >(int, float)");
  EXPECT_EQ(t.cell(t.rows[1], 1), "say \"hi\"");
  EXPECT_EQ(t.column({"dispatch_id"}), 0);  // case-insensitive fallback: Dispatch_Id vs Dispatch_ID
  EXPECT_EQ(t.column({"Missing"}), -1);
  EXPECT_EQ(t.cell(t.rows[0], 9), "");      // ragged rows read as empty, never crash
}

TEST(ProfileCommon, CsvSkipsBlankLinesAndHandlesCrlf) {
  auto t = parse_csv_table("a,b\r\n\r\n1,2\r\n");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0][1], "2");
}

TEST(ProfileCommon, NumbersStripThousandsSeparatorsAndPercentAndTreatNaAsAbsent) {
  EXPECT_DOUBLE_EQ(*parse_number("213,152"), 213152.0);
  EXPECT_DOUBLE_EQ(*parse_number(" 1,234,567.5 "), 1234567.5);
  EXPECT_DOUBLE_EQ(*parse_number("84.31%"), 84.31);
  EXPECT_DOUBLE_EQ(*parse_number("1e+06"), 1e6);
  EXPECT_FALSE(parse_number("n/a"));
  EXPECT_FALSE(parse_number("N/A"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_FALSE(parse_number("nan"));
  EXPECT_FALSE(parse_number("(256, 1, 1)"));
}

TEST(ProfileCommon, BusiestKernelSkipsPyTorchKernelsAndTieKeepsTheLater) {
  EXPECT_EQ(*busiest_kernel({{"at::native::vectorized_elementwise", 8e6}, {"triton_kernel", 2e6}}), "triton_kernel");
  EXPECT_EQ(*busiest_kernel({{"void at::native::reduce_kernel<1>", 9e9}, {"a", 5}, {"b", 5}}), "b");
  EXPECT_EQ(*busiest_kernel({{"a", 3}, {"b", 5}, {"a", 3}}), "a");  // same name sums: 6 > 5
  EXPECT_FALSE(busiest_kernel({{"at::x", 1}}));
  EXPECT_FALSE(busiest_kernel({}));
}

// The profiler-side filter (ncu's --kernel-name regex:) keeps exactly what is_pytorch_kernel does not.
TEST(ProfileCommon, TheNotPyTorchRegexAgreesWithIsPytorchKernel) {
  const std::regex re(not_pytorch_kernel_regex);  // ECMAScript, as ncu's regex: filter
  for (const char* name : {"matvec_splitk_kernel", "_rmsnorm_fwd", "void at::native::vectorized_elementwise_kernel<4>",
                           "at::native::reduce_kernel", "void cub::DeviceReduceKernel<at::native::Op>(int)",
                           "kernel_with_at_in_name", "attention_kernel"})
    EXPECT_EQ(std::regex_search(name, re), !is_pytorch_kernel(name)) << name;
}

TEST(ProfileCommon, UnreadableFileNamesThePath) {
  try {
    (void)read_file("/nonexistent/kagent/x.csv");
    FAIL() << "expected run_error";
  } catch (const run_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kagent/x.csv"), std::string::npos);
  }
}
