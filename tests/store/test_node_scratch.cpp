// platform/store/node_scratch: a run's files on a node, the files sent back, and where they land.
#include <gtest/gtest.h>

#include <fstream>

#include "platform/common/files.hpp"
#include "platform/store/node_scratch.hpp"
#include "platform/store/util.hpp"
#include "tests/store/test_helpers.hpp"

namespace fs = std::filesystem;
using namespace kagent::store;

namespace {

class NodeScratch : public test::scratch_dir {};

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

} // namespace

TEST_F(NodeScratch, AWorkDirMapsInsideTheRunRootWhateverTheManagerSends) {
  const fs::path root = dir_ / "run";
  EXPECT_EQ(node_work_dir(root, "candidates/r1_c0"), root / "candidates/r1_c0");
  EXPECT_EQ(node_work_dir(root, "candidates/./r1_c0/"), root / "candidates/r1_c0/");
  for (const std::string hostile : {"../../etc", "/etc/passwd", "candidates/../../x", "..", ""}) {
    const auto p = node_work_dir(root, hostile).lexically_normal();
    const auto rel = p.lexically_relative(root);
    EXPECT_FALSE(rel.empty()) << hostile;
    EXPECT_NE(*rel.begin(), "..") << hostile << " -> " << p;
    EXPECT_EQ(*rel.begin(), "elsewhere") << hostile << " -> " << p;
  }
}

TEST_F(NodeScratch, OnlyFilesWrittenOrChangedSinceTheStampsTravelAndCachesStay) {
  const fs::path d = dir_ / "w";
  put(d / "kept.txt", "old");
  put(d / "changed.txt", "v1");
  const auto before = stamp_files(d);
  put(d / "changed.txt", "v2 longer");
  put(d / "new/verify.log", "log");
  put(d / "triton/abc/kernel.cubin", "cache");
  put(d / "__pycache__/x.pyc", "pyc");
  put(d / "tmp/scratch", "tmp");
  auto files = files_written_since(d, before);
  std::map<std::string, std::string> got;
  for (auto& f : files) got[f.path] = f.bytes;
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"changed.txt", "v2 longer"}, {"new/verify.log", "log"}}));
}

TEST_F(NodeScratch, AFileOverALimitTravelsAsANoteWithItsSizeAndHashNeverDroppedSilently) {
  const fs::path d = dir_ / "w";
  put(d / "a_big.csv", std::string(100, 'x'));
  put(d / "b.log", std::string(30, 'y'));
  put(d / "c.log", std::string(30, 'z'));
  const auto files = files_written_since(d, {}, /*max_file_bytes=*/64, /*max_reply_bytes=*/50);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, "a_big.csv.omitted.txt");
  EXPECT_NE(files[0].bytes.find("a_big.csv (100 bytes, sha256 " + sha256_hex(std::string(100, 'x')) +
                                ") stayed on the node: over the 64 bytes limit of one file"),
            std::string::npos)
      << files[0].bytes;
  EXPECT_EQ(files[1].path, "b.log");
  EXPECT_EQ(files[2].path, "c.log.omitted.txt") << "past the reply's limit";
  EXPECT_NE(files[2].bytes.find("over the 50 bytes limit of one reply"), std::string::npos) << files[2].bytes;
  const auto defaults = files_written_since(d, {});
  EXPECT_EQ(defaults.size(), 3u);
  EXPECT_EQ(defaults[0].path, "a_big.csv");
}

TEST_F(NodeScratch, ShippedFilesAreWrittenInsideTheWorkDirOnly) {
  const fs::path w = dir_ / "run/candidates/r1_c0";
  const std::vector<shipped_file> files{{"verify.log", "ok"},
                                        {"profile_x/metrics.json", "{}"},
                                        {"../../escaped.txt", "no"},
                                        {"/tmp/absolute.txt", "no"},
                                        {"", "no"}};
  EXPECT_EQ(write_shipped_files(w, files), 2u);
  EXPECT_EQ(kagent::read_file(w / "verify.log"), "ok");
  EXPECT_EQ(kagent::read_file(w / "profile_x/metrics.json"), "{}");
  EXPECT_FALSE(fs::exists(dir_ / "run/escaped.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "escaped.txt"));
}

TEST_F(NodeScratch, ARunsScratchHoldsItsKernelDirectoryUntilItIsRemoved) {
  const auto run = open_node_scratch_run(dir_ / "scratch", "cpu-optimize/01 matvec", 3, "in", "prob", "test");
  EXPECT_EQ(run.dir, dir_ / "scratch" / "cpu-optimize_01_matvec-3");
  EXPECT_EQ(kagent::read_file(run.kernel_dir() / "input.py"), "in");
  EXPECT_EQ(kagent::read_file(run.kernel_dir() / "problem.py"), "prob");
  EXPECT_EQ(kagent::read_file(run.kernel_dir() / "test.py"), "test");
  EXPECT_TRUE(fs::is_directory(run.run_dir()));
  EXPECT_EQ(open_node_scratch_run(dir_ / "scratch", "", 1, "", "", "").dir, dir_ / "scratch" / "run-1");
  remove_node_scratch_run(run);
  EXPECT_FALSE(fs::exists(run.dir));
}
