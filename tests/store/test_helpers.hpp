#pragma once
// A fresh scratch directory per test, removed afterwards.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kagent::store::test {

class scratch_dir : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;
  std::filesystem::path dir_;
};

/// Names of every entry below `dir`, recursively (relative paths).
std::vector<std::string> list_tree(const std::filesystem::path& dir);

} // namespace kagent::store::test
