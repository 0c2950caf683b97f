#include "platform/common/files.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "platform/common/errors.hpp"

namespace kagent {

namespace {

std::optional<std::string> slurp(const std::filesystem::path& path, std::string* why) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (why) *why = "it is a directory";
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (why) *why = std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) {
    if (why) *why = "read error";
    return std::nullopt;
  }
  return buf.str();
}

} // namespace

std::string read_file(const std::filesystem::path& path) {
  std::string why;
  auto text = slurp(path, &why);
  if (!text) throw run_error("cannot read " + path.string() + ": " + why);
  return *text;
}

std::optional<std::string> read_file_if_present(const std::filesystem::path& path) { return slurp(path, nullptr); }

} // namespace kagent
