#pragma once
// Error types shared by every layer. What separates them is who can fix the problem, because that
// decides the exit code: a user_error (bad flag, bad YAML, bad mask, missing file) exits 2, anything
// else that ends a run exits 1.
#include <stdexcept>
#include <string>

namespace kagent {

/// A problem the user can fix. what() is one line naming what, where and what was expected.
class user_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A failure of the run itself (a tool, the run directory, a child process) rather than of its input.
class run_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace kagent
