// `runs`, `show`, `report`, `--print-config` and `--dry-run` through the binary. One real cpu run
// (one round) serves every InspectRuns case (SetUpTestSuite; ctest runs the suite in one process),
// next to copies of it made to look killed, live and corrupt. The plan flags run no search at all.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sstream>

#include "platform/store/program_db.hpp"
#include "platform/store/run_lock.hpp"
#include "tests/e2e/e2e_util.hpp"

using namespace e2e;
using kagent::store::program_db;

namespace {

const std::string matvec = source("examples/optimize_01_matvec");
const kagent::env_map base_env{{"PATH", "/usr/bin:/bin"}, {"KAGENT_INJECT_FAULT", ""}, {"KAGENT_PYTHON", KAGENT_PYTHON}};

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

constexpr const char* killed_id = "29990101-000000-cpu-killed-0000";
constexpr const char* live_id = "29980101-000000-cpu-live-0000";
constexpr const char* corrupt_id = "19990101-000000-corrupt-0000";

} // namespace

class InspectRuns : public ::testing::Test {
protected:
  static inline scratch* s = nullptr;
  static inline fs::path base, run;          // the real run
  static inline std::string run_id, skip_reason;
  static inline nlohmann::json summary;
  static inline kagent::store::run_lock* live_lock = nullptr;

