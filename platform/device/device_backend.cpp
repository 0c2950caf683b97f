// The three device backends (see device_backend.hpp).
#include "platform/device/device_backend.hpp"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <set>

#include <nlohmann/json.hpp>

#include "platform/gpu/pinning.hpp"
#include "platform/process/background.hpp"
#include "platform/process/evaluator_client.hpp"
#include "platform/process/runner.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/store/util.hpp"
#include "platform/common/files.hpp"
#include "platform/common/stop.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

constexpr double not_measured = -1.0;
bool is_measured(double ms) { return ms >= 0; }

// Everything a device child writes stays in the run directory (issue 7 "no leaks"): its TMPDIR and
// Triton's cache go under workers/gpu<N>/, and no __pycache__ is written into the kernel directory.
void keep_in_run_dir(env_map& env, const device_settings& s) {
  const auto dir = fs::path(s.run_path) / "workers" / fmt::format("gpu{}", s.device_id);
  fs::create_directories(dir / "tmp");
  env["TMPDIR"] = (dir / "tmp").string();
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  if (!env.count("TRITON_CACHE_DIR")) env["TRITON_CACHE_DIR"] = (dir / "triton_cache").string();
}

// "{scratch}" in a sandbox prefix names the directory a sandboxed process may write.
std::vector<std::string> with_scratch(const std::vector<std::string>& prefix, const std::string& dir) {
  std::vector<std::string> out;
  for (auto a : prefix) {
    for (auto pos = a.find("{scratch}"); pos != std::string::npos; pos = a.find("{scratch}", pos + dir.size()))
      a.replace(pos, 9, dir);
    out.push_back(std::move(a));
  }
  return out;
}

} // namespace

std::string shared_launcher_dir(const std::string& run_path, int device_id) {
  return (fs::path(run_path) / "workers" / fmt::format("gpu{}", device_id) / "launchers" / "shared").string();
}

bool launchers_shareable(const std::string& vendor, const std::string& sandbox_mode, const env_map& env) {
  return vendor == "nvidia" && sandbox_mode == "bwrap" && env_get(env, "KAGENT_SHARED_LAUNCHERS").value_or("1") != "0";
}

std::vector<std::string> with_readonly_bind(const std::vector<std::string>& prefix, const std::string& dir) {
  auto out = prefix;
  const auto cut = std::find(out.begin(), out.end(), "--");
  if (cut == out.end()) return out;
  out.insert(cut, {"--ro-bind", dir, dir});
  return out;
}

namespace {

// A test.py process started before its kernel exists (harness/test_standby.py): a fresh interpreter
// that has imported torch and Triton and waits for DIR/go. The H100 runs of 2026-12-05 spent 8-9 s of
// device time on each test.py, most of it before the test's first line. One standby runs one test and
// exits; on a GPU platform two wait at a time (depth()), and a used one is replaced at once: with
// one, a test that came right after another (a new best just after the starting kernel's test, with
// the references taken from the cache) waited for its replacement to import torch (4.7 s against
// 2.1 s on an H100, 2026-12-06). A waiting standby launches nothing on the device and holds no device
// memory. KAGENT_TEST_STANDBY in the child environment sets the depth (depth()); two that end before
// their test (a broken interpreter) turn it off for the run, and every test.py runs fresh, reporting
// what is wrong.
class user_test_standby {
public:
  ~user_test_standby() { stop(); }

  /// Tops the waiting standbys up to depth().
  void start(const device_settings& s, const env_map& env) {
    drop_ended();
    if (broken_ >= 2 || s.test_path.empty() || s.user_test == "never") return;
    while (ps_.size() < depth(s, env) && !should_give_up() && spawn(s, env)) {
    }
  }

  /// test.py on `code` in the oldest waiting process (the furthest along its imports): the result,
  /// its wall time from the hand-over, and the command as `python test.py` would read; nullopt when
  /// none is waiting (run a fresh one).
  std::optional<process_result> run(const device_settings& s, const std::string& code) {
    drop_ended();
    if (ps_.empty()) return std::nullopt;
    auto p = std::move(ps_.front());
    ps_.pop_front();
    store::write_file_atomic(p->dir / "kernel.py", code);
    store::write_file_atomic(p->dir / "go", "");
    const auto t0 = std::chrono::steady_clock::now();
    const auto how = p->run->wait(std::chrono::duration<double>(s.user_test_timeout_s), [] { return should_give_up(); });
    const bool timed_out = how == background_process::waited::limit;
    const bool gave_up = how == background_process::waited::gave_up;
    auto r = p->run->finish();
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (timed_out) {
      r.timed_out = true;
      r.stopped = false;
      r.term_signal = 0;
      r.exit_code = -1;
    } else if (gave_up) {
      r.stopped = true;
    }
    std::error_code ec;
    fs::remove_all(p->dir, ec);
    broken_ = 0;
    return r;
  }

