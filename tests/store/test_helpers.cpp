#include "tests/store/test_helpers.hpp"

#include <unistd.h>

#include <atomic>

namespace kagent::store::test {

namespace fs = std::filesystem;

void scratch_dir::SetUp() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = fs::temp_directory_path() /
         ("kagent-store-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + info->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void scratch_dir::TearDown() {
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

std::vector<std::string> list_tree(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    out.push_back(fs::relative(e.path(), dir).string());
  return out;
}

} // namespace kagent::store::test
