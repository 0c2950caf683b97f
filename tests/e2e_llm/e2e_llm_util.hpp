#pragma once
// Shared pieces of the end-to-end LLM fault tests: a real `kagent-actors` run (noop platform, greedy,
// one candidate per round) whose LLM is an openai_compatible endpoint served by the loopback test
// server in this process. Request i of the run gets the i-th scripted reply; requests past the script
// get a valid kernel reply, so later rounds show that the run went on after a fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/store/program_db.hpp"
#include "tests/e2e/e2e_util.hpp"
#include "tests/llm/wire_fakes.hpp"

namespace e2e_llm {

namespace fs = std::filesystem;
using kagent::store::program_db;
using kagent::test::loopback_server;
using kagent::test::received_request;
using kagent::test::scripted_reply;
using json = nlohmann::json;

/// The key the run gets through TEST_LLM_KEY; no file of the run directory may contain it.
inline const std::string kKey = "sk-e2e-SECRET-123";
inline const std::string kKernelDir = e2e::source("examples/optimize_01_matvec");

/// A reply that extract_kernel() accepts: the example's own kernel with a comment that makes each
/// variant's code hash unique (the manager fails a verified duplicate of an earlier program).
inline std::string kernel_text(int variant) {
  return "Here is a faster kernel.\n\n```python\n" + e2e::slurp(fs::path(kKernelDir) / "input.py") +
         "\n# e2e variant " + std::to_string(variant) + "\n```\n\nIt keeps the same interface.";
}

inline bool wants_stream(const received_request& rq) {
  try {
    return json::parse(rq.body).value("stream", false);
  } catch (const std::exception&) {
    return false;
  }
}

/// The wire fakes name the model "gpt-5.2"; a server answers with the model it was asked for.
inline scripted_reply served_by_test_model(scripted_reply r) {
  for (auto& c : r.chunks)
    for (auto at = c.find("\"gpt-5.2\""); at != std::string::npos; at = c.find("\"gpt-5.2\"", at))
      c.replace(at, 9, "\"test-model\"");
  return r;
}

/// A successful OpenAI chat reply in the framing the request asked for.
inline scripted_reply ok_reply(const received_request& rq, const std::string& text) {
  return served_by_test_model(wants_stream(rq) ? kagent::test::openai_sse(text, 40, 50)
                                               : kagent::test::openai_json(text, 40, 50));
}

using step = std::function<scripted_reply(const received_request&)>;

inline step reply(scripted_reply r) {
  return [r](const received_request&) { return r; };
}

/// The run also asks for bottleneck analyses (one per parent) and reflexions (one per verified
/// candidate). Those side requests are answered at once with a valid reply and stay out of the
/// script: request i of the script is the i-th *rewrite* request (optimize, follow-up, refine).
inline bool is_side_request(const received_request& rq) {
  return rq.body.find("Work out what limits its speed") != std::string::npos ||
         rq.body.find("so that later rounds can learn from it") != std::string::npos;
}

inline std::string side_reply_text(const received_request& rq) {
  if (rq.body.find("Work out what limits its speed") != std::string::npos)
    return R"([{"category": "memory", "summary": "streams A once", "reasoning": "bandwidth bound",)"
           R"( "root_causes": [{"cause": "small tiles", "evidence": [], "fixes": [{"fix": "wider tiles", "rationale": "fewer programs"}]}]}])";
  return R"({"was_diagnosis_correct": true, "was_fix_effective": true, "expected_outcome": "faster",)"
         R"( "actual_outcome": "faster", "reasoning": "ok", "lessons": [], "avoid_patterns": [], "try_patterns": []})";
}

/// Serves `script[i]` to rewrite request i and a unique valid kernel to every later one.
class scripted_endpoint {
public:
  explicit scripted_endpoint(std::vector<step> script)
      : script_(std::move(script)), srv_([this](const received_request& rq, int) {
          if (is_side_request(rq)) return ok_reply(rq, side_reply_text(rq));
          size_t i;
          {
            std::lock_guard lk(m_);
            i = rewrites_.size();
            rewrites_.push_back(rq);
          }
          if (i < script_.size()) return script_[i](rq);
          return ok_reply(rq, kernel_text(static_cast<int>(i)));
        }) {}
  std::string base_url() const { return srv_.url() + "/v1"; }
  /// Rewrite requests received (side requests excluded).
  int requests() const {
    std::lock_guard lk(m_);
    return static_cast<int>(rewrites_.size());
  }
  std::vector<received_request> received() const {
    std::lock_guard lk(m_);
    return rewrites_;
  }

private:
  std::vector<step> script_;
  mutable std::mutex m_;
  std::vector<received_request> rewrites_;
  loopback_server srv_;
};

struct run_options {
  int rounds = 2;
  bool stream = false;
  int max_retries = 2;
  double timeout_s = 5;
  double idle_timeout_s = 2;
  int max_refine_attempts = 1;  ///< a reply without code is re-asked this many times
  int samples_per_prompt = 1;   ///< with beam_search: candidates per round, calling the LLM at once
  std::string strategy = "greedy";  ///< greedy: one candidate per round
  int num_workers = 1;              ///< candidate pipelines in flight
  bool preflight = false;           ///< llm.preflight
};

struct run_outcome {
  kagent::process_result proc;
  fs::path run_dir;  ///< empty when the run made none
};

inline std::string config_yaml(const std::string& base_url, const run_options& o) {
  std::string y;
  y += "strategy: " + o.strategy + "\nnum_workers: " + std::to_string(o.num_workers) +
       "\nmax_rounds: " + std::to_string(o.rounds) + "\n";
  y += "strategy_config:\n  max_no_improvement: 10\n  num_bottlenecks: 1\n  samples_per_prompt: " + std::to_string(o.samples_per_prompt) + "\n";
  y += "openai_model: test-model\nhigh_reasoning_effort: false\nplatform: noop\n";
  y += "benchmark_warmup: 25\nbenchmark_repeat: 100\ndivergence_threshold: 50.0\ntarget_platform: cuda\n";
  y += "max_refine_attempts: " + std::to_string(o.max_refine_attempts) + "\n";
  y += "llm:\n  provider: openai_compatible\n  base_url: " + base_url + "\n  model: test-model\n";
  y += "  api_key_env: TEST_LLM_KEY\n  max_retries: " + std::to_string(o.max_retries) + "\n";
  y += std::string("  stream: ") + (o.stream ? "true" : "false") + "\n";
  // Request i gets scripted reply i: the preflight would take the first one (its own tests turn it on).
  y += std::string("  preflight: ") + (o.preflight ? "true" : "false") + "\n";
  y += "  timeout_s: " + std::to_string(o.timeout_s) + "\n  idle_timeout_s: " + std::to_string(o.idle_timeout_s) + "\n";
  return y;
}

/// Runs kagent-actors against `ep` in `s`, with no GPU tools, no ambient keys or proxies, and the
/// scratch directory as working directory (so no stray .env is read).
inline run_outcome run_against(const e2e::scratch& s, const scripted_endpoint& ep, const run_options& o) {
  const auto cfg = s.write("llm_faults.yaml", config_yaml(ep.base_url(), o));
  const kagent::env_map env{{"PATH", "/usr/bin:/bin"},  {"KAGENT_INJECT_FAULT", ""}, {"TEST_LLM_KEY", kKey},
                            {"OPENAI_API_KEY", ""},     {"ANTHROPIC_API_KEY", ""},  {"HTTP_PROXY", ""},
                            {"http_proxy", ""},         {"HTTPS_PROXY", ""},        {"https_proxy", ""},
                            {"ALL_PROXY", ""},          {"all_proxy", ""},          {"NO_PROXY", ""},
                            {"no_proxy", ""},           {"LLM_RELAY_URL", ""},      {"CUDA_VISIBLE_DEVICES", ""},
                            {"HIP_VISIBLE_DEVICES", ""}, {"ROCR_VISIBLE_DEVICES", ""}};
  run_outcome out;
  out.proc = e2e::run({"--strategy", cfg, "--kernel-dir", kKernelDir, "--run-dir", (s.dir / "runs").string()}, env,
                      s.dir.string(), 120);
  auto dirs = e2e::run_dirs(s.dir / "runs");
  if (dirs.size() == 1) out.run_dir = dirs.front();
  return out;
}

/// What every run must show, whatever the fault: exit 0, a summary, the key sent to the endpoint
/// and written nowhere in the run directory.
inline void expect_run_survived(const run_outcome& r, const scripted_endpoint& ep) {
  EXPECT_TRUE(r.proc.started) << r.proc.error;
  EXPECT_FALSE(r.proc.timed_out);
  EXPECT_EQ(r.proc.exit_code, 0) << "stderr:\n" << r.proc.err << "\nstdout:\n" << r.proc.out;
  ASSERT_FALSE(r.run_dir.empty()) << "no run directory was made";
  EXPECT_TRUE(fs::exists(r.run_dir / "summary.json"));
  EXPECT_TRUE(json::accept(e2e::slurp(r.run_dir / "summary.json")));
  // The key did reach the endpoint (so the scan below looks for something that existed) ...
  ASSERT_GE(ep.requests(), 1);
  for (const auto& rq : ep.received()) {
    EXPECT_EQ(rq.target, "/v1/chat/completions");
    EXPECT_EQ(rq.header("authorization"), "Bearer " + kKey);
  }
  // ... and is in no file of the run directory, nor in what the run printed.
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(r.run_dir)) {
    if (!e.is_regular_file()) continue;
    ++files;
    EXPECT_EQ(e2e::slurp(e.path()).find(kKey), std::string::npos) << "the API key is in " << e.path();
  }
  EXPECT_GE(files, 4);
  EXPECT_EQ(r.proc.out.find(kKey), std::string::npos) << "the API key is on stdout";
  EXPECT_EQ(r.proc.err.find(kKey), std::string::npos) << "the API key is on stderr";
}