  void stop() {
    for (auto& p : ps_) {
      p->run->finish();
      std::error_code ec;
      fs::remove_all(p->dir, ec);
    }
    ps_.clear();
  }

  static constexpr double idle_s = 1800;

  /// How many standbys wait. KAGENT_TEST_STANDBY: "0" none (every test.py fresh), "1" to "4" that
  /// many (any other value is refused at start-up, app/startup_checks.cpp); unset: two on GPU
  /// platforms, none on the cpu platform, where candidates
  /// are timed on the host's few cores and a process importing torch beside them would disturb their
  /// timing (a GPU host times on the device and has cores to spare).
  static size_t depth(const device_settings& s, const env_map& env) {
    const auto v = env_get(env, "KAGENT_TEST_STANDBY");
    if (v && v->size() == 1 && (*v)[0] >= '0' && (*v)[0] <= '4') return static_cast<size_t>((*v)[0] - '0');
    return s.verifier != "cpu" ? 2 : 0;
  }

private:
  struct proc {
    fs::path dir;
    std::unique_ptr<background_process> run;
    bool ended() const { return run->ended(); }
  };
  // One more waiting process; false when its directory cannot be made.
  bool spawn(const device_settings& s, const env_map& env) {
    auto p = std::make_unique<proc>();
    const auto base = fs::path(s.run_path) / "workers" / fmt::format("gpu{}", s.device_id);
    std::error_code ec;
    do p->dir = base / fmt::format("user_test_{}", ++seq_);
    while (fs::exists(p->dir, ec) && seq_ < 100000);
    fs::create_directories(p->dir / "tmp", ec);
    if (ec) return false;
    process_spec spec;
    // The launchers the judge's workers built, bound read-only (harness/launchers.py): the test's
    // first call then builds no launcher with the C compiler.
    std::string shared;
    if (launchers_shareable(s.vendor, s.sandbox_mode, env)) {
      shared = shared_launcher_dir(s.run_path, s.device_id);
      fs::create_directories(shared, ec);
      if (ec) shared.clear();
    }
    spec.argv = with_scratch(shared.empty() ? s.sandbox_prefix : with_readonly_bind(s.sandbox_prefix, shared),
                             p->dir.string());
    spec.argv.insert(spec.argv.end(), {s.python, s.install_root + "/harness/test_standby.py", "--dir", p->dir.string(),
                                       "--test", s.test_path, "--idle-s", fmt::format("{}", idle_s)});
    if (!shared.empty()) spec.argv.insert(spec.argv.end(), {"--launchers", shared});
    spec.env = env;
    (*spec.env)["TMPDIR"] = (p->dir / "tmp").string();
    (*spec.env)["TRITON_CACHE_DIR"] = (p->dir / "triton").string();
    spec.cwd = p->dir.string();
    spec.timeout = std::chrono::milliseconds(static_cast<long>((idle_s + s.user_test_timeout_s + 30) * 1000));
    p->run = std::make_unique<background_process>(std::move(spec), fmt::format("test.py standby {}", p->dir.string()));
    ps_.push_back(std::move(p));
    return true;
  }
  // Those that ended before their test: waited idle_s for nothing (fine) or broken (counted).
  void drop_ended() {
    for (auto it = ps_.begin(); it != ps_.end();) {
      if (!(*it)->ended()) {
        ++it;
        continue;
      }
      auto r = (*it)->run->finish();
      if (r.exit_code != 75) ++broken_;
      std::error_code ec;
      fs::remove_all((*it)->dir, ec);
      it = ps_.erase(it);
    }
  }
  std::deque<std::unique_ptr<proc>> ps_;
  int seq_ = 0;
  int broken_ = 0;
};

// The kernel directory's own test.py, the way the original pipeline runs it: a fresh process in a
// directory holding the candidate as kernel.py, exit 0 and "PASS" (a standby's process when one is
// waiting: the same, with torch and Triton already imported). The candidate it imports is untrusted,
// so it runs in the sandbox like every candidate process.
bool run_user_test(const device_settings& s, const env_map& env, const std::string& code, const fs::path& work_dir,
                   device_result& e, user_test_standby* standby = nullptr) {
  if (s.test_path.empty()) return true;
  const auto dir = work_dir / "user_test";
  std::error_code ec;
  std::optional<process_result> ran = standby ? standby->run(s, code) : std::nullopt;
  const bool ahead = ran.has_value();
  if (!ran) {
    fs::remove_all(dir, ec);
    fs::create_directories(dir / "tmp");
    store::write_file_atomic(dir / "kernel.py", code);
    process_spec p;
    p.argv = with_scratch(s.sandbox_prefix, dir.string());
    p.argv.insert(p.argv.end(), {s.python, s.test_path});
    p.env = env;
    (*p.env)["TMPDIR"] = (dir / "tmp").string();
    (*p.env)["TRITON_CACHE_DIR"] = (dir / "triton").string();
    p.cwd = dir.string();
    p.timeout = std::chrono::milliseconds(static_cast<long>(s.user_test_timeout_s * 1000));
    p.drop_privileges = s.sandbox_mode != "bwrap";  // bubblewrap drops them itself
    ran = run_process(p);
  }
  if (standby) standby->start(s, env);  // the next test's process, while this one's result is read
  const auto& r = *ran;
  const std::string output = r.out + (r.err.empty() ? "" : "\n--- stderr ---\n" + r.err);
  store::write_file_atomic(work_dir / "user_test.log",
                           fmt::format("$ {} {}{}\n{}\n[{}]\n", s.python, s.test_path,
                                       ahead ? "   (in a process started ahead: torch and Triton imported, "
                                               "harness/test_standby.py)"
                                             : "",
                                       output, r.describe()));
  fs::remove_all(dir / "triton", ec);
  fs::remove_all(dir / "tmp", ec);
  e.wall_s += r.wall_s;
  e.user_test_s += r.wall_s;
  if (r.ok() && r.out.find("PASS") != std::string::npos) {
    e.user_tested = true;
    return true;
  }
  e.failure_cause = failure_kind::user_test;
  e.error = fmt::format("the kernel directory's test.py failed ({}{}): {}", r.describe(),
                        r.ok() ? ", no PASS in its output" : "", tail_text(output, 1500));
  e.stdout_tail = tail_text(r.out, 4000);
  e.stderr_tail = tail_text(r.err, 4000);
  return false;
}

/// The program hash an evaluator reply carries ({"hash": {"hash": ...}}: verify, benchmark, and
/// run_once's result), "" if none.
std::string hash_in(const nlohmann::json& result) {
  if (!result.is_object() || !result.contains("hash") || !result["hash"].is_object()) return {};
  const auto& h = result["hash"];
  return h.contains("hash") && h["hash"].is_string() ? h["hash"].get<std::string>() : std::string{};
}

// Programs whose test.py passed on this device, by program hash (the compiled kernels and the
// normalised wrapper: what dedup calls the same program). The same program would pass again, so a
// duplicate runs no test.py (measured on the cpu platform: 16 of a run's 28 device-seconds went to
// test.py runs of duplicates whose noisy time fell below the best).
class tested_programs {
public:
  bool passed(const std::string& hash) const { return !hash.empty() && hashes_.count(hash) > 0; }
  void note(const device_result& e) {
    if (e.user_tested && !e.code_hash.empty()) hashes_.insert(e.code_hash);
  }

private:
  std::set<std::string> hashes_;
};

// user_test "best": only a candidate that may become the best runs test.py. The bar is the lower of
// the run's best when the request was sent and the run's recorded best now: requests wait here in turn
// (the H200 run of 2026-12-05 spent 20 s on a test.py for a candidate queued behind a new best it could
// no longer beat). Only kernels that passed test.py are ever recorded as the best. Under "best", a
// program that passed test.py on this device (`hash`, "" before it is known) does not run it again.
bool wants_user_test(const device_settings& s, const device_request& req, double time_ms, const std::string& hash,
                     const tested_programs& tested) {
  if (s.user_test == "never" || s.test_path.empty()) return false;
  if (req.mode == device_mode::start_checks || s.user_test == "every") return true;
  if (tested.passed(hash)) return false;
  double bar = req.best_ms;
  const double now = s.recorded_best_ms ? s.recorded_best_ms->load() : not_measured;
  if (is_measured(now) && (!is_measured(bar) || now < bar)) bar = now;
  return !is_measured(bar) || time_ms < bar;
}

// A benchmark target's median ("candidate", "eager", "compile") in a harness reply; not_measured if none.
double median_of(const nlohmann::json& res, const char* k) {
  if (res.is_object() && res.contains(k) && res[k].is_object() && res[k].contains("median_ms") &&
      res[k]["median_ms"].is_number())
    return res[k]["median_ms"].get<double>();
  return not_measured;
}

// The failure cause of a reply that arrived (the harness's "kind").
failure_kind cause_of_kind(const nlohmann::json& body, failure_kind otherwise) {
  const auto kind = body.is_object() ? body.value("kind", std::string{}) : std::string{};
  if (kind == "integrity") return failure_kind::integrity;
  if (kind == "timeout") return failure_kind::timeout;
  if (kind == "crashed" || kind == "candidate_poisoned" || kind == "poisoned") return failure_kind::crash;
  if (kind == "harness_error") return failure_kind::harness;
  if (kind == "problem_error") return failure_kind::problem;
  return otherwise;
}

// KAGENT_NOOP_DEVICE_S: seconds a noop device spends on each request (verify, benchmark, ...), as a
// device that holds its lock that long without using the CPU. Measures the runtime's own scaling
// across devices and nodes with a fixed device time (benchmarks/nodes_scaling.py --platform noop);
// unset or out of (0, 600]: no wait.
double noop_device_s() {
  const char* d = std::getenv("KAGENT_NOOP_DEVICE_S");
  if (!d || !*d) return 0;
  char* end = nullptr;
  const double s = std::strtod(d, &end);
  return end != d && s > 0 && s <= 600 ? s : 0;
}

// SPEC §12.3 noop: verification always passes, the benchmark answers 1.0 ms, references unmeasured.
class noop_backend final : public device_backend {
public:
  device_result run(const device_request& req) override {
    device_result e;
    e.candidate_id = req.candidate_id;
    if (const double s = req.mode == device_mode::warm ? 0 : noop_device_s(); s > 0) {
      // In slices, so that a cancelled candidate or a stopping run does not wait for it.
      const auto t0 = std::chrono::steady_clock::now();
      wait_unless_giving_up(s);
      e.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    e.verified = true;
    if (req.mode != device_mode::verify) {
      e.benchmarked = true;
      e.time_ms = 1.0;
    }
    e.code_hash = store::sha256_hex(req.code);
    return e;
  }
};

// The cpu verifier's processes (evaluator, candidates, the user's test.py) run Triton's interpreter
// and must not see a GPU the machine happens to have: a test.py that picks CUDA when it is available
// would interpret the full problem on device tensors (on an H200 host, the matvec example's test.py
// ran past its 300 s timeout).
void cpu_only(env_map& env) {
  env["TRITON_INTERPRET"] = "1";
  env["CUDA_VISIBLE_DEVICES"] = "";
  env["HIP_VISIBLE_DEVICES"] = "";
  env.erase("ROCR_VISIBLE_DEVICES");
}

class harness_backend final : public device_backend {
public:
  explicit harness_backend(const device_settings& settings) : s_(settings) {
    const auto& s = s_;
    evaluator_options o;
    o.python = s.python;
    o.script = s.install_root + "/harness/evaluator.py";
    o.env = s.vendor.empty() ? s.child_env : pin_environment(s.child_env, s.vendor, s.device_id);
    const bool cpu = s.verifier == "cpu";
    if (cpu) cpu_only(o.env);
    keep_in_run_dir(o.env, s);
    o.log_dir = (fs::path(s.run_path) / "workers" / fmt::format("gpu{}", s.device_id)).string();
    fs::create_directories(o.log_dir);
    device_ = cpu ? "cpu" : "cuda";
    env_ = o.env;
    client_ = std::make_unique<evaluator_client>(std::move(o));
  }

