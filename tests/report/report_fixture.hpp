#pragma once
// Synthetic run directories for the report tests, written through the real store APIs
// (run_directory, program_db, event_log), shaped like what the manager leaves behind.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace kagent::report::test {

/// A fresh scratch directory per test, removed afterwards.
class scratch_dir : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;
  std::filesystem::path dir_;
};

/// The starting kernel's code of the fixtures: contains `<`, `&` and a "</pre>" comment, which
/// the page must escape.
extern const char* const initial_code;
/// The best kernel's code: three lines differ from initial_code.
extern const char* const best_code;

/// A finished run under `base`: initial (2.0 ms) -> r1_c0 (1.5 ms) -> r2_c1 (1.0 ms, the best),
/// plus r1_c1 (verified 1.8 ms), r1_c2 (failed verification, error with "<script>"), r2_c0
/// (failed timeout); three LLM calls; gpu 1 switched to synthetic. Returns the run directory.
std::filesystem::path make_finished_run(const std::filesystem::path& base);

/// A run whose starting kernel failed verification: no candidates, no best, success false.
std::filesystem::path make_failed_run(const std::filesystem::path& base);

/// A run that finished with the starting kernel only (zero candidates); best = initial.
std::filesystem::path make_no_candidate_run(const std::filesystem::path& base);

/// The finished run plus what the search tree and the candidate details show: r2_c2 (a
/// duplicate of r2_c1, parent r1_c0), r2_c3 (verified 3.5 ms with a 3.2 % spread, diverged,
/// parent r1_c1), a profile of r2_c1 (71.5 % of peak), an attempt for r2_c1, and candidate files:
/// r2_c1's prompt (with "PROMPT-MARKER-r2_c1") and reply (with "</pre><script>"), a 30 KB prompt
/// of r1_c0 ("PROMPT-HEAD" ... "PROMPT-TAIL-NOT-SHOWN") and a 30 KB verification log of r1_c2
/// ("FIRST-LOG-LINE" ... "LAST-LOG-LINE").
std::filesystem::path make_tree_run(const std::filesystem::path& base);

/// make_tree_run while it is still running: no summary.json, no run_end event, program.db status
/// "running", and r3_c0 (child of r2_c1) pending.
std::filesystem::path make_running_run(const std::filesystem::path& base);

/// The reply text of r2_c1 in make_tree_run (tries to break out of the page).
extern const char* const hostile_reply;

/// The whole file as text.
std::string slurp(const std::filesystem::path& p);

} // namespace kagent::report::test
