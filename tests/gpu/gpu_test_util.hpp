#pragma once
// Helpers shared by the GPU tests: temp dirs, a bin dir holding the chosen fakes, fixture files.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent::test {

namespace fs = std::filesystem;

/// A fresh directory removed at scope exit.
struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "kagent-gpu-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

inline fs::path fakes_dir() { return fs::path(KAGENT_SOURCE_DIR) / "tests" / "fakes"; }
inline fs::path fixture(const std::string& name) { return fakes_dir() / "fixtures" / "gpu" / name; }

inline void write_file(const fs::path& p, const std::string& text, bool executable = false) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
  if (executable)
    fs::permissions(p, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A bin dir with the named fakes (symlinked) and a `python3` that runs the real interpreter, so the
/// child PATH can be this dir alone: no real nvidia-smi / amd-smi of the host can leak in.
inline fs::path make_bin(const fs::path& root, const std::vector<std::string>& tools) {
  auto bin = root / "bin";
  fs::create_directories(bin);
  for (const auto& t : tools) fs::create_symlink(fakes_dir() / t, bin / t);
  // A real interpreter, not a pyenv-style shim that itself needs bash and the user's PATH.
  auto real_python = find_on_path("python3", "/usr/bin:/usr/local/bin:/bin");
  if (real_python.empty()) real_python = find_on_path("python3", std::getenv("PATH") ? std::getenv("PATH") : "");
  write_file(bin / "python3", "#!/bin/sh\nexec " + real_python + " \"$@\"\n", true);
  return bin;
}

}  // namespace kagent::test