  void prepare() override {
    device_result ignored;
    if (!loaded_) load(ignored);
  }

  device_result run(const device_request& req) override {
    device_result e;
    e.candidate_id = req.candidate_id;
    const auto t0 = std::chrono::steady_clock::now();
    steps_ = nlohmann::json::array();
    steps_dir_ = req.work_dir;
    steps_mode_ = to_string(req.mode);
    if (!loaded_ && req.on_step) req.on_step("starting the evaluator and loading problem.py");
    if (!loaded_ && !load(e)) return finish(e, t0);
    const auto verify_timeout = std::chrono::milliseconds(static_cast<long>(s_.test_timeout_s * 1000));
    const auto bench_timeout = std::chrono::milliseconds(static_cast<long>(s_.benchmark_timeout_s * 1000));
    nlohmann::json base{{"code", req.code}, {"workdir", req.work_dir}};
    if (s_.rtol >= 0) base["rtol"] = s_.rtol;
    if (s_.atol >= 0) base["atol"] = s_.atol;
    auto step = [&](const char* what) {
      if (req.on_step) req.on_step(what);
    };
    if (req.mode == device_mode::start_checks) return start_checks(req, base, e, t0);
    if (req.mode == device_mode::verify || req.mode == device_mode::initial) {
      step("verifying");
      auto r = client_->request(merged(base, {{"op", "verify"}}), verify_timeout);
      note_step("verify", r, "timings");
      take_output(e, r);
      if (!r.ok() || !r.body["result"].value("passed", false)) {
        e.error = r.failure == evaluator_failure::none && r.body.contains("result") && r.body["result"].is_object() &&
                          r.body["result"].contains("error") && r.body["result"]["error"].is_string()
                      ? r.body["result"]["error"].get<std::string>()
                      : r.error();
        e.failure_cause = cause_of(r, failure_kind::verification);
        if (r.failure == evaluator_failure::none) e.failure_cause = cause_of_kind(r.body, failure_kind::verification);
        if (e.error.rfind("Disallowed PyTorch usage", 0) == 0) e.failure_cause = failure_kind::banned;
        return finish(e, t0);
      }
      e.verified = true;
      if (req.hash_after_verify && req.mode == device_mode::verify) {
        e.code_hash = hash_in(r.body["result"]);
        if (e.code_hash.empty()) e.code_hash = program_hash(base, verify_timeout);  // an evaluator without it
        e.hashed_after_verify = !e.code_hash.empty();
      }
    }
    if (req.mode == device_mode::benchmark || req.mode == device_mode::initial) {
      const nlohmann::json targets = nlohmann::json{"candidate"};
      step("timing");
      auto r = client_->request(benchmark_op(base, targets), bench_timeout);
      note_step("benchmark", r, "phases_s");
      take_output(e, r);
      if (!r.ok()) {
        e.error = r.error();
        e.failure_cause = cause_of(r, failure_kind::benchmark);
        if (r.failure == evaluator_failure::none) e.failure_cause = cause_of_kind(r.body, failure_kind::benchmark);
        return finish(e, t0);
      }
      const auto& res = r.body["result"];
      if (res.contains("floor_ms") && res["floor_ms"].is_number()) e.floor_ms = res["floor_ms"].get<double>();
      e.time_ms = median_of(res, "candidate");
      if (res.contains("candidate") && res["candidate"].is_object()) {
        const auto& c = res["candidate"];
        // Spread: interquartile range relative to the median, as the harness reports it.
        if (c.contains("iqr_rel") && c["iqr_rel"].is_number()) e.time_spread_pct = c["iqr_rel"].get<double>() * 100.0;
      }
      e.benchmarked = is_measured(e.time_ms);
      if (!e.benchmarked) {
        e.error = "benchmark returned no candidate time";
        e.failure_cause = failure_kind::benchmark;
        return finish(e, t0);
      }
      if (e.floor_ms > 0 && e.time_ms > 0) e.floor_pct = e.floor_ms / e.time_ms * 100.0;
      e.code_hash = req.known_hash.empty() ? hash_in(res) : req.known_hash;
      if (e.code_hash.empty()) e.code_hash = program_hash(base, bench_timeout);
      if (req.mode == device_mode::benchmark && wants_user_test(s_, req, e.time_ms, e.code_hash, tested_) &&
          !run_user_test(s_, env_, req.code, req.work_dir.empty() ? fs::path(s_.run_path) : fs::path(req.work_dir), e,
                         &standby_)) {
        e.benchmarked = false;
        return finish(e, t0);
      }
    }
    if (e.code_hash.empty()) e.code_hash = store::sha256_hex(req.code);
    return finish(e, t0);
  }

private:
  // The starting kernel's other checks (device_mode::start_checks): the kernel directory's test.py,
  // then PyTorch eager's and torch.compile's timings. A failed test.py is cause user_test; references
  // that cannot be timed fail with cause benchmark (the run goes on without them).
  device_result& start_checks(const device_request& req, const nlohmann::json& base, device_result& e,
                              std::chrono::steady_clock::time_point t0) {
    auto step = [&](const char* what) {
      if (req.on_step) req.on_step(what);
    };
    const auto timeout = std::chrono::milliseconds(static_cast<long>(s_.benchmark_timeout_s * 1000));
    e.code_hash = program_hash(base, timeout);
    if (wants_user_test(s_, req, -1, "", tested_)) {
      step("running the kernel directory's test.py");
      if (!run_user_test(s_, env_, req.code, req.work_dir.empty() ? fs::path(s_.run_path) : fs::path(req.work_dir), e,
                         &standby_))
        return finish(e, t0);
    }
    nlohmann::json targets = nlohmann::json{"eager"};
    if (s_.compile_reference) targets.push_back("compile");
    step(s_.compile_reference ? "timing PyTorch eager and torch.compile" : "timing PyTorch eager");
    auto op = benchmark_op(base, targets);
    if (!s_.reference_cache_dir.empty()) op["reference_cache"] = s_.reference_cache_dir;
    auto r = client_->request(op, timeout);
    note_step("references", r, "reference_cache");
    take_output(e, r);
    if (!r.ok()) {
      e.error = "the PyTorch reference could not be timed: " + r.error();
      e.failure_cause = cause_of(r, failure_kind::benchmark);
      if (r.failure == evaluator_failure::none) e.failure_cause = cause_of_kind(r.body, failure_kind::benchmark);
      return finish(e, t0);
    }
    e.eager_ms = median_of(r.body["result"], "eager");
    e.compile_ms = median_of(r.body["result"], "compile");
    if (const auto& res = r.body["result"]; res.is_object() && res.contains("reference_cache")) {
      const auto& rc = res["reference_cache"];
      if (rc.is_object() && rc.value("hit", false))
        e.references_cached_at = rc.contains("stored_at") && rc["stored_at"].is_string() ? rc["stored_at"].get<std::string>()
                                                                                          : std::string("(unknown)");
    }
    if (e.code_hash.empty()) e.code_hash = store::sha256_hex(req.code);
    return finish(e, t0);
  }
  /// The judge's program hash of `base`'s code (its compiled kernels and normalised wrapper), recorded
  /// as a "hash" step; "" when the step failed.
  std::string program_hash(const nlohmann::json& base, std::chrono::milliseconds timeout) {
    auto h = client_->request(merged(base, {{"op", "hash"}}), timeout);
    note_step("hash", h, nullptr);
    return h.ok() && h.body["result"].contains("hash") ? h.body["result"]["hash"].get<std::string>() : std::string{};
  }
  nlohmann::json benchmark_op(const nlohmann::json& base, const nlohmann::json& targets) const {
    return merged(base, {{"op", "benchmark"},
                         {"targets", targets},
                         {"warmup", static_cast<int>(s_.benchmark_warmup)},
                         {"repeat", static_cast<int>(s_.benchmark_repeat)}});
  }
  static nlohmann::json merged(nlohmann::json a, const nlohmann::json& b) {
    a.update(b);
    return a;
  }
  static failure_kind cause_of(const evaluator_reply& r, failure_kind otherwise) {
    switch (r.failure) {
      case evaluator_failure::timeout: return failure_kind::timeout;
      case evaluator_failure::crashed:
      case evaluator_failure::poisoned: return failure_kind::crash;
      case evaluator_failure::protocol_error:
      case evaluator_failure::spawn_failed: return failure_kind::harness;
      case evaluator_failure::interrupted: return failure_kind::interrupted;
      case evaluator_failure::none: break;
    }
    return otherwise;
  }
  static void take_output(device_result& e, const evaluator_reply& r) {
    if (r.body.is_object()) {
      if (r.body.contains("stdout") && r.body["stdout"].is_string()) e.stdout_tail = r.body["stdout"];
      if (r.body.contains("stderr") && r.body["stderr"].is_string()) e.stderr_tail = r.body["stderr"];
    }
    if (e.stderr_tail.empty()) e.stderr_tail = r.stderr_tail;
    // The interpreter's traceback (a candidate's exception, problem.py's) goes with the output, so the
    // candidate's verify log shows the file and line that failed.
    if (r.body.is_object() && r.body.contains("traceback") && r.body["traceback"].is_string() &&
        !r.body["traceback"].get<std::string>().empty())
      e.stderr_tail += (e.stderr_tail.empty() ? "" : "\n") + std::string{"--- traceback ---\n"} +
                       r.body["traceback"].get<std::string>();
  }
  device_result& finish(device_result& e, std::chrono::steady_clock::time_point t0) {
    e.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    tested_.note(e);
    write_steps(e);
    return e;
  }
  // Where a device step's time went (device_steps.jsonl in the candidate's directory, one line per
  // request): each evaluator request's wall time as seen from here, with the judge's own split of it
  // (take_and_load_s, first_call_s, compare_s, ...; timed_loop_s, sample_checks_s, ...). A reader of
  // a slow run sees whether a candidate waited for its process, compiled, or was timed.
  void note_step(const char* op, const evaluator_reply& r, const char* split) {
    nlohmann::json s{{"op", op}, {"wall_s", r.wall_s}, {"ok", r.ok()}};
    if (split && r.body.is_object() && r.body.contains("result") && r.body["result"].is_object() &&
        r.body["result"].contains(split) && r.body["result"][split].is_object())
      s["split"] = r.body["result"][split];
    steps_.push_back(std::move(s));
  }
  void write_steps(const device_result& e) {
    if (steps_dir_.empty() || steps_.empty()) return;
    nlohmann::json line{{"mode", steps_mode_}, {"wall_s", e.wall_s}, {"user_test_s", e.user_test_s}, {"steps", steps_}};
    std::error_code ec;
    fs::create_directories(steps_dir_, ec);
    std::ofstream f(fs::path(steps_dir_) / "device_steps.jsonl", std::ios::app);
    f << line.dump() << '\n';
    steps_ = nlohmann::json::array();
  }
  bool load(device_result& e) {
    nlohmann::json req{{"op", "load_problem"},
                       {"problem", s_.problem_path},
                       {"device", device_},
                       {"dtype", s_.dtype},
                       {"trials", s_.trials},
                       {"samples", s_.timed_samples},
                       {"sandbox_prefix", s_.sandbox_prefix},
                       {"calibrate_repeat", s_.benchmark_repeat},
                       // The judge's own deadlines sit inside ours, so it can report which step hung.
                       {"start_timeout_s", std::max(30.0, s_.benchmark_timeout_s)},
                       {"verify_timeout_s", std::max(1.0, s_.test_timeout_s - 1.0)},
                       {"benchmark_timeout_s", std::max(1.0, s_.benchmark_timeout_s - 1.0)}};
    if (s_.peak_bandwidth_gbps > 0) req["peak_gbps"] = s_.peak_bandwidth_gbps;
    if (device_ == "cpu") req["size"] = "small";
    // The judge's workers share their launchers here (read-only for them) when this runtime says so:
    // the same directory and the same rule as test.py's and the profiler's processes.
    if (!s_.run_path.empty() && launchers_shareable(s_.vendor, s_.sandbox_mode, env_))
      req["launchers_dir"] = fs::absolute(shared_launcher_dir(s_.run_path, s_.device_id)).string();
    // The starting kernel's test.py process imports torch while the judge loads the problem: started
    // after the load, it was still importing when the starting kernel's test came (with the reference
    // timings and the baseline profile cached, on the H100 of 2026-12-06 that test took 3.5 s instead
    // of 2.0 s).
    standby_.start(s_, env_);
    auto r = client_->request(req, std::chrono::milliseconds(static_cast<long>(s_.benchmark_timeout_s * 1000)));
    if (!r.ok()) {
      standby_.stop();
      if (r.failure == evaluator_failure::none && cause_of_kind(r.body, failure_kind::unknown) == failure_kind::problem) {
        // The kernel directory's own problem.py failed: said as such, with its line and traceback.
        e.error = "the kernel directory's " + r.error();
        e.failure_cause = failure_kind::problem;
        take_output(e, r);
        return false;
      }
      e.error = "could not load the problem on the device: " + r.error();
      e.failure_cause = failure_kind::harness;
      e.stderr_tail = r.stderr_tail;
      return false;
    }
    loaded_ = true;
    return true;
  }