  static void SetUpTestSuite() {
    s = new scratch();
    base = s->dir / "runs";
    auto r = e2e::run({"--strategy", "cpu", "--max-rounds", "1", "--kernel-dir", matvec, "--run-dir", base.string()},
                      base_env, s->dir.string(), 280);
    if (r.exit_code != 0 && contains(r.err + r.out, "No module named")) {
      skip_reason = "the harness interpreter " + std::string(KAGENT_PYTHON) + " lacks torch/triton";
      return;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    auto dirs = run_dirs(base);
    ASSERT_EQ(dirs.size(), 1u);
    run = dirs.front();
    run_id = run.filename().string();
    summary = nlohmann::json::parse(slurp(run / "summary.json"));

    // Killed: status running, no summary, nobody holds the lock.
    fs::copy(run, base / killed_id, fs::copy_options::recursive);
    fs::remove(base / killed_id / "summary.json");
    fs::remove(base / killed_id / "report.html");
    fs::remove(base / killed_id / ".lock");
    program_db::open(base / killed_id / "program.db").set_state("status", "running");
    // Live: the same, but this process holds its lock as a running kagent-actors would.
    fs::copy(base / killed_id, base / live_id, fs::copy_options::recursive);
    live_lock = new kagent::store::run_lock(base / live_id);
    // Corrupt: nothing readable.
    s->write(std::string("runs/") + corrupt_id + "/config.yaml", "");
    s->write(std::string("runs/") + corrupt_id + "/program.db", "this is not sqlite\n");
    s->write(std::string("runs/") + corrupt_id + "/summary.json", "{\"success\": tr");
    s->write("runs/not-a-run/notes.txt", "a directory without run files is not listed\n");
  }

  static void TearDownTestSuite() {
    delete live_lock;
    live_lock = nullptr;
    delete s;
    s = nullptr;
  }

  void SetUp() override {
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;
    ASSERT_FALSE(run_id.empty()) << "the cpu run of SetUpTestSuite failed";
  }
};

TEST_F(InspectRuns, RunsTableIsNewestFirstAlignedAndSaysWhatIsUnknown) {
  auto r = e2e::run({"runs", base.string()}, base_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto ls = lines(r.out);
  ASSERT_EQ(ls.size(), 5u) << r.out;  // header + 4 runs; not-a-run is not listed
  EXPECT_TRUE(ls[0].rfind("RUN", 0) == 0) << ls[0];
  EXPECT_TRUE(ls[1].rfind(killed_id, 0) == 0) << r.out;
  EXPECT_TRUE(ls[2].rfind(live_id, 0) == 0) << r.out;
  EXPECT_TRUE(ls[3].rfind(run_id, 0) == 0) << r.out;
  EXPECT_TRUE(ls[4].rfind(corrupt_id, 0) == 0) << r.out;
  // Columns line up: every row has its status where the header has STATUS.
  const auto col = ls[0].find("STATUS");
  ASSERT_NE(col, std::string::npos);
  EXPECT_EQ(ls[1].substr(col, 7), "stopped") << r.out;
  EXPECT_EQ(ls[2].substr(col, 7), "running") << r.out;
  EXPECT_EQ(ls[3].substr(col, 8), "finished") << r.out;
  EXPECT_EQ(ls[4].substr(col, 7), "unknown") << r.out;
  const auto started = ls[0].find("STARTED");
  EXPECT_EQ(ls[3].substr(started, 10), run_id.substr(0, 4) + "-" + run_id.substr(4, 2) + "-" + run_id.substr(6, 2));
  EXPECT_TRUE(contains(ls[3], "cpu")) << ls[3];
  EXPECT_TRUE(contains(ls[3], fmt::format("{:.2f}x", summary["speedup_vs_initial"].get<double>()))) << ls[3];
  EXPECT_TRUE(contains(ls[1], "--resume")) << ls[1];
  EXPECT_TRUE(contains(ls[4], "program.db cannot be read")) << ls[4];
  EXPECT_TRUE(contains(ls[4], "summary.json is not a JSON object")) << ls[4];
}

TEST_F(InspectRuns, RunsJsonIsAnArrayWithTheSummaryNumbers) {
  auto r = e2e::run({"runs", "--json", base.string()}, base_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u);
  const auto& real = j[2];
  EXPECT_EQ(real["run_id"], run_id);
  EXPECT_EQ(real["status"], "finished");
  EXPECT_EQ(real["strategy"], "cpu");
  EXPECT_DOUBLE_EQ(real["best_ms"].get<double>(), summary["best_ms"].get<double>());
  EXPECT_NEAR(real["speedup_vs_initial"].get<double>(), summary["speedup_vs_initial"].get<double>(), 1e-9);
  EXPECT_EQ(real["candidates"], summary["candidates"]);
  EXPECT_EQ(j[0]["status"], "stopped");
  EXPECT_EQ(j[0]["db_status"], "running");
  EXPECT_EQ(j[1]["status"], "running");
  EXPECT_TRUE(j[1]["lock_held"].get<bool>());
  EXPECT_EQ(j[3]["status"], "unknown");
  EXPECT_TRUE(j[3]["best_ms"].is_null());
  EXPECT_FALSE(j[3]["problems"].empty());
  // The root command's --run-dir before the subcommand names the base as well.
  auto root = e2e::run({"--run-dir", base.string(), "runs", "--json"}, base_env);
  EXPECT_EQ(root.exit_code, 0) << root.err;
  EXPECT_EQ(root.out, r.out);
}

TEST_F(InspectRuns, RunsOfAnEmptyMissingOrFileBase) {
  s->write("empty/.keep", "");
  fs::remove(s->dir / "empty/.keep");
  auto e = e2e::run({"runs", (s->dir / "empty").string()}, base_env);
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_EQ(lines(e.out).size(), 1u) << e.out;
  EXPECT_TRUE(contains(e.out, "no runs")) << e.out;
  // The default base (.optimize) not there yet: one line, exit 0, and nothing created.
  auto d = e2e::run({"runs"}, base_env, (s->dir / "empty").string());
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(contains(d.out, ".optimize")) << d.out;
  EXPECT_FALSE(fs::exists(s->dir / "empty/.optimize"));
  auto m = e2e::run({"runs", (s->dir / "missing").string()}, base_env);
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_TRUE(m.err.rfind("kagent-actors: error: ", 0) == 0) << m.err;
  EXPECT_EQ(lines(m.err).size(), 1u) << m.err;
  auto f = e2e::run({"runs", (run / "summary.json").string()}, base_env);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_TRUE(contains(f.err, "is not a directory")) << f.err;
}

TEST_F(InspectRuns, ShowByIdAndByPath) {
  auto r = e2e::run({"show", run_id, "--run-dir", base.string()}, base_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string want : {"status:", "finished", "strategy:", "cpu", "kernel dir:", "best kernel:",
                                 "output/best_kernel.py", "initial", "eager", "compile", "candidates:", "verified",
                                 "LLM:", "calls", "wall time:", "top kernels:"})
    EXPECT_TRUE(contains(r.out, want)) << want << "\n" << r.out;
  EXPECT_TRUE(contains(r.out, fmt::format("{:.2f}x", summary["speedup_vs_initial"].get<double>()))) << r.out;
  // A unique prefix of the id and the directory's path work as well.
  auto p = e2e::run({"show", run.string()}, base_env);
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out, r.out);
  auto k = e2e::run({"--run-dir", base.string(), "show", "2999"}, base_env);
  EXPECT_EQ(k.exit_code, 0) << k.err;
  EXPECT_TRUE(contains(k.out, "stopped")) << k.out;
  EXPECT_TRUE(contains(k.out, "--resume")) << k.out;
  EXPECT_TRUE(contains(k.out, "top kernels:")) << k.out;  // from program.db: there is no summary
}

TEST_F(InspectRuns, ShowJsonIsTheSummaryWithTheDatabaseStatus) {
  auto r = e2e::run({"show", run.string(), "--json"}, base_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const auto& [k, v] : summary.items()) EXPECT_EQ(j[k], v) << k;
  EXPECT_EQ(j["status"], "finished");
  EXPECT_TRUE(j["summary_present"].get<bool>());
  auto k = e2e::run({"show", (base / killed_id).string(), "--json"}, base_env);
  ASSERT_EQ(k.exit_code, 0) << k.err;
  auto kj = nlohmann::json::parse(k.out);
  EXPECT_EQ(kj["status"], "stopped");
  EXPECT_FALSE(kj["summary_present"].get<bool>());
  EXPECT_DOUBLE_EQ(kj["best_ms"].get<double>(), summary["best_ms"].get<double>());
  EXPECT_EQ(kj["llm"]["calls"], summary["llm"]["calls"]);
  auto c = e2e::run({"show", (base / corrupt_id).string(), "--json"}, base_env);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["status"], "unknown");
}