inline program_db open_db(const run_outcome& r) {
  return program_db::open(r.run_dir / "program.db", program_db::mode::read_only);
}

/// The rewrite calls (optimize, follow-ups, refine) of one candidate; its reflexion and the
/// bottleneck analysis of it as a parent are side calls.
inline std::vector<kagent::store::llm_call_record> calls_of(program_db& db, const std::string& candidate) {
  std::vector<kagent::store::llm_call_record> out;
  for (auto& c : db.list_llm_calls())
    if (c.candidate_id.value_or("") == candidate && c.purpose != "reflexion" && c.purpose != "bottleneck")
      out.push_back(c);
  return out;
}

/// Every rewrite call of the run (side calls excluded), in order.
inline std::vector<kagent::store::llm_call_record> rewrite_calls(program_db& db) {
  std::vector<kagent::store::llm_call_record> out;
  for (auto& c : db.list_llm_calls())
    if (c.purpose != "reflexion" && c.purpose != "bottleneck") out.push_back(c);
  return out;
}

/// The candidate is verified and its single optimize call succeeded after `attempts` attempts.
inline void expect_verified(program_db& db, const std::string& id, int attempts) {
  auto p = db.get_program(id);
  ASSERT_TRUE(p.has_value()) << id;
  EXPECT_EQ(p->status, "verified") << id << ": " << p->failure_cause.value_or("") << " " << p->error.value_or("");
  EXPECT_NE(p->code.find("def kernel_function"), std::string::npos);
  auto calls = calls_of(db, id);
  ASSERT_EQ(calls.size(), 1u) << id;
  EXPECT_TRUE(calls[0].ok);
  EXPECT_EQ(calls[0].attempts, attempts) << id;
  EXPECT_EQ(calls[0].purpose, "optimize");
  EXPECT_EQ(calls[0].model, "test-model");
  EXPECT_EQ(calls[0].tokens_in, 40);
  EXPECT_EQ(calls[0].tokens_out, 50);
}

