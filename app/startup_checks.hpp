#pragma once
// What the command line and the environment hand a run, checked before anything is created: each
// function throws user_error with one line naming the flag, variable or file and what was expected
// (exit 2), so that bad input never reaches a run directory.
#include <cstddef>
#include <string>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent::app {

/// `--gpu-ids 0,1`: distinct non-negative integers, comma-separated.
std::vector<int> parse_gpu_ids(const std::string& s);

/// `KAGENT_REPLAY_DELAY_S`: empty, or a number of seconds from 0 to below 3600.
void check_replay_delay(const std::string& value);

/// `KAGENT_INJECT_FAULT`: empty, or comma-separated `candidate_throw:<id>` / `gpu_worker_throw:<id>`
/// where <id> is a candidate id (letters, digits, `_`, `-`, `.`) or `*`.
void check_inject_fault(const std::string& value);

/// Both variables above, as `env` holds them.
/// KAGENT_NOOP_DEVICE_S (a noop device's seconds per request): empty, or seconds in (0, 600].
void check_noop_device_time(const std::string& value);
/// KAGENT_TEST_STANDBY (how many test.py processes wait started ahead): empty, or one digit 0 to 4.
void check_test_standby(const std::string& value);
/// KAGENT_NCU_STANDBY: how many ncu processes wait started ahead, "0" to "4" (or unset/empty).
void check_ncu_standby(const std::string& value);
void check_environment(const env_map& env);

/// The kernel directory: a readable directory (a symlink loop or a file is refused) holding
/// input.py, problem.py and test.py as regular files, each at most `max_bytes` (max_kernel_bytes)
/// and valid UTF-8: each goes into every prompt, and input.py reaches the harness through JSON.
void check_kernel_files(const std::string& dir, size_t max_bytes);

/// `--run-dir`: an existing directory we may write into, or a path whose nearest existing ancestor
/// is one. A file, a read-only directory (no write permission bit, or not writable by us) or an
/// unreadable path is refused.
void check_run_dir_base(const std::string& base);

/// `--resume RUN_DIR`: a directory we may write into (the resumed run appends to it).
void check_resume_dir(const std::string& dir);

} // namespace kagent::app
