#include <gtest/gtest.h>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

// The cpu platform: real verification and timing in Triton's interpreter, replayed LLM replies.
TEST(CpuRun, BeamSearchOnMatvecFindsAVerifiedFasterKernel) {
  scratch s;
  // The shipped cpu strategy with the torch.compile reference on (configs/cpu.yaml leaves it off), so
  // that one run of the suite times it.
  auto yaml = slurp(source("configs/cpu.yaml"));
  yaml.replace(yaml.find("compile_reference: false"), 24, "compile_reference: true");
  const auto cfg = s.write("cpu.yaml", yaml);
  auto r = run({"--strategy", cfg, "--kernel-dir", source("examples/optimize_01_matvec"), "--run-dir",
                (s.dir / "runs").string()},
               {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}}, "", 540);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  ASSERT_TRUE(summary["success"].get<bool>()) << summary.dump(2);
  EXPECT_TRUE(summary["eager_ms"].is_number());
  EXPECT_TRUE(summary["compile_ms"].is_number()) << "compile_reference: true times torch.compile";
  EXPECT_TRUE(summary["speedup_vs_compile"].is_number());
  EXPECT_TRUE(summary["initial_ms"].is_number());
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  auto best = db.get_program(summary["best_program_id"].get<std::string>());
  ASSERT_TRUE(best);
  EXPECT_EQ(best->status, "verified");
  // The best kernel file is exactly the best verified program, and no verified program is faster.
  EXPECT_EQ(slurp(run_dir / "output/best_kernel.py"), best->code);
  for (const auto& p : db.list_programs({.status = std::string{"verified"}}))
    EXPECT_GE(p.time_ms.value_or(1e300), *best->time_ms) << p.id;
  EXPECT_GE(db.count("verified"), 2);
  // The replay set's fastest correct kernel (examples/optimize_01_matvec/replay/README.md); the
  // async schedule must end at the same one (Search.AsyncScheduleReachesTheSameBestAsRounds).
  EXPECT_NE(best->code.find("# variant: mv-v3\n"), std::string::npos) << best->code.substr(0, 300);
}

TEST(StrategyAll, RunsOnlyTheStrategiesThatFitThisHost) {  // SPEC §14 A.71
  scratch s;
  // Only GPU-less strategies in the config dir we are given plus the built-ins; with no GPU tool on
  // PATH every vendor config must be skipped, never run.
  auto r = run({"--strategy", "all", "--kernel-dir", source("examples/optimize_02_rmsnorm"), "--run-dir",
                (s.dir / "runs").string(), "--max-rounds", "1"},
               {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}}, "", 540);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("== comparison"), std::string::npos);
  for (const char* skipped : {"amd", "nvidia", "beam_search", "greedy"}) {
    auto pos = r.out.find(std::string{" "} + skipped + " ");
    ASSERT_NE(pos, std::string::npos) << skipped << "\n" << r.out;
    auto line_start = r.out.rfind('\n', pos);
    EXPECT_NE(r.out.substr(line_start, pos - line_start).find("skipped"), std::string::npos) << skipped << "\n" << r.out;
  }
  EXPECT_EQ(run_dirs(s.dir / "runs").size(), 2u);  // noop and cpu
}

TEST(CpuRun, ProcessIsolationRunsEveryRequestInAFreshInterpreter) {
  scratch s;
  auto cfg = slurp(source("configs/cpu.yaml"));
  // test.py is not what this is about (UserTest covers it): without it a fresh interpreter less per new best.
  cfg.replace(cfg.find("max_rounds: 3"), 13, "max_rounds: 1\nisolation: process\nuser_test: never");
  s.write("cfg/cpu_process.yaml", cfg);
  auto r = run({"--strategy", "cpu_process", "--kernel-dir", source("examples/optimize_02_rmsnorm"), "--run-dir",
                (s.dir / "runs").string()},
               {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_CONFIG_DIR", (s.dir / "cfg").string()}},
               "", 540);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  EXPECT_TRUE(summary["success"].get<bool>()) << summary.dump(2);
  EXPECT_TRUE(fs::exists(run_dir / "candidates/r1_c0/run_once_verify.json"));
  EXPECT_TRUE(fs::exists(run_dir / "candidates/r1_c0/run_once_benchmark.json"));
  EXPECT_FALSE(fs::exists(run_dir / "workers/gpu0/server.log"));  // no warm server was started
}
