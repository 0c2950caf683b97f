#include "tests/report/report_fixture.hpp"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>

#include "platform/store/event_log.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/run_directory.hpp"
#include "platform/store/util.hpp"
#include "platform/common/files.hpp"

namespace kagent::report::test {

namespace fs = std::filesystem;
using nlohmann::json;

void scratch_dir::SetUp() {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = fs::temp_directory_path() /
         ("kagent-report-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + info->name());
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

void scratch_dir::TearDown() {
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

const char* const initial_code = R"(import triton
import triton.language as tl

# starting kernel </pre> & friends
@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2, mask=mask)

def launch(x, y):
    n = x.numel()
    kernel[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
)";

const char* const best_code = R"(import triton
import triton.language as tl

# starting kernel </pre> & friends
@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")
    tl.store(y_ptr + offs, x + x, mask=mask)

def launch(x, y):
    n = x.numel()
    kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024, num_warps=8)
)";

namespace {

store::program_record program(const std::string& id, std::optional<std::string> parent, int round, const char* status,
                              std::optional<double> time_ms, const std::string& code) {
  store::program_record p;
  p.id = id;
  p.parent_id = std::move(parent);
  p.round = round;
  p.worker = round == 0 ? -1 : 0;
  p.gpu_id = round == 0 ? 0 : (id.back() - '0') % 2;
  p.status = status;
  p.time_ms = time_ms;
  p.code = code;
  p.code_hash = store::sha256_hex(code);
  return p;
}

json base_summary(const store::run_directory& rd) {
  return {{"strategy", "noop"}, {"search", "beam_search"}, {"kernel_dir", "examples/double"},
          {"run_dir", rd.path().string()}, {"run_id", rd.run_id()}, {"vendor", ""}, {"devices", {0, 1}},
          {"gpu_name", "H200"}};
}

} // namespace

fs::path make_finished_run(const fs::path& base) {
  auto rd = store::run_directory::create(base, "report-fixture", "strategy: noop\n");
  auto db = store::program_db::open(rd.program_db_path());
  store::event_log log(rd.events_path());
  log.append("run_start", {{"strategy", "noop"}, {"search", "beam_search"}, {"kernel_dir", "examples/double"},
                           {"devices", {0, 1}}, {"gpu_name", "H200"}, {"platform", "noop"}, {"max_rounds", 2},
                           {"schedule", "rounds"}});
  db.insert_program(program("initial", std::nullopt, 0, store::program_status::verified, 2.0, initial_code));
  log.append("initial", {{"initial_ms", 2.0}, {"eager_ms", 3.0}, {"compile_ms", 2.5}, {"best_ms", 2.0}});

  const std::string mid_code = std::string(initial_code) + "# r1_c0: wider blocks\n";
  struct cand {
    std::string id, parent;
    int round;
    bool ok;
    std::optional<double> t;
    std::string cause, error, code;
  };
  const std::vector<cand> cands = {
      {"r1_c0", "initial", 1, true, 1.5, "", "", mid_code},
      {"r1_c1", "initial", 1, true, 1.8, "", "", std::string(initial_code) + "# r1_c1\n"},
      {"r1_c2", "initial", 1, false, std::nullopt, "verification",
       "mismatch at <script>alert(1)</script> index 3 & 4\nsecond line", "bad"},
      {"r2_c0", "r1_c0", 2, false, std::nullopt, "timeout", "timed out after 30 s", "slow"},
      {"r2_c1", "r1_c0", 2, true, 1.0, "", "", best_code},
  };
  double best = 2.0;
  int round = 0;
  for (const auto& c : cands) {
    if (c.round != round) {
      if (round > 0) log.append("round_end", {{"round", round}, {"best_ms", best}});
      round = c.round;
      log.append("round_start", {{"round", round}, {"max_rounds", 2}, {"candidates", round == 1 ? 3 : 2}});
    }
    log.append("candidate_start", {{"candidate_id", c.id}, {"parent_id", c.parent}, {"round", c.round},
                                   {"gpu_id", (c.id.back() - '0') % 2}, {"slot", 0}});
    auto p = program(c.id, c.parent, c.round, c.ok ? store::program_status::verified : store::program_status::failed,
                     c.t, c.code);
    if (!c.ok) {
      p.failure_cause = c.cause;
      p.error = c.error;
    }
    p.bottleneck = "memory";
    p.model = "claude-opus-4.5";
    if (c.ok) p.floor_pct = 0.45 / *c.t * 100;  // a 0.45 ms hardware floor: r2_c1 is at 45.0 %
    db.insert_program(p);
    const bool new_best = c.ok && *c.t < best;
    if (new_best) best = *c.t;
    log.append("candidate_result", {{"candidate_id", c.id}, {"parent_id", c.parent}, {"round", c.round},
                                    {"gpu_id", (c.id.back() - '0') % 2}, {"ok", c.ok},
                                    {"time_ms", c.t ? json(*c.t) : json(nullptr)}, {"failure_cause", c.cause},
                                    {"error", c.error}, {"best_ms", best}, {"device_s", 2.5}, {"llm_s", 10.0},
                                    {"new_best", new_best}});
    if (c.id == "r1_c2")
      log.append("mode_change", {{"gpu_id", 1}, {"mode", "synthetic"}, {"reason", "rocprofv3 timed out"},
                                 {"invocation", "rocprofv3 --kernel-trace"}});
  }
  log.append("round_end", {{"round", 2}, {"best_ms", best}, {"best_program_id", "r2_c1"}});
  for (int i = 0; i < 3; ++i) {
    store::llm_call_record c;
    c.purpose = i == 2 ? "reflexion" : "optimize";
    c.model = "claude-opus-4.5";
    c.tokens_in = 1000;
    c.tokens_out = 500;
    c.cost_usd = 0.01;
    c.ok = i != 1;
    db.record_llm_call(c);
    log.append("llm_call", {{"purpose", c.purpose}, {"model", c.model}, {"tokens_in", 1000}, {"tokens_out", 500},
                             {"cost_usd", 0.01}, {"ok", c.ok}});
  }
  log.append("run_end", {{"success", true}, {"best_ms", 1.0}, {"error", ""}});
  rd.write_best_kernel(best_code);

  json s = base_summary(rd);
  s["success"] = true;
  s["eager_ms"] = 3.0;
  s["compile_ms"] = 2.5;
  s["initial_ms"] = 2.0;
  s["best_ms"] = 1.0;
  s["best_program_id"] = "r2_c1";
  s["best_kernel_path"] = rd.best_kernel_path().string();
  s["speedup_vs_initial"] = 2.0;
  s["rounds"] = 2;
  s["candidates"] = 5;
  s["verified"] = 4;
  s["failed"] = 2;
  s["failures_by_cause"] = db.failures_by_cause();
  s["llm"] = {{"calls", 3}, {"failed_calls", 1}, {"tokens_in", 3000}, {"tokens_out", 1500}, {"cost_usd", 0.03}};
  s["analysis_mode"] = {{"0", "profiled"}, {"1", "synthetic"}};
  s["wall_s"] = 100.0;
  rd.write_summary(s);
  return rd.path();
}

fs::path make_failed_run(const fs::path& base) {
  auto rd = store::run_directory::create(base, "report-failed", "strategy: noop\n");
  auto db = store::program_db::open(rd.program_db_path());
  store::event_log log(rd.events_path());
  log.append("run_start", {{"strategy", "noop"}, {"devices", {0}}});
  auto init = program("initial", std::nullopt, 0, store::program_status::failed, std::nullopt, initial_code);
  init.failure_cause = "verification";
  init.error = "max abs diff 1e9 > atol";
  db.insert_program(init);
  const std::string error = "Initial kernel failed correctness verification: max abs diff 1e9 > atol";
  log.append("error", {{"what", "initial kernel failed verification"}, {"error", "max abs diff 1e9 > atol"}});
  log.append("run_end", {{"success", false}, {"best_ms", nullptr}, {"error", error}});
  json s = base_summary(rd);
  s["devices"] = {0};
  s["success"] = false;
  s["error"] = error;
  s["eager_ms"] = nullptr;
  s["compile_ms"] = nullptr;
  s["initial_ms"] = nullptr;
  s["best_ms"] = nullptr;
  s["rounds"] = 0;
  s["candidates"] = 0;
  s["verified"] = 0;
  s["failed"] = 1;
  s["failures_by_cause"] = db.failures_by_cause();
  s["llm"] = {{"calls", 0}, {"failed_calls", 0}, {"tokens_in", 0}, {"tokens_out", 0}, {"cost_usd", 0.0}};
  s["wall_s"] = 3.0;
  rd.write_summary(s);
  return rd.path();
}

fs::path make_no_candidate_run(const fs::path& base) {
  auto rd = store::run_directory::create(base, "report-nocand", "strategy: noop\n");
  auto db = store::program_db::open(rd.program_db_path());
  store::event_log log(rd.events_path());
  log.append("run_start", {{"strategy", "noop"}, {"devices", {0}}, {"max_rounds", 0}});
  db.insert_program(program("initial", std::nullopt, 0, store::program_status::verified, 2.0, initial_code));
  log.append("initial", {{"initial_ms", 2.0}, {"eager_ms", 3.0}, {"compile_ms", nullptr}, {"best_ms", 2.0}});
  log.append("run_end", {{"success", true}, {"best_ms", 2.0}, {"error", ""}});
  json s = base_summary(rd);
  s["devices"] = {0};
  s["success"] = true;
  s["eager_ms"] = 3.0;
  s["compile_ms"] = nullptr;
  s["initial_ms"] = 2.0;
  s["best_ms"] = 2.0;
  s["best_program_id"] = "initial";
  s["rounds"] = 0;
  s["candidates"] = 0;
  s["verified"] = 1;
  s["failed"] = 0;
  s["failures_by_cause"] = json::object();
  s["wall_s"] = 5.0;
  rd.write_summary(s);
  return rd.path();
}

const char* const hostile_reply = "Here is the kernel.\n</pre><script>alert('reply')</script><pre>\n"
                                  "<img src=x onerror=alert(2)>\n```python\nprint(1)\n```\n";

namespace {

void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

} // namespace

fs::path make_tree_run(const fs::path& base) {
  const auto run = make_finished_run(base);
  {
    auto db = store::program_db::open(run / "program.db");
    store::event_log log(run / "events.jsonl");
    auto dup = program("r2_c2", std::string("r1_c0"), 2, store::program_status::failed, 1.0, best_code);
    dup.failure_cause = "duplicate";
    dup.error = "same compiled code as r2_c1";
    dup.model = "gpt-5";
    db.insert_program(dup);
    log.append("candidate_result", {{"candidate_id", "r2_c2"}, {"parent_id", "r1_c0"}, {"round", 2}, {"ok", false},
                                    {"time_ms", nullptr}, {"failure_cause", "duplicate"},
                                    {"error", "same compiled code as r2_c1"}, {"best_ms", 1.0}});
    auto div = program("r2_c3", std::string("r1_c1"), 2, store::program_status::verified, 3.5,
                       std::string(initial_code) + "# r2_c3: much slower\n");
    div.model = "gpt-5";
    div.bottleneck = "compute";
    div.floor_pct = 0.45 / 3.5 * 100;
    db.insert_program(div);
    log.append("candidate_result", {{"candidate_id", "r2_c3"}, {"parent_id", "r1_c1"}, {"round", 2}, {"ok", true},
                                    {"time_ms", 3.5}, {"time_spread_pct", 3.2}, {"best_ms", 1.0}, {"diverged", true}});
    db.set_state_json("diverged", json::array({"r2_c3"}));
    db.set_state("profile:r2_c1", json{{"metrics", json::object()},
                                       {"roofline", {{"efficiency_pct", 71.5}, {"compute_sol_pct", 20.0},
                                                     {"memory_sol_pct", 71.5}, {"bottleneck", "memory"}}}}
                                      .dump());
    store::attempt_record a;
    a.round_num = 2;
    a.program_id = "r2_c1";
    a.bottleneck_category = "memory";
    a.root_cause = "128-wide blocks leave bandwidth unused";
    a.recommended_fix = "1024-wide blocks with eviction hints";
    db.insert_attempt(a);
  }
  const auto c = run / "candidates";
  write_text(c / "r2_c1" / "1_optimize_prompt.txt", "Optimize this kernel. PROMPT-MARKER-r2_c1\nx < y && z\n");
  write_text(c / "r2_c1" / "1_optimize_reply.txt", hostile_reply);
  write_text(c / "r2_c1" / "kernel.py", best_code);
  write_text(c / "r1_c0" / "1_optimize_prompt.txt", "PROMPT-HEAD\n" + std::string(30 * 1024, 'p') + "\nPROMPT-TAIL-NOT-SHOWN\n");
  write_text(c / "r1_c2" / "verify_0.log", "FIRST-LOG-LINE\n" + std::string(30 * 1024, 'l') + "\nLAST-LOG-LINE\n");
  write_text(c / "r1_c2" / "2_refine_prompt.txt", "refine it");
  json s = json::parse(read_file(run / "summary.json"));
  s["candidates"] = 7;
  s["verified"] = 5;
  s["failed"] = 3;
  s["diverged"] = 1;
  s["run_state"] = "finished";
  {
    auto db = store::program_db::open(run / "program.db", store::program_db::mode::read_only);
    s["failures_by_cause"] = db.failures_by_cause();
  }
  store::write_file_atomic(run / "summary.json", s.dump(2));
  return run;
}

fs::path make_running_run(const fs::path& base) {
  const auto run = make_tree_run(base);
  fs::remove(run / "summary.json");
  {
    auto db = store::program_db::open(run / "program.db");
    db.insert_program(program("r3_c0", std::string("r2_c1"), 3, store::program_status::pending, std::nullopt, ""));
    db.set_state("status", "running");
  }
  // Drop run_end: the run has not ended.
  std::string kept;
  std::istringstream in(slurp(run / "events.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (line.find("\"run_end\"") == std::string::npos) kept += line + "\n";
  store::write_file_atomic(run / "events.jsonl", kept);
  return run;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace kagent::report::test