  device_settings s_;
  user_test_standby standby_;
  tested_programs tested_;
  std::string device_;
  env_map env_;
  std::unique_ptr<evaluator_client> client_;
  bool loaded_ = false;
  nlohmann::json steps_ = nlohmann::json::array();
  std::string steps_dir_;
  std::string steps_mode_;
};

// isolation: process — every request is a fresh `harness/run_once.py` under the process runner, for
// users who prefer a clean interpreter per candidate to the warm server's speed.
class process_backend final : public device_backend {
public:
  explicit process_backend(const device_settings& settings) : s_(settings) {
    const auto& s = s_;
    env_ = s.vendor.empty() ? s.child_env : pin_environment(s.child_env, s.vendor, s.device_id);
    cpu_ = s.verifier == "cpu";
    if (cpu_) cpu_only(env_);
    keep_in_run_dir(env_, s);
  }

  device_result run(const device_request& req) override {
    device_result e;
    e.candidate_id = req.candidate_id;
    const auto dir = fs::path(req.work_dir.empty() ? s_.run_path : req.work_dir);
    fs::create_directories(dir);
    const bool start = req.mode == device_mode::initial || req.mode == device_mode::start_checks;
    const auto kernel = dir / fmt::format("kernel_{}.py", start ? "initial" : "candidate");
    store::write_file_atomic(kernel, req.code);
    if (req.mode == device_mode::start_checks && wants_user_test(s_, req, -1, "", tested_) &&
        !run_user_test(s_, env_, req.code, dir, e))
      return e;
    const auto out = dir / fmt::format("run_once_{}.json", to_string(req.mode));
    fs::remove(out);
    process_spec p;
    p.argv = {s_.python, s_.install_root + "/harness/run_once.py", "--problem", s_.problem_path,
              "--kernel", kernel.string(), "--device", cpu_ ? "cpu" : "cuda",
              "--warmup", std::to_string(static_cast<int>(s_.benchmark_warmup)),
              "--repeat", std::to_string(static_cast<int>(s_.benchmark_repeat)), "--json", out.string(),
              "--dtype", s_.dtype, "--trials", std::to_string(s_.trials),
              "--sandbox-prefix", nlohmann::json(s_.sandbox_prefix).dump()};
    if (s_.peak_bandwidth_gbps > 0) p.argv.insert(p.argv.end(), {"--peak-gbps", fmt::format("{}", s_.peak_bandwidth_gbps)});
    double timeout_s = s_.test_timeout_s;
    if (req.mode == device_mode::verify) {
      p.argv.insert(p.argv.end(), {"--mode", "verify"});
    } else if (req.mode == device_mode::benchmark) {
      p.argv.insert(p.argv.end(), {"--mode", "benchmark", "--targets", "candidate"});
      timeout_s = s_.benchmark_timeout_s;
    } else if (req.mode == device_mode::start_checks) {
      p.argv.insert(p.argv.end(), {"--mode", "benchmark", "--targets", s_.compile_reference ? "eager,compile" : "eager"});
      timeout_s = s_.benchmark_timeout_s;
    } else {
      p.argv.insert(p.argv.end(), {"--mode", "both", "--targets", "candidate"});
      timeout_s += s_.benchmark_timeout_s;
    }
    p.env = env_;
    p.cwd = dir.string();
    p.timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    const auto r = run_process(p);
    e.wall_s += r.wall_s;  // after test.py's, for start_checks
    e.stdout_tail = tail_text(r.out, 4000);
    e.stderr_tail = tail_text(r.err, 4000);
    nlohmann::json j = nlohmann::json::parse(fs::exists(out) ? read_file(out) : std::string{"null"},
                                             nullptr, false);
    if (r.timed_out || r.term_signal != 0 || !j.is_object()) {
      e.failure_cause = r.timed_out ? failure_kind::timeout : r.term_signal != 0 ? failure_kind::crash : failure_kind::harness;
      e.error = fmt::format("run_once.py ({}) {}", to_string(req.mode), r.describe());
      if (req.mode == device_mode::start_checks) e.error = "the PyTorch reference could not be timed: " + e.error;
      return e;
    }
    const auto& res = j.contains("result") && j["result"].is_object() ? j["result"] : nlohmann::json::object();
    if (!j.value("ok", false)) {
      e.error = j.value("error", std::string{"run_once.py reported a failure"});
      if (j.contains("traceback") && j["traceback"].is_string() && !j["traceback"].get<std::string>().empty())
        e.stderr_tail += "\n--- traceback ---\n" + j["traceback"].get<std::string>();
      if (j.value("kind", std::string{}) == "problem_error") e.error = "the kernel directory's " + e.error;
      e.failure_cause = cause_of_kind(j, j.value("poisoned", false) ? failure_kind::crash
                                         : req.mode == device_mode::benchmark || req.mode == device_mode::start_checks
                                             ? failure_kind::benchmark
                                             : failure_kind::verification);
      if (e.error.rfind("Disallowed PyTorch usage", 0) == 0) e.failure_cause = failure_kind::banned;
      if (req.mode == device_mode::start_checks) e.error = "the PyTorch reference could not be timed: " + e.error;
      return e;
    }
    e.verified = true;  // run_once verifies before it benchmarks ("both"), and a benchmark follows a verify
    if (res.contains("benchmark")) {
      const auto& b = res["benchmark"];
      e.time_ms = median_of(b, "candidate");
      e.eager_ms = median_of(b, "eager");
      e.compile_ms = median_of(b, "compile");
      e.benchmarked = is_measured(e.time_ms);
    }
    e.code_hash = hash_in(res);
    if (e.code_hash.empty()) e.code_hash = store::sha256_hex(req.code);
    if (res.contains("benchmark") && res["benchmark"].contains("floor_ms") && res["benchmark"]["floor_ms"].is_number()) {
      e.floor_ms = res["benchmark"]["floor_ms"].get<double>();
      if (e.time_ms > 0) e.floor_pct = e.floor_ms / e.time_ms * 100.0;
    }
    if (req.mode == device_mode::benchmark && wants_user_test(s_, req, e.time_ms, e.code_hash, tested_) &&
        !run_user_test(s_, env_, req.code, dir, e))
      e.benchmarked = false;
    tested_.note(e);
    return e;
  }

private:
  device_settings s_;
  tested_programs tested_;
  env_map env_;
  bool cpu_ = false;
};

} // namespace

std::unique_ptr<device_backend> make_device_backend(const device_settings& s) {
  if (s.verifier == "noop") return std::make_unique<noop_backend>();
  if (s.isolation == "process") return std::make_unique<process_backend>(s);
  return std::make_unique<harness_backend>(s);
}

} // namespace kagent