TEST_F(InspectRuns, ShowAndReportErrorsAreOneLineExit2) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"show", "no-such-run", "--run-dir", base.string()},
        {"show", "2", "--run-dir", base.string()},  // ambiguous prefix
        {"show", (base / "not-a-run").string()},
        {"report", "no-such-run", "--run-dir", base.string()},
        {"report", (s->dir / "nowhere").string()}}) {
    auto r = e2e::run(args, base_env);
    EXPECT_EQ(r.exit_code, 2) << args[1] << r.out;
    EXPECT_TRUE(r.err.rfind("kagent-actors: error: ", 0) == 0) << r.err;
    EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  }
  EXPECT_EQ(e2e::run({"show"}, base_env).exit_code, 2);
}

TEST_F(InspectRuns, ReportRendersAgainAlsoForAKilledRun) {
  auto r = e2e::run({"report", killed_id, "--run-dir", base.string()}, base_env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path page = (base / killed_id / "report.html");
  EXPECT_EQ(r.out, fs::absolute(page).string() + "\n");
  ASSERT_TRUE(fs::exists(page));
  EXPECT_TRUE(contains(slurp(page), "<html")) << slurp(page).substr(0, 200);
  // The finished run's page is written again (same path), and a corrupt run still gets a page.
  fs::remove(run / "report.html");
  EXPECT_EQ(e2e::run({"report", run.string()}, base_env).exit_code, 0);
  EXPECT_TRUE(fs::exists(run / "report.html"));
  EXPECT_EQ(e2e::run({"report", (base / corrupt_id).string()}, base_env).exit_code, 0);
}

// --- the plan flags: no search, no directory ---------------------------------------------------

TEST(PlanFlags, PrintConfigShowsTheOverriddenConfigAndCreatesNothing) {
  scratch s;
  auto r = e2e::run({"--print-config", "--strategy", "cpu", "--max-rounds", "2", "--provider", "openai", "--model",
                     "gpt-5-mini", "--budget-usd", "2.5"},
                    base_env, s.dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\nmax_rounds: 2\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "openai_model: gpt-5-mini")) << r.out;
  EXPECT_TRUE(contains(r.out, "provider: openai\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "budget_usd: 2.5\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "platform: cpu")) << r.out;
  EXPECT_TRUE(fs::is_empty(s.dir));
  auto bad = e2e::run({"--print-config", "--strategy", "nope"}, base_env, s.dir.string());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(bad.err.rfind("kagent-actors: error: ", 0) == 0) << bad.err;
  auto range = e2e::run({"--print-config", "--strategy", "cpu", "--max-rounds", "0"}, base_env, s.dir.string());
  EXPECT_EQ(range.exit_code, 2) << range.out;
  EXPECT_TRUE(fs::is_empty(s.dir));
}

TEST(PlanFlags, DryRunPrintsThePlanAndCreatesNothing) {
  scratch s;
  const auto runs = (s.dir / "runs").string();
  auto r = e2e::run({"--dry-run", "--strategy", "cpu", "--max-rounds", "2", "--kernel-dir", matvec, "--run-dir", runs},
                    base_env, s.dir.string(), 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.wall_s, 20);
  // cpu.yaml: beam of 2, 2 bottlenecks, 1 model, 1 sample, 3 refinements: round 1 has 2 candidates,
  // round 2 up to 4; each at most 1 + 3 + 1 calls; 1 + 2 analyses.
  for (const std::string want :
       {"strategy:", "cpu", "beam_search", "platform:", "devices:", "0", "round 1: 2", "up to 4", "at most 6 in all",
        "at most 33 = 6 candidates x (1 optimize + 3 refinements + 1 reflexion) + 3 bottleneck analyses",
        "tokens:", "cost:", "est. $"})
    EXPECT_TRUE(contains(r.out, want)) << want << "\n" << r.out;
  EXPECT_TRUE(fs::is_empty(s.dir)) << "a dry run created something";

  // A GPU strategy on a host without GPU tools: the plan says what detection found, still exit 0.
  auto g = e2e::run({"--dry-run", "--strategy", "nvidia"}, base_env, s.dir.string(), 60);
  EXPECT_EQ(g.exit_code, 0) << g.err;
  EXPECT_TRUE(contains(g.out, "detection failed")) << g.out;
  EXPECT_TRUE(contains(g.out, "at most 10")) << g.out;  // nvidia.yaml's rounds
  EXPECT_TRUE(contains(g.out, "up to 8 launch-constant variants per kernel")) << g.out;  // and its tune_variants
  EXPECT_FALSE(contains(r.out, "launch-constant variants")) << r.out;  // cpu.yaml has none
  EXPECT_TRUE(fs::is_empty(s.dir));

  // What a run would refuse, a dry run refuses the same way.
  auto k = e2e::run({"--dry-run", "--strategy", "cpu", "--kernel-dir", (s.dir / "nokernel").string()}, base_env,
                    s.dir.string());
  EXPECT_EQ(k.exit_code, 2);
  EXPECT_TRUE(k.err.rfind("kagent-actors: error: ", 0) == 0) << k.err;
  EXPECT_TRUE(fs::is_empty(s.dir));
}
