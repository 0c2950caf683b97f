#include "platform/process/proc_tree.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace kagent {

bool parse_proc_stat(const std::string& line, proc_entry& out) {
  const auto open = line.find('(');
  const auto close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  char* end = nullptr;
  const long pid = std::strtol(line.c_str(), &end, 10);
  if (end == line.c_str() || pid <= 0) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string state;
  long ppid = -1;
  if (!(rest >> state >> ppid) || ppid < 0) return false;
  out.pid = static_cast<int>(pid);
  out.ppid = static_cast<int>(ppid);
  out.comm = line.substr(open + 1, close - open - 1);
  return true;
}

std::vector<int> parse_nspid(const std::string& line) {
  std::vector<int> out;
  if (line.rfind("NSpid:", 0) != 0) return out;
  std::istringstream in(line.substr(6));
  long v = 0;
  while (in >> v) {
    if (v <= 0) return {};
    out.push_back(static_cast<int>(v));
  }
  return out;
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string link_target(const std::string& path) {
  char buf[4096];
  const auto n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
}

} // namespace

std::vector<proc_entry> process_tree(int root) {
  std::vector<proc_entry> out;
  if (root <= 0) return out;
  std::map<int, proc_entry> all;
  std::multimap<int, int> children;
  if (DIR* d = ::opendir("/proc")) {
    while (auto* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      proc_entry p;
      if (!parse_proc_stat(read_all("/proc/" + name + "/stat"), p)) continue;  // gone meanwhile
      children.emplace(p.ppid, p.pid);
      all.emplace(p.pid, std::move(p));
    }
    ::closedir(d);
  }
  if (!all.count(root)) return out;
  std::vector<int> todo{root};
  while (!todo.empty()) {
    const int pid = todo.back();
    todo.pop_back();
    auto p = all.at(pid);
    const auto base = "/proc/" + std::to_string(pid);
    p.exe = link_target(base + "/exe");
    {
      std::istringstream status(read_all(base + "/status"));
      for (std::string line; std::getline(status, line);)
        if (line.rfind("NSpid:", 0) == 0) p.nspid = parse_nspid(line);
    }
    const auto raw = read_all(base + "/cmdline");
    for (size_t at = 0; at < raw.size();) {
      const auto nul = raw.find('\0', at);
      p.cmdline.push_back(raw.substr(at, nul == std::string::npos ? std::string::npos : nul - at));
      if (nul == std::string::npos) break;
      at = nul + 1;
    }
    out.push_back(std::move(p));
    for (auto [it, end] = children.equal_range(pid); it != end; ++it) todo.push_back(it->second);
  }
  return out;
}

} // namespace kagent
