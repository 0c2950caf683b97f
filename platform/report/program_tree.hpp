#pragma once
// Every program of a run under its parent, for the search tree of report.html. Programs whose
// parent is unknown (not in the database, empty, or themselves) are roots, and so is the first
// member of any parent cycle, so each program appears exactly once.
#include <cstddef>
#include <vector>

#include "platform/store/program_db.hpp"

namespace kagent::report {

struct program_tree {
  std::vector<std::size_t> roots;                   ///< indexes into the programs, insertion order
  std::vector<std::vector<std::size_t>> children;   ///< children[i]: the children of programs[i], in order
};

program_tree build_program_tree(const std::vector<store::program_record>& programs);

} // namespace kagent::report
