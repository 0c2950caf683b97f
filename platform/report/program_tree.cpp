#include "platform/report/program_tree.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace kagent::report {

program_tree build_program_tree(const std::vector<store::program_record>& programs) {
  program_tree t;
  const std::size_t n = programs.size();
  t.children.resize(n);
  std::unordered_map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < n; ++i) index.emplace(programs[i].id, i);  // the first of equal ids wins
  std::vector<std::size_t> parent(n, n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& pid = programs[i].parent_id;
    if (!pid || pid->empty()) continue;
    auto it = index.find(*pid);
    if (it == index.end() || it->second == i) continue;
    parent[i] = it->second;
    t.children[it->second].push_back(i);
  }
  std::vector<bool> reached(n, false);
  auto mark = [&](std::size_t root) {
    std::vector<std::size_t> stack{root};
    while (!stack.empty()) {
      const auto k = stack.back();
      stack.pop_back();
      if (reached[k]) continue;
      reached[k] = true;
      for (auto c : t.children[k]) stack.push_back(c);
    }
  };
  for (std::size_t i = 0; i < n; ++i)
    if (parent[i] == n) {
      t.roots.push_back(i);
      mark(i);
    }
  // What is left hangs in a cycle: its first member becomes a root, cut from its parent.
  for (std::size_t i = 0; i < n; ++i) {
    if (reached[i]) continue;
    auto& siblings = t.children[parent[i]];
    siblings.erase(std::remove(siblings.begin(), siblings.end(), i), siblings.end());
    t.roots.push_back(i);
    mark(i);
  }
  return t;
}

} // namespace kagent::report
