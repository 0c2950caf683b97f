#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

namespace {
const std::string matvec = source("examples/optimize_01_matvec");
// A PATH without GPU tools: this host "has no GPU" whatever the machine running the tests has.
const kagent::env_map no_gpu_tools{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}};
} // namespace

TEST(DryRun, NoopRunWritesTheWholeRunDirectoryAndSucceeds) {
  scratch s;
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto run = dirs.front();
  for (const char* f : {"config.yaml", "events.jsonl", "program.db", "summary.json", "output/best_kernel.py"})
    EXPECT_TRUE(fs::exists(run / f)) << f;
  EXPECT_NE(slurp(run / "config.yaml").find("platform: noop"), std::string::npos);

  auto summary = nlohmann::json::parse(slurp(run / "summary.json"));
  EXPECT_TRUE(summary["success"].get<bool>()) << summary.dump(2);  // SPEC §14 B.87: a dry run succeeds
  EXPECT_DOUBLE_EQ(summary["initial_ms"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(summary["best_ms"].get<double>(), 1.0);
  EXPECT_GE(summary["candidates"].get<int>(), 1);
  EXPECT_GE(summary["llm"]["calls"].get<int>(), 1);  // the replay provider served the LLM path

  auto ev = events(run);
  for (const char* t : {"run_start", "initial", "round_start", "llm_call", "candidate_result", "round_end", "run_end"})
    EXPECT_TRUE(has_event(ev, t)) << t;
  for (const auto& e : ev) EXPECT_TRUE(e.contains("ts"));

  auto db = program_db::open(run / "program.db", program_db::mode::read_only);
  EXPECT_EQ(db.journal_mode(), "wal");
  auto initial = db.get_program("initial");
  ASSERT_TRUE(initial.has_value());
  ASSERT_TRUE(initial->time_ms.has_value());  // the measured initial time is stored
  EXPECT_DOUBLE_EQ(*initial->time_ms, 1.0);
  EXPECT_EQ(initial->code, slurp(fs::path(matvec) / "input.py"));
  EXPECT_GE(db.count(), 2);
  EXPECT_EQ(db.count("pending"), 0);
  auto best = slurp(run / "output/best_kernel.py");
  EXPECT_NE(best.find("def kernel_function"), std::string::npos);
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos);
}

TEST(DryRun, EachRunGetsItsOwnDatabase) {  // SPEC §14 B.108
  scratch s;
  for (int i = 0; i < 2; ++i) {
    auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 2u);
  for (const auto& d : dirs) {
    auto db = program_db::open(d / "program.db", program_db::mode::read_only);
    EXPECT_EQ(db.list_programs({.round = 1}).size(), 1u) << d;
  }
}

TEST(Supervision, ThrowingCandidateAndThrowingGpuWorkerFailAloneAndTheRunGoesOn) {
  scratch s;
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--max-rounds",
                "3"},
               {{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", "candidate_throw:r1_c0,gpu_worker_throw:r2_c1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  auto c0 = db.get_program("r1_c0");
  ASSERT_TRUE(c0);
  EXPECT_EQ(c0->status, "failed");
  EXPECT_EQ(c0->failure_cause.value_or(""), "actor_down");
  EXPECT_NE(c0->error.value_or("").find("injected fault: candidate_throw:r1_c0"), std::string::npos);
  auto c1 = db.get_program("r2_c1");
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->status, "failed");
  EXPECT_NE(c1->error.value_or("").find("gpu worker failed"), std::string::npos);
  auto c2 = db.get_program("r3_c2");  // served by the respawned gpu worker
  ASSERT_TRUE(c2);
  EXPECT_EQ(c2->status, "verified");
  auto ev = events(run_dir);
  bool respawned = false;
  for (const auto& e : ev)
    if (e.value("type", "") == "note" && e.value("what", "") == "gpu worker respawned") respawned = true;
  EXPECT_TRUE(respawned);
  auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  EXPECT_TRUE(summary["success"].get<bool>());
  EXPECT_EQ(summary["failures_by_cause"]["actor_down"].get<int>(), 2);
}

TEST(Cli, MissingKernelFileIsNamedWithExitCode2) {
  scratch s;
  s.write("k/input.py", "x = 1\n");
  s.write("k/problem.py", "x = 1\n");
  auto r = run({"--strategy", "noop", "--kernel-dir", (s.dir / "k").string(), "--run-dir", (s.dir / "runs").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing test.py"), std::string::npos) << r.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());  // bad input never creates a run directory
}

TEST(Cli, NoKernelDirIsAUsageError) {
  auto r = run({"--strategy", "noop"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kernel-dir is required"), std::string::npos) << r.err;
}

TEST(Cli, UnknownFlagAndBadValuesExit2) {
  EXPECT_EQ(run({"--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(run({"--max-rounds", "zero", "--kernel-dir", matvec}).exit_code, 2);
  auto g = run({"--strategy", "noop", "--kernel-dir", matvec, "--gpu-ids", "0,x"});
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find("--gpu-ids"), std::string::npos);
}

TEST(Cli, UnknownStrategyListsTheKnownOnes) {
  auto r = run({"--strategy", "fastest", "--kernel-dir", matvec});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown strategy 'fastest'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("noop"), std::string::npos);
}

TEST(Cli, TyposGetADidYouMeanAndRangesReadAsRanges) {
  auto s = run({"--strategy", "nvidai", "--kernel-dir", matvec});
  EXPECT_EQ(s.exit_code, 2);
  EXPECT_NE(s.err.find("unknown strategy 'nvidai' (did you mean 'nvidia'?)"), std::string::npos) << s.err;
  auto f = run({"--max-round", "3", "--kernel-dir", matvec});
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_NE(f.err.find("unknown flag --max-round; did you mean --max-rounds?"), std::string::npos) << f.err;
  auto c = run({"gpuz"});
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("did you mean gpus?"), std::string::npos) << c.err;
  auto z = run({"--max-rounds", "0", "--kernel-dir", matvec});
  EXPECT_EQ(z.exit_code, 2);
  EXPECT_NE(z.err.find("--max-rounds 0: expected 1 to 10000"), std::string::npos) << z.err;
  EXPECT_LT(z.err.size(), 300u) << z.err;  // no 300-digit bound
}

TEST(Cli, VersionHelpAndListStrategies) {
  auto v = run({"--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_NE(v.out.find("kagent-actors"), std::string::npos);
  auto h = run({"--help"});
  EXPECT_EQ(h.exit_code, 0);
  for (const char* f : {"--kernel-dir", "--strategy", "--max-rounds", "--run-dir", "--resume", "--model", "--gpu-ids",
                        "--list-strategies", "--verbose"})
    EXPECT_NE(h.out.find(f), std::string::npos) << f;
  auto l = run({"--list-strategies"}, no_gpu_tools);
  EXPECT_EQ(l.exit_code, 0);
  for (const char* n : {"amd", "nvidia", "noop", "beam_search", "greedy", "cpu"})
    EXPECT_NE(l.out.find(n), std::string::npos) << n;
}

TEST(Cli, ResumeOfSomethingThatIsNotAResumableRunIsAUsageError) {
  scratch s;
  auto r = run({"--resume", (s.dir / "nothing-here").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  // A finished run has nothing to resume, and resuming it leaves it as it was.
  auto done = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()});
  ASSERT_EQ(done.exit_code, 0) << done.err;
  auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto summary = slurp(dirs[0] / "summary.json");
  auto again = run({"--resume", dirs[0].string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("finished already"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(dirs[0] / "summary.json"), summary);
}

TEST(Config, TypoWrongTypeAndBrokenSyntaxExit2WithFileLineAndKey) {
  scratch s;
  s.write("cfg/typo.yaml", "strategy: greedy\nplatform: noop\nmax_rouns: 2\n");
  s.write("cfg/wrongtype.yaml", "strategy: greedy\nplatform: noop\nmax_rounds: two\n");
  s.write("cfg/broken.yaml", "strategy: greedy\nplatform: [noop\nmax_rounds: 2\n");
  const kagent::env_map env{{"KAGENT_CONFIG_DIR", (s.dir / "cfg").string()}, {"PATH", "/usr/bin:/bin"}};
  auto t = run({"--strategy", "typo", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, env);
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_NE(t.err.find("typo.yaml:3:"), std::string::npos) << t.err;
  EXPECT_NE(t.err.find("'max_rouns'"), std::string::npos) << t.err;
  auto w = run({"--strategy", "wrongtype", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, env);
  EXPECT_EQ(w.exit_code, 2);
  EXPECT_NE(w.err.find("wrongtype.yaml:3:"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("'max_rounds' must be an integer"), std::string::npos) << w.err;
  auto b = run({"--strategy", "broken", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, env);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("broken.yaml:"), std::string::npos) << b.err;
  EXPECT_NE(b.err.find("YAML syntax error"), std::string::npos) << b.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());
}

TEST(Gpu, VendorStrategyOnAHostWithoutGpusIsAClearError) {
  scratch s;
  auto r = run({"--strategy", "nvidia", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no GPU visible"), std::string::npos) << r.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());
}

TEST(Gpu, MaskConflictIsCheckedFirstEvenForNoop) {  // SPEC §10.2 rule 2
  scratch s;
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()},
               {{"CUDA_VISIBLE_DEVICES", "1"}, {"HIP_VISIBLE_DEVICES", "0"}, {"PATH", "/usr/bin:/bin"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << r.err;
}

TEST(Secrets, NoKeyReachesTheRunDirectory) {
  scratch s;
  const std::string key = "sk-test-0123456789abcdefSECRET";
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()},
               {{"OPENAI_API_KEY", key}, {"ANTHROPIC_API_KEY", key}, {"PATH", "/usr/bin:/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& e : fs::recursive_directory_iterator(run_dirs(s.dir / "runs").front())) {
    if (e.is_regular_file()) {
      EXPECT_EQ(slurp(e.path()).find(key), std::string::npos) << e.path();
    }
  }
}

TEST(Llm, AReplyWithoutCodeIsRejectedBeforeDeviceWorkAndTheReasonGoesBack) {
  scratch s;
  s.write("replay/optimize_001.md", "I would rather describe the idea than write the kernel.\n");
  s.write("replay/optimize_followup_001.md", "Still only prose.\n");
  s.write("replay/optimize_followup_002.md", "```python\n" + slurp(fs::path(matvec) / "input.py") + "# tuned\n```\n");
  auto cfg = slurp(source("configs/noop.yaml"));
  cfg.replace(cfg.find("provider: replay"), 16, "provider: replay\n  replay_dir: " + (s.dir / "replay").string());
  s.write("cfg/nocode.yaml", cfg);
  auto r = run({"--strategy", (s.dir / "cfg/nocode.yaml").string(), "--kernel-dir", matvec, "--run-dir",
                (s.dir / "runs").string(), "--max-rounds", "1"},
               no_gpu_tools);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto run_dir = run_dirs(s.dir / "runs").front();
  auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
  EXPECT_EQ(db.get_program("r1_c0")->status, "verified");
  std::vector<std::string> purposes;
  for (const auto& c : db.list_llm_calls())
    if (c.purpose.rfind("optimize", 0) == 0) purposes.push_back(c.purpose);
  EXPECT_EQ(purposes, (std::vector<std::string>{"optimize", "optimize_followup", "optimize_followup"}));
  auto followup = slurp(run_dir / "candidates/r1_c0/2_optimize_followup_prompt.txt");
  EXPECT_NE(followup.find("could not be used"), std::string::npos) << followup;
}

// A bad LLM set-up is a usage error before anything is created: one line, exit 2, no run directory
// (it used to start a run whose every LLM call failed, and a malformed replay set hung it).
TEST(Llm, BadProviderSettingsExit2BeforeTheRunStarts) {
  scratch s;
  s.write("replay/optimize_001.md", "<!-- replay\nmatch:\n-->\nx\n");
  auto cfg = slurp(source("configs/noop.yaml"));
  cfg.replace(cfg.find("provider: replay"), 16, "provider: replay\n  replay_dir: " + (s.dir / "replay").string());
  s.write("cfg/badreplay.yaml", cfg);
  auto r = run({"--strategy", (s.dir / "cfg/badreplay.yaml").string(), "--kernel-dir", matvec, "--run-dir",
                (s.dir / "runs").string()},
               no_gpu_tools, "", 60);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("optimize_001.md line 2"), std::string::npos) << r.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());

  auto nokey = slurp(source("configs/noop.yaml"));
  nokey.replace(nokey.find("provider: replay"), 16, "provider: openai");
  s.write("cfg/nokey.yaml", nokey);
  auto env = no_gpu_tools;
  env["OPENAI_API_KEY"] = "";
  auto k = run({"--strategy", (s.dir / "cfg/nokey.yaml").string(), "--kernel-dir", matvec, "--run-dir",
                (s.dir / "runs").string()},
               env, s.dir.string(), 60);
  EXPECT_EQ(k.exit_code, 2) << k.err;
  EXPECT_NE(k.err.find("OPENAI_API_KEY"), std::string::npos) << k.err;
  EXPECT_TRUE(run_dirs(s.dir / "runs").empty());
}

TEST(Install, AnInstalledTreeRunsFromAnywhereWithItsOwnConfigsTemplatesAndHarness) {
  // `cmake --install` (what scripts/install.sh runs) into a fresh prefix: the installed binary finds
  // PREFIX/share/kagent-actors from its own location — not the checkout it was built from — lists
  // its strategies from there and runs, from an unrelated directory.
  scratch s;
  const auto prefix = s.dir / "prefix";
  kagent::process_spec in;
  in.argv = {"cmake", "--install", KAGENT_BINARY_DIR, "--prefix", prefix.string()};
  in.timeout = std::chrono::seconds(120);
  auto inst = kagent::run_process(in);
  ASSERT_TRUE(inst.ok()) << inst.describe() << inst.err << inst.out;
  const auto bin = prefix / "bin/kagent-actors";
  const auto share = prefix / "share/kagent-actors";
  ASSERT_TRUE(fs::exists(bin));
  for (const char* f : {"configs/noop.yaml", "configs/cpu.yaml", "templates", "harness/evaluator.py", "harness/judge.py"})
    EXPECT_TRUE(fs::exists(share / f)) << f;
  EXPECT_FALSE(fs::exists(share / "harness/tests")) << "the harness's own tests are not installed";
  fs::create_directories(s.dir / "elsewhere");
  auto env = kagent::current_environment();
  env.erase("KAGENT_HOME");
  env.erase("KAGENT_CONFIG_DIR");
  env["PATH"] = "/usr/bin:/bin";
  env["KAGENT_INJECT_FAULT"] = "";
  auto run_installed = [&](std::vector<std::string> args) {
    kagent::process_spec p;
    p.argv = {bin.string()};
    p.argv.insert(p.argv.end(), args.begin(), args.end());
    p.env = env;
    p.cwd = (s.dir / "elsewhere").string();
    p.timeout = std::chrono::seconds(120);
    return kagent::run_process(p);
  };
  auto list = run_installed({"--list-strategies"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find((share / "configs/noop.yaml").string()), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find(source("configs")), std::string::npos) << "it read the checkout's configs:\n" << list.out;
  auto r = run_installed({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", "runs", "--max-rounds", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(run_dirs(s.dir / "elsewhere/runs").size(), 1u);
}

TEST(Quiet, OnlyTheEndAndTheSummaryAreShown) {
  scratch s;
  auto r = run({"--strategy", "noop", "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string(), "--quiet"},
               no_gpu_tools);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(r.err.find("round 1"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("run start"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run end: success"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("== kagent-actors summary"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("\033["), std::string::npos) << "colours on a pipe";
}

TEST(Tty, EveryRedrawnProgressLineFitsAnEightyColumnTerminal) {
  // script(1) gives the run a real terminal, 80 columns wide. A progress line wider than that wraps,
  // and the next redraw (\r, clear to the end of the row) clears only its last row: the rest stays
  // behind as a stale line. So every line that is redrawn over must be at most 79 columns.
  scratch s;
  const std::string cmd = "stty cols 80 rows 24 && exec '" + binary() + "' --strategy noop --kernel-dir '" + matvec +
                          "' --run-dir '" + (s.dir / "runs").string() + "'";
  kagent::process_spec spec;
  spec.argv = {"script", "-qec", cmd, "/dev/null"};
  auto env = kagent::current_environment();
  env["PATH"] = "/usr/bin:/bin";
  env["TERM"] = "xterm";
  env.erase("KAGENT_INJECT_FAULT");
  env.erase("COLUMNS");
  spec.env = env;
  spec.timeout = std::chrono::seconds(240);
  auto r = kagent::run_process(spec);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string text = std::regex_replace(r.out, std::regex("\033\\[[0-9;?]*[A-Za-z]"), "");
  int redrawn = 0;
  std::string seg;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // the terminal's newline
    if (c == '\n') {
      seg.clear();
      continue;
    }
    if (c == '\r') {
      if (!seg.empty()) {
        ++redrawn;
        EXPECT_LE(seg.size(), 79u) << "a redrawn line wider than the terminal: '" << seg << "'";
      }
      seg.clear();
      continue;
    }
    seg += c;
  }
  EXPECT_GE(redrawn, 2) << "no progress line was redrawn on the terminal:\n" << r.out;
  EXPECT_NE(text.find("round 1/2"), std::string::npos) << text;
}

TEST(ResumeExtends, AFinishedRunGoesOnOnlyWhenMaxRoundsGoesBeyondItsLastRound) {
  // A finished run is not resumed again, unless --max-rounds goes beyond the rounds it ran: then it
  // goes on from its last round, with the candidates it had kept as they were and new ones after,
  // and its totals count both sessions.
  scratch s;
  const auto cfg = s.write("ext.yaml",
                           "strategy: beam_search\nnum_workers: 2\nmax_rounds: 1\nstrategy_config:\n"
                           "  num_top_kernels: 1\n  num_bottlenecks: 2\nplatform: noop\ntarget_platform: cuda\n"
                           "llm:\n  provider: replay\n");
  auto first = run({"--strategy", cfg, "--kernel-dir", matvec, "--run-dir", (s.dir / "runs").string()}, no_gpu_tools);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto dirs = run_dirs(s.dir / "runs");
  ASSERT_EQ(dirs.size(), 1u);
  const auto run_dir = dirs[0];
  auto programs = [&] {
    std::map<std::string, std::string> out;
    auto db = program_db::open(run_dir / "program.db", program_db::mode::read_only);
    for (const auto& p : db.list_programs()) out[p.id] = p.status;
    return out;
  };
  const auto before = programs();

  auto again = run({"--resume", run_dir.string()}, no_gpu_tools);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("finished already"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("--max-rounds N with N > 1"), std::string::npos) << again.err;
  auto same = run({"--resume", run_dir.string(), "--max-rounds", "1"}, no_gpu_tools);
  EXPECT_EQ(same.exit_code, 2) << same.err;
  EXPECT_EQ(programs(), before);  // refusals touch nothing

  auto more = run({"--resume", run_dir.string(), "--max-rounds", "2"}, no_gpu_tools);
  ASSERT_EQ(more.exit_code, 0) << more.err;
  const auto summary = nlohmann::json::parse(slurp(run_dir / "summary.json"));
  EXPECT_EQ(summary.value("rounds", 0), 2) << summary.dump(2);
  EXPECT_EQ(summary.value("sessions", 0), 2);
  EXPECT_EQ(summary.value("run_state", ""), "finished");
  const auto after = programs();
  EXPECT_GT(after.size(), before.size());
  for (const auto& [id, status] : before) {
    ASSERT_TRUE(after.count(id)) << id;
    EXPECT_EQ(after.at(id), status) << id;
  }
}