/// The candidate failed with `cause` and its one LLM call failed with error kind `kind` after
/// `attempts` attempts; the stored error names the kind.
inline void expect_failed(program_db& db, const std::string& id, const std::string& cause, const std::string& kind,
                          int attempts) {
  auto p = db.get_program(id);
  ASSERT_TRUE(p.has_value()) << id;
  EXPECT_EQ(p->status, "failed") << id;
  EXPECT_EQ(p->failure_cause.value_or(""), cause) << id << ": " << p->error.value_or("");
  EXPECT_FALSE(p->error.value_or("").empty()) << id;
  auto calls = calls_of(db, id);
  ASSERT_EQ(calls.size(), 1u) << id;
  EXPECT_EQ(calls[0].attempts, attempts) << id;
  EXPECT_EQ(calls[0].model, "test-model");
  EXPECT_EQ(calls[0].purpose, "optimize");
  EXPECT_FALSE(calls[0].ok);
  EXPECT_EQ(calls[0].error_kind.value_or(""), kind) << id;
  EXPECT_NE(p->error.value_or("").find(kind), std::string::npos) << p->error.value_or("");
}

/// The candidate failed as no_code: the first reply and each follow-up (`followups` of them) came
/// back fine but held no usable kernel.
inline void expect_no_code(program_db& db, const std::string& id, int followups) {
  auto p = db.get_program(id);
  ASSERT_TRUE(p.has_value()) << id;
  EXPECT_EQ(p->status, "failed") << id;
  EXPECT_EQ(p->failure_cause.value_or(""), "no_code") << id << ": " << p->error.value_or("");
  EXPECT_NE(p->error.value_or("").find("no usable kernel"), std::string::npos) << p->error.value_or("");
  auto calls = calls_of(db, id);
  ASSERT_EQ(calls.size(), static_cast<size_t>(1 + followups)) << id;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_TRUE(calls[i].ok);  // the calls worked; the replies were unusable
    EXPECT_EQ(calls[i].attempts, 1);
    EXPECT_EQ(calls[i].purpose, i == 0 ? "optimize" : "optimize_followup");
  }
}

