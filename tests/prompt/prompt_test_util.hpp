#pragma once
// Small helpers shared by the prompt and analysis tests.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace kagent::test {

inline std::string root() { return KAGENT_SOURCE_DIR; }

inline size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

/// A temp file with `text`, removed at scope exit.
struct temp_file {
  std::filesystem::path path;
  explicit temp_file(const std::string& text, const std::string& tag = "tmpl") {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("kagent-prompt-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".mustache");
    std::ofstream(path, std::ios::binary) << text;
  }
  ~temp_file() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  std::string str() const { return path.string(); }
};

} // namespace kagent::test
