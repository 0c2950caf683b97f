#pragma once
// The run context of manager-level tests with scripted gpu workers: beam search 2 x 2 directions, two
// fixed pipelines, noop platform components, devices 0 and 1, the replay provider with one catch-all
// bottleneck reply of two directions (served to every parent's analysis), and a fresh run directory
// under `root`. Each test then sets what it is about (profile policy, profiler, rounds, ...).
#include <caf/all.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "actors/manager.hpp"
#include "platform/store/run_directory.hpp"
#include "tests/support/actor_system.hpp"

namespace kagent::test {

inline void fill_scripted_context(run_context& ctx, const std::filesystem::path& root, const std::string& name,
                                  int rounds) {
  namespace fs = std::filesystem;
  fs::remove_all(root);
  fs::create_directories(root / "replay");
  std::ofstream(root / "replay" / "bottleneck_001.md")
      << R"([{"category": "memory", "summary": "d1: coalesce", "reasoning": "r", "root_causes": []},
             {"category": "compute", "summary": "d2: unroll", "reasoning": "r", "root_causes": []}])";
  auto& c = ctx.cfg;
  c.name = name;
  c.strategy = "beam_search";
  c.strategy_cfg.num_top_kernels = 2;
  c.strategy_cfg.num_bottlenecks = 2;
  c.max_rounds = rounds;
  c.num_workers = 2;
  c.num_workers_auto = false;
  c.profile = "never";
  c.candidate_timeout_s = 60;
  c.llm.provider = "replay";
  c.llm.model = "m";
  for (const auto& n : platform_spec::component_names()) c.platform.component(n) = "noop";
  provider_settings ps;
  ps.provider = "replay";
  ps.model = "m";
  ps.replay_dir = (root / "replay").string();
  ps.replay_cycle = true;
  ctx.llm = make_provider(ps);
  ctx.llm_chosen = {"replay", "m", ps.replay_dir, "test", ""};
  ctx.install_root = KAGENT_SOURCE_DIR;
  ctx.kernel_dir = (root / "kernel").string();
  ctx.input_code = "# the starting kernel\n";
  ctx.device_ids = {0, 1};
  ctx.quiet = true;
  auto rd = store::run_directory::create(root / "runs", name, "name: " + name + "\n");
  ctx.run_path = fs::absolute(rd.path()).string();
}

/// Runs a manager over `ctx` with the gpu workers `fakes` makes, in an actor system of its own, until
/// it reports run_finished (then its exit code and summary are set and true is returned) or 60 s pass.
inline bool run_manager_to_the_end(const context_ptr& ctx, const gpu_worker_factory& fakes, int& code,
                                   nlohmann::json& summary) {
  actor_test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor waiter{sys};
  auto mgr = sys.spawn(manager_actor, ctx, caf::actor{waiter}, fakes);
  waiter->send(mgr, start_atom::value);
  bool done = false;
  waiter->receive(
      [&](const run_finished& end) {
        code = end.exit_code;
        summary = end.summary;
        done = true;
      },
      caf::after(std::chrono::seconds(60)) >> [] {});
  return done;
}

} // namespace kagent::test