/// Summary counters after a run with `failed` failed candidates out of `total`.
inline void expect_summary(const run_outcome& r, int total, const std::map<std::string, int>& failures) {
  auto s = json::parse(e2e::slurp(r.run_dir / "summary.json"));
  EXPECT_EQ(s.value("candidates", -1), total) << s.dump(2);
  int failed = 0;
  for (const auto& [cause, n] : failures) {
    EXPECT_EQ(s["failures_by_cause"].value(cause, 0), n) << cause << "\n" << s.dump(2);
    failed += n;
  }
  EXPECT_EQ(s.value("failed", -1), failed) << s.dump(2);
  EXPECT_EQ(s.value("verified", -1), total - failed) << s.dump(2);  // candidates only, not the starting kernel
  EXPECT_EQ(s.value("duplicates", -1), 0) << s.dump(2);
  // The LLM block adds up the llm_calls table.
  auto db = program_db::open(r.run_dir / "program.db", program_db::mode::read_only);
  const auto calls = db.list_llm_calls();
  long failed_calls = 0, tokens_in = 0;
  for (const auto& c : calls) {
    failed_calls += c.ok ? 0 : 1;
    tokens_in += c.tokens_in;
  }
  EXPECT_EQ(s["llm"].value("calls", -1L), static_cast<long>(calls.size())) << s.dump(2);
  EXPECT_EQ(s["llm"].value("failed_calls", -1L), failed_calls) << s.dump(2);
  EXPECT_EQ(s["llm"].value("tokens_in", -1L), tokens_in) << s.dump(2);
}

}  // namespace e2e_llm
