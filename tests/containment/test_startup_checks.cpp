#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/startup_checks.hpp"
#include "platform/common/errors.hpp"

using namespace kagent;
using namespace kagent::app;
namespace fs = std::filesystem;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const user_error& e) {
    return e.what();
  }
  return "";
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("kagent_checks_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(path, ec))
      if (e.is_directory(ec)) fs::permissions(e.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& rel, const std::string& text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::binary) << text;
    return (path / rel).string();
  }
  std::string kernel_dir(const std::string& rel, const std::string& input = "def kernel_function():\n  pass\n") const {
    write(rel + "/input.py", input);
    write(rel + "/problem.py", "import torch\n");
    write(rel + "/test.py", "print('ok')\n");
    return (path / rel).string();
  }
};

} // namespace

TEST(GpuIds, DistinctIdsParse) {
  EXPECT_EQ(parse_gpu_ids("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_gpu_ids("3,1,2"), (std::vector<int>{3, 1, 2}));
}

TEST(GpuIds, DuplicatesGarbageAndEmptyAreRefused) {
  auto d = error_of([] { parse_gpu_ids("0,0,0"); });
  EXPECT_EQ(d, "--gpu-ids '0,0,0': device 0 is listed twice; expected distinct device ids, e.g. 0,1");
  EXPECT_NE(error_of([] { parse_gpu_ids("1,2,1"); }).find("device 1 is listed twice"), std::string::npos);
  for (const char* bad : {"0,x", "-1", "1.5", "0,,1", "1 ", "99999999999"})
    EXPECT_NE(error_of([&] { parse_gpu_ids(bad); }).find("expected comma-separated non-negative integers"),
              std::string::npos)
        << bad;
  EXPECT_NE(error_of([] { parse_gpu_ids(""); }).find("--gpu-ids is empty"), std::string::npos);
}

TEST(Environment, ReplayDelayMustBeASaneNumberOfSeconds) {
  for (const char* ok : {"", "0", "0.4", "12", "3599.5"}) EXPECT_EQ(error_of([&] { check_replay_delay(ok); }), "") << ok;
  for (const char* bad : {"abc", "1s", "-1", "nan", "inf", "1e400", "3600", "1e9", " ", "0.5 "}) {
    auto e = error_of([&] { check_replay_delay(bad); });
    EXPECT_NE(e.find("KAGENT_REPLAY_DELAY_S='"), std::string::npos) << bad << " -> " << e;
    EXPECT_NE(e.find("expected a number of seconds from 0 to below 3600"), std::string::npos) << bad;
  }
}

TEST(Environment, NoopDeviceTimeMustBeASaneNumberOfSeconds) {
  for (const char* ok : {"", "0.01", "1", "2.5", "600"}) EXPECT_EQ(error_of([&] { check_noop_device_time(ok); }), "") << ok;
  for (const char* bad : {"abc", "1s", "0", "-1", "nan", "inf", "600.5", "1e400", " ", "1 "}) {
    auto e = error_of([&] { check_noop_device_time(bad); });
    EXPECT_NE(e.find("KAGENT_NOOP_DEVICE_S='"), std::string::npos) << bad << " -> " << e;
    EXPECT_NE(e.find("expected a number of seconds above 0 and up to 600"), std::string::npos) << bad;
  }
}

TEST(Environment, TestStandbyMustBeZeroToFour) {
  for (const char* ok : {"", "0", "1", "2", "4"}) EXPECT_EQ(error_of([&] { check_test_standby(ok); }), "") << ok;
  for (const char* bad : {"5", "-1", "two", "02", " 2", "2 ", "1.0"}) {
    auto e = error_of([&] { check_test_standby(bad); });
    EXPECT_NE(e.find(std::string("KAGENT_TEST_STANDBY='") + bad + "'"), std::string::npos) << bad << " -> " << e;
    EXPECT_NE(e.find("0 to 4"), std::string::npos) << bad;
  }
}

TEST(Environment, NcuStandbyMustBeZeroToFour) {
  for (const char* ok : {"", "0", "1", "2", "4"}) EXPECT_EQ(error_of([&] { check_ncu_standby(ok); }), "") << ok;
  for (const char* bad : {"5", "-1", "on", "02", " 2", "2 ", "1.0"}) {
    auto e = error_of([&] { check_ncu_standby(bad); });
    EXPECT_NE(e.find(std::string("KAGENT_NCU_STANDBY='") + bad + "'"), std::string::npos) << bad << " -> " << e;
    EXPECT_NE(e.find("0 to 4"), std::string::npos) << bad;
  }
  check_environment({{"KAGENT_NCU_STANDBY", "2"}});
  EXPECT_NE(error_of([&] { check_environment({{"KAGENT_NCU_STANDBY", "yes"}}); }), "");
}

TEST(Environment, InjectFaultMustNameKnownFaultsAndCandidates) {
  for (const char* ok : {"", "candidate_throw:r1_c0", "gpu_worker_throw:*", "candidate_throw:r1_c0,gpu_worker_throw:r2_c1"})
    EXPECT_EQ(error_of([&] { check_inject_fault(ok); }), "") << ok;
  const std::vector<std::pair<std::string, std::string>> bad{
      {"garbage", "has no ':<id>'"},
      {"candidate_crash:r1_c0", "unknown fault 'candidate_crash'"},
      {"candidate_throw:", "names no candidate"},
      {"candidate_throw:r1 c0", "is not a candidate id"},
      {"candidate_throw:r1_c0,", "empty entry"},
      {",candidate_throw:r1_c0", "empty entry"},
      {"candidate_throw:r1_c0,,gpu_worker_throw:*", "empty entry"},
  };
  for (const auto& [value, why] : bad) {
    auto e = error_of([&] { check_inject_fault(value); });
    EXPECT_NE(e.find("KAGENT_INJECT_FAULT='" + value + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(why), std::string::npos) << value << " -> " << e;
    EXPECT_NE(e.find("expected comma-separated candidate_throw:<id> or gpu_worker_throw:<id>"), std::string::npos);
  }
  EXPECT_NE(error_of([] { check_environment({{"KAGENT_INJECT_FAULT", "x"}}); }).find("KAGENT_INJECT_FAULT"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_environment({{"KAGENT_REPLAY_DELAY_S", "x"}}); }).find("KAGENT_REPLAY_DELAY_S"),
            std::string::npos);
  EXPECT_EQ(error_of([] { check_environment({{"PATH", "/bin"}}); }), "");
}

TEST(KernelDir, AGoodDirectoryPasses) {
  temp_dir t;
  EXPECT_EQ(error_of([&] { check_kernel_files(t.kernel_dir("k"), 1024); }), "");
}

TEST(KernelDir, ASymlinkLoopIsAUsageErrorNotACrash) {
  temp_dir t;
  fs::create_symlink(t.path / "loop", t.path / "loop");
  const auto dir = (t.path / "loop").string();
  auto e = error_of([&] { check_kernel_files(dir, 1024); });
  EXPECT_NE(e.find("--kernel-dir " + dir + ": cannot be read (Too many levels of symbolic links)"), std::string::npos)
      << e;
  // A loop in one of its files is named too.
  auto k = t.kernel_dir("k");
  fs::remove(fs::path(k) / "test.py");
  fs::create_symlink(fs::path(k) / "test.py", fs::path(k) / "test.py");
  EXPECT_NE(error_of([&] { check_kernel_files(k, 1024); }).find("test.py cannot be read"), std::string::npos);
}

TEST(KernelDir, AFileMissingFilesAndDirectoriesNamedLikeFilesAreRefused) {
  temp_dir t;
  auto f = t.write("file", "x");
  EXPECT_NE(error_of([&] { check_kernel_files(f, 1024); }).find("not a directory"), std::string::npos);
  auto k = t.kernel_dir("k");
  fs::remove(fs::path(k) / "problem.py");
  fs::create_directories(fs::path(k) / "problem.py");
  EXPECT_NE(error_of([&] { check_kernel_files(k, 1024); }).find("missing problem.py"), std::string::npos);
  EXPECT_NE(error_of([] { check_kernel_files("", 1024); }).find("--kernel-dir is required"), std::string::npos);
}

TEST(KernelDir, OversizedFilesAreRefusedWithTheBound) {
  temp_dir t;
  auto k = t.kernel_dir("k", "def kernel_function():\n" + std::string(5000, '#') + "\n");
  auto e = error_of([&] { check_kernel_files(k, 4096); });
  EXPECT_NE(e.find("input.py is 4.9 KiB (5024 bytes), over max_kernel_bytes (4096 bytes)"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { check_kernel_files(k, 8192); }), "");
  t.write("k/test.py", std::string(9000, '#'));
  EXPECT_NE(error_of([&] { check_kernel_files(k, 8192); }).find("test.py is"), std::string::npos);
}

TEST(KernelDir, NonUtf8FilesAreRefusedWithTheOffset) {
  temp_dir t;
  auto k = t.kernel_dir("k", "def kernel_function():\n  return 1  # caf\xe9\n");
  auto e = error_of([&] { check_kernel_files(k, 1024); });
  EXPECT_NE(e.find("input.py is not valid UTF-8 (first bad byte at offset 40)"), std::string::npos) << e;
  t.write("k/input.py", "def kernel_function():\n  return 1  # caf\xc3\xa9\n");
  EXPECT_EQ(error_of([&] { check_kernel_files(k, 1024); }), "");
}

TEST(RunDir, ExistingMissingAndNestedMissingDirectoriesPass) {
  temp_dir t;
  EXPECT_EQ(error_of([&] { check_run_dir_base(t.path.string()); }), "");
  EXPECT_EQ(error_of([&] { check_run_dir_base((t.path / "a/b/c").string()); }), "");
  EXPECT_FALSE(fs::exists(t.path / "a")) << "the check must not create anything";
}

TEST(RunDir, AFileOrAFileOnThePathIsRefused) {
  temp_dir t;
  auto f = t.write("runs", "not a directory");
  EXPECT_NE(error_of([&] { check_run_dir_base(f); }).find("is not a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { check_run_dir_base(f + "/sub"); }).find(f + " is not a directory"), std::string::npos);
  fs::create_symlink(t.path / "loop", t.path / "loop");
  EXPECT_NE(error_of([&] { check_run_dir_base((t.path / "loop").string()); }).find("cannot be used"), std::string::npos);
}

TEST(RunDir, AReadOnlyDirectoryIsRefusedEvenForRoot) {
  temp_dir t;
  fs::create_directories(t.path / "ro");
  fs::permissions(t.path / "ro", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const auto ro = (t.path / "ro").string();
  auto e = error_of([&] { check_run_dir_base(ro); });
  EXPECT_NE(e.find("--run-dir " + ro + ": " + ro + " is read-only"), std::string::npos) << e;
  // A missing directory below it could not be created either.
  EXPECT_NE(error_of([&] { check_run_dir_base(ro + "/new"); }).find("is read-only"), std::string::npos);
  EXPECT_NE(error_of([&] { check_resume_dir(ro); }).find("--resume " + ro + ": read-only"), std::string::npos);
}

TEST(ResumeDir, AFileOrALoopIsRefused) {
  temp_dir t;
  auto f = t.write("run", "x");
  EXPECT_NE(error_of([&] { check_resume_dir(f); }).find("not a directory"), std::string::npos);
  fs::create_symlink(t.path / "loop", t.path / "loop");
  EXPECT_NE(error_of([&] { check_resume_dir((t.path / "loop").string()); }).find("cannot be read"), std::string::npos);
  EXPECT_EQ(error_of([&] { check_resume_dir(t.path.string()); }), "");
}
