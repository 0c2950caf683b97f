// The helpers of platform/common defined once for every area: trim and whole-file reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "platform/common/errors.hpp"
#include "platform/common/files.hpp"
#include "platform/common/text.hpp"

namespace fs = std::filesystem;
using namespace kagent;

TEST(CommonText, TrimRemovesAsciiWhitespaceAtBothEndsOnly) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim("\f\va\v"), "a");
  EXPECT_EQ(trim(" \t\r\n "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
  EXPECT_EQ(trim("\xc2\xa0x\xc2\xa0"), "\xc2\xa0x\xc2\xa0");  // not ASCII whitespace: kept, never split
}

TEST(CommonFiles, ReadFileReturnsTheBytesAndNamesWhatFailed) {
  const auto dir = fs::temp_directory_path() / ("kagent_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream(dir / "a.bin", std::ios::binary) << std::string("x\0y\r\n", 5);
    std::ofstream(dir / "empty.txt");
  }
  EXPECT_EQ(read_file(dir / "a.bin"), std::string("x\0y\r\n", 5));
  EXPECT_EQ(read_file(dir / "empty.txt"), "");
  EXPECT_EQ(read_file_if_present(dir / "empty.txt"), std::optional<std::string>{""});
  EXPECT_EQ(read_file_if_present(dir / "missing.txt"), std::nullopt);
  EXPECT_EQ(read_file_if_present(dir), std::nullopt);
  try {
    (void)read_file(dir / "missing.txt");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const run_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read " + (dir / "missing.txt").string() + ": No such file"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)read_file(dir);
    ADD_FAILURE() << "no error for a directory";
  } catch (const run_error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
