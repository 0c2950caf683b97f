#pragma once
// The vocabulary of the actor system: every message that crosses an actor boundary. Plain structs
// with an inspect() overload, registered in one place (register_messages) so that any of them can
// cross a process or machine boundary through CAF's middleman unchanged. No pointers, handles or
// actor-local objects. The platform's values (attempt, reflexion and LLM call records, kernel
// profiles with their roofline verdicts, parent analyses) travel as the typed values they are,
// through the inspect overloads at the end; JSON is written only at the edges (files, program.db).
#include <caf/all.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "platform/analysis/bottleneck.hpp"
#include "platform/common/failure_kind.hpp"
#include "platform/common/measured.hpp"
#include "platform/device/device_mode.hpp"
#include "platform/llm/llm_types.hpp"
#include "platform/profile_core/kernel_profile.hpp"
#include "platform/store/node_scratch.hpp"
#include "platform/store/program_db.hpp"

namespace kagent {

// Times that were not measured are `not_measured` (platform/common/measured.hpp says why).

// ---- atoms (CAF 0.17: at most 10 characters) ---------------------------------------------------
using start_atom = caf::atom_constant<caf::atom("start")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using mode_atom = caf::atom_constant<caf::atom("mode")>;
/// Ctrl-C / SIGTERM (with the signal number): the run stops starting work and ends what runs.
using interrupt_atom = caf::atom_constant<caf::atom("interrupt")>;
/// (step_atom, what): the evaluator's current step of the starting kernel's evaluation, to the manager.
using step_atom = caf::atom_constant<caf::atom("step")>;
/// (best_atom) -> double: the run's best time now (not_measured when none), asked by a candidate right
/// before its benchmark, so that `user_test: best` is decided against the best of that moment.
using best_atom = caf::atom_constant<caf::atom("best")>;
/// (asking_atom, parent id): a parent analysis is done with the device (its profile taken or not
/// needed) and waits for its LLM reply; to the manager, which gives the device other work meanwhile.
using asking_atom = caf::atom_constant<caf::atom("asking")>;

// ---- LLM -----------------------------------------------------------------------------------------
struct chat_message {
  std::string role;     ///< "user" or "assistant"
  std::string content;
};

/// A request to the llm_client. `purpose` (optimize, refine, bottleneck, reflexion, ask) keys usage
/// accounting and the replay provider.
struct complete {
  std::string request_id;
  std::string purpose;
  std::string model;
  std::string system;
  std::vector<chat_message> messages;
  int32_t max_tokens = 24576;
  double temperature = -1;  ///< < 0: provider default
  bool high_effort = false;
  std::string candidate_id;
};

struct completion {
  std::string request_id;
  bool ok = false;
  std::string text;
  std::string error;       ///< one line, never containing a key
  std::optional<llm_error_kind> error_kind;  ///< why it failed; none when ok
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0;
  int32_t attempts = 0;
  std::string model;
  std::string provider;
  double retry_after_s = -1;  ///< from a 429's retry-after header; < 0: none
  double latency_s = 0;
};

// ---- device work ---------------------------------------------------------------------------------
/// A file the device work wrote in its candidate's directory, sent back from a remote node (which
/// keeps nothing): `path` relative to the request's work_dir. A file over the node's size limit
/// travels as `<path>.omitted.txt` saying its size and sha256, never silently dropped.
/// A file a node's device work wrote, on its way back to the manager (platform/store/node_scratch).
using artifact = store::shipped_file;

/// Work for a device: verify or benchmark a candidate, or evaluate the starting kernel (initial).
struct evaluate {
  std::string candidate_id;
  std::string code;
  device_mode mode = device_mode::verify;
  std::string work_dir;  ///< the candidate's directory; the child runs there
  double best_ms = not_measured;  ///< the run's best when planned: user_test "best" runs test.py below it
};

struct evaluation {
  std::string candidate_id;
  bool verified = false;
  bool benchmarked = false;
  double time_ms = not_measured;
  double time_spread_pct = 0;   ///< interquartile range / median of the timed calls, in %
  double eager_ms = not_measured;
  double compile_ms = not_measured;
  std::string error;            ///< what failed, for the record and for the next prompt
  std::optional<failure_kind> failure_cause;  ///< why it failed; none when it did not
  std::string code_hash;
  double floor_pct = not_measured;  ///< physics floor / time, in % (100: at the hardware limit)
  std::string stdout_tail;
  std::string stderr_tail;
  double wall_s = 0;
  double user_test_s = 0;       ///< of wall_s, the kernel directory's test.py run
  /// start checks: eager_ms / compile_ms came from the reference cache, stored then ("" = timed now)
  std::string references_cached_at = {};
  std::vector<artifact> artifacts;  ///< from a remote node only: what it wrote under work_dir
};

/// A profile of one kernel on a gpu worker's device. label: baseline, sol, final.
struct profile {
  std::string candidate_id;
  std::string code;
  std::string label;
  std::string kernel_name;  ///< empty: derived from the code (first @triton.jit function), else busiest
  std::string work_dir;     ///< the profile's files go under <work_dir>/profile_<profile_id>/
  std::string profile_id;   ///< unique per profile in the run (file names, invocation records)
  double budget_s = 0;      ///< the whole profile's wall-clock budget; <= 0: the configured default
};
/// The profiler's one reply. `available` false: this platform has no profiler (noop, cpu) or the
/// session is in synthetic mode. `ok` false with `available` true: the profile failed (the same
/// failure also went to the manager as profiling_failed).
struct profile_result {
  std::string candidate_id;
  bool available = false;
  bool ok = false;
  /// Always: the profile's label and the profiler component's platform (rocm, nvidia, cpu, noop);
  /// when ok, also the kernel the parser chose, its metrics and roofline.
  kernel_profile profile;
  std::string error;            ///< why it failed (verbatim parser / runner error)
  std::string invocation;       ///< which command failed ("stats pass", "PMC pass 3", "ncu")
  std::string output_tail;      ///< the failing command's stderr/stdout tail
  double wall_s = 0;
  /// Not profiled because the device's session is synthetic (no tool ran; not a new failure).
  bool synthetic = false;
  /// Killed because its candidate timed out or the run is stopping (not a profiler failure).
  bool abandoned = false;
  std::vector<artifact> artifacts;  ///< from a remote node only: what it wrote under work_dir
};

/// The device actor's fixed protocol (actors/device.hpp): local, or a node's device across a link.
/// (cancel_atom, candidate id): the candidate timed out; its device work is given up at once
/// (cancel_work where the device is: this process, or a node across a link).
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
/// Manager -> a node's gatekeeper at the run's end: the evaluator logs of the devices of the run it
/// opened there (workers/, as artifacts), before the node deletes the run's files.
using node_logs_atom = caf::atom_constant<caf::atom("nodelogs")>;
/// Several profiles of one device at once: on NVIDIA they share one profiler process
/// (platform/profiling profile_kernels); one profile_result per item, in order.
struct profile_batch {
  std::vector<profile> items;
};

using device_actor_type = caf::typed_actor<caf::replies_to<evaluate>::with<evaluation>,
                                           caf::replies_to<profile>::with<profile_result>,
                                           caf::replies_to<profile_batch>::with<std::vector<profile_result>>,
                                           caf::reacts_to<cancel_atom, std::string>>;

// ---- nodes (kagent-actors serve) -----------------------------------------------------------------
/// The wire's version: a manager and a node talk only when it is the same (bumped whenever a message
/// changes incompatibly). Also CAF's middleman.app-identifiers ("kagent-wire-<N>"), so mismatched
/// binaries never finish the link's handshake.
inline constexpr int32_t wire_version = 2;

/// Manager -> a node's gatekeeper (the one actor a node publishes): who asks, in which version.
struct node_hello {
  int32_t wire = wire_version;
  std::string version;  ///< KAGENT_VERSION of the manager
  std::string client;   ///< the manager's host, for the node's log
};
/// The node's answer: a fresh nonce the manager must prove the shared secret against.
struct node_challenge {
  std::string nonce;
  std::string node_name;
  std::string version;
};
/// HMAC-SHA256(KAGENT_NODE_SECRET, nonce | manager's CAF node id | wire version), hex.
struct node_auth {
  std::string proof;
};
struct device_offer {
  int32_t device_id = 0;  ///< the node's own id (its CUDA/HIP index, or cpu slot)
  std::string name;       ///< what the vendor tool calls it
  std::string gpu_name;   ///< specs key ("" when GPU-less)
};
/// What an authenticated manager learns: the node's platform and devices, chosen by its own rules.
struct node_offer {
  std::string node_name;
  std::string platform;  ///< the platform the node serves (cpu, nvidia, rocm, noop)
  std::string vendor;
  std::vector<device_offer> devices;
};
/// A run's setup for a node: the run's config and kernel directory, written to the node's scratch
/// directory; its devices' evaluators start there.
struct run_setup {
  std::string run_id;
  std::string config_yaml;
  std::string input_code, problem_code, test_code;
};
/// One device of a node, ready for a run (the node's relay to its device actor).
struct node_device {
  int32_t device_id = 0;
  std::string name;
  device_actor_type handle;
};
/// From a node's link (actors/node.hpp) to the manager: the node's devices joined the run, late or
/// again after the node was lost (the devices of a node reached at start are in the run's context).
struct node_joined {
  std::string node;
  std::vector<node_device> devices;
};
/// From a node's link to the manager: the node answered but refused the run (it keeps trying).
struct node_refused {
  std::string node;
  std::string reason;
};
/// Supervision message to the manager: a profiler pass failed on `gpu_id`.
struct profiling_failed {
  int32_t gpu_id = -1;
  std::string candidate_id;
  std::string platform;    ///< the profiler component's platform; synthetic mode is ROCm-only
  std::string invocation;  ///< which command (stats pass, PMC pass N)
  std::string reason;
  std::string output_tail;
  /// The gpu worker (which owns the device's analysis mode) turned the device synthetic because of
  /// this failure; the manager records it (summary, events, --resume) and decides nothing itself.
  bool turned_synthetic = false;
};

// ---- the search ----------------------------------------------------------------------------------
/// One candidate to produce: expand `parent` along bottleneck `bottleneck_id` with `model`.
struct candidate_spec {
  std::string id;
  std::string parent_id;
  int32_t round = 0;
  int32_t bottleneck_id = 1;
  int32_t sample_idx = 0;
  std::string model;
  std::string parent_code;
  double parent_time_ms = not_measured;
  double eager_ms = not_measured;
  /// The run's last attempts and reflexions (program.db's history), for the prompt.
  std::vector<store::attempt_record> recent_attempts;
  std::vector<store::reflexion_record> recent_reflexions;
  std::string work_dir;
  /// The manager's cached analysis of the parent (SPEC §1.2 step 7.2); none when there is none.
  std::optional<kernel_analysis> baseline;
  int32_t num_bottlenecks = 1;  ///< directions the strategy fans out (SPEC §14 B.83)
  int32_t worker_id = -1;       ///< the manager's worker slot (attempt records, SPEC §14 B.90)
  double best_ms = not_measured;  ///< the run's best time when this candidate was planned
  /// A launch-constant variant of the parent (platform/search/tune.hpp): its source, which no LLM
  /// wrote, and what it changes ("BLOCK_K 512->1024"). Empty for a candidate the LLM writes.
  std::string tuned_code;
  std::string tune_label;
  bool tuned() const { return !tuned_code.empty(); }
};

struct candidate_result {
  std::string candidate_id;
  std::string parent_id;
  int32_t round = 0;
  int32_t gpu_id = -1;
  bool ok = false;              ///< verified and benchmarked
  std::string code;
  double time_ms = not_measured;
  std::string error;
  std::optional<failure_kind> failure_cause;  ///< why it failed; none when ok
  std::string code_hash;
  std::string bottleneck;
  std::string model;
  /// The attempt record (SPEC §2.7) and the reflexion on it: none or one each. The manager fills in
  /// the program, worker and round before committing them.
  std::vector<store::attempt_record> attempt;
  std::vector<store::reflexion_record> reflexion;
  std::optional<kernel_profile> profile;  ///< SOL profile of the new kernel, when one was taken
  double device_s = 0;          ///< time this candidate held the device (verify, benchmark, test.py, profile)
  double user_test_s = 0;       ///< of device_s, the kernel directory's test.py run
  double llm_s = 0;             ///< time spent waiting for LLM replies
  double floor_pct = not_measured;  ///< achieved fraction of the physics floor, in %
  double time_spread_pct = not_measured;  ///< interquartile range of the timed calls over their median, in %
};
/// From a candidate (through its gpu worker, the way its candidate_result goes) to the manager, once
/// it is measured: after its benchmark, dedup and any SOL profile, before its reflexion (one more LLM
/// call). `result` is the candidate_result as it stands, without the reflexion. The manager records
/// the program at once (program.db, the ledger, a new best and its parent analysis); the
/// candidate_result that ends the pipeline later only adds the reflexion and frees the slot.
struct candidate_measured {
  candidate_result result;
};

/// The result of a candidate that ended without one of its own (timed out, its actor or its node
/// lost): `spec`'s identity, on device `gpu_id`, failed with `cause`.
candidate_result ended_without_result(const candidate_spec& spec, int32_t gpu_id, failure_kind cause,
                                      std::string error);

/// From a candidate (through its gpu worker) to the manager, after the benchmark and before any
/// profile: is this compiled code already known? The manager answers from the verified programs and
/// from the candidates that asked before (in flight), and claims the hash for `candidate_id` when it
/// is new, so two identical candidates of one round are never both profiled.
struct dedup_query {
  std::string candidate_id;
  std::string code_hash;
};
struct dedup_answer {
  std::string duplicate_of;  ///< "" when the code is new
  std::optional<kernel_profile> profile;  ///< the original's profile, when one exists
};
/// A parent's analysis for the manager's baseline cache: one profile, one bottleneck analysis asking
/// for `num_bottlenecks` directions, shared by every candidate that expands the parent.
struct analyze_parent {
  std::string parent_id;
  std::string code;
  double time_ms = not_measured;
  int32_t num_bottlenecks = 1;
  std::string work_dir;
  std::string model;
  std::optional<kernel_profile> known_profile;  ///< the parent's own SOL profile: no new profile is taken
};
struct parent_analysis {
  std::string parent_id;
  kernel_analysis analysis;
  bool profile_failed = false;
  double device_s = 0;
  double llm_s = 0;
};

/// The kinds of run events: events.jsonl's "type" (docs/report.md lists each one's fields).
enum class event_kind : uint8_t {
  run_start, note, error, initial_step, initial, resume, round_start, round_end, analysis_start, analysis,
  candidate_start, candidate_result, concurrency, profiling_failed, mode_change, interrupted, run_end, llm_call,
  llm_retry, node_down, node_up, candidate_end, start_checked,
};
/// The name written to events.jsonl ("run_start", "candidate_result", ...).
const char* to_string(event_kind k);

/// An event for events.jsonl and the progress line. The payload is the event's line in events.jsonl
/// (an edge format, read back by `show`, `report` and `runs`); it crosses an actor boundary as the
/// object it is, and as text only when it leaves the process.
struct run_event {
  event_kind kind = event_kind::note;
  nlohmann::json payload = nlohmann::json::object();
};

/// The end of a run, from the manager to the reporter (which prints its table and writes report.html)
/// and to the runtime's waiter: the exit code and summary.json's document. Like an event's payload,
/// the summary is an edge format (docs/store.md lists its keys; `show` and `report` read it back from
/// disk), so it crosses the actor boundary as the object the manager wrote, never as text.
struct run_finished {
  int32_t exit_code = 0;
  nlohmann::json summary = nlohmann::json::object();
};

} // namespace kagent

namespace kagent::wire {
/// CAF 0.17 has no inspect for std::optional: a field travels as a flag and a value (never a
/// non-finite double, which CAF's binary serializer cannot take) and is put back after loading.
template <class T>
struct opt {
  std::optional<T>& ref;
  bool has;
  T value;
  explicit opt(std::optional<T>& r) : ref(r), has(r.has_value()), value(r.value_or(T{})) {
    if constexpr (std::is_floating_point_v<T>)
      if (!std::isfinite(value)) has = false, value = T{};
  }
  void put() { ref = has ? std::optional<T>(value) : std::nullopt; }
};
/// A JSON value travels as its text (strict: a non-finite number is written as null).
struct json_text {
  nlohmann::json& ref;
  std::string text;
  explicit json_text(nlohmann::json& r) : ref(r), text(r.dump()) {}
  void put() { ref = nlohmann::json::parse(text, nullptr, false); }
};
/// A map of numbers travels without its non-finite entries (a metric that is not a number was not
/// measured; CAF's binary serializer cannot take one).
struct finite_map {
  std::map<std::string, double>& ref;
  std::map<std::string, double> value;
  explicit finite_map(std::map<std::string, double>& r) : ref(r) {
    for (const auto& [k, v] : r)
      if (std::isfinite(v)) value.emplace(k, v);
  }
  void put() { ref = std::move(value); }
};
} // namespace kagent::wire

namespace kagent {

// ---- inspect overloads ---------------------------------------------------------------------------
template <class I>
typename I::result_type inspect(I& f, roofline_result& x) {
  wire::opt<double> compute{x.compute_sol_pct}, memory{x.memory_sol_pct};
  wire::finite_map details{x.details};
  return f(caf::meta::type_name("roofline_result"), x.vendor, compute.has, compute.value, memory.has, memory.value,
           x.efficiency_pct, x.headroom_pct, x.at_roofline, x.bottleneck, x.uses_tensor_cores, details.value,
           x.notes, x.warnings, caf::meta::load_callback([&]() -> caf::error {
             compute.put();
             memory.put();
             details.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, kernel_profile& x) {
  wire::finite_map metrics{x.metrics};
  wire::opt<roofline_result> roofline{x.roofline};
  return f(caf::meta::type_name("kernel_profile"), x.kernel_name, x.platform, x.label, metrics.value, roofline.has,
           roofline.value, caf::meta::load_callback([&]() -> caf::error {
             metrics.put();
             roofline.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, evidence_item& x) {
  return f(caf::meta::type_name("evidence_item"), x.metric, x.value, x.interpretation);
}
template <class I>
typename I::result_type inspect(I& f, fix_item& x) {
  return f(caf::meta::type_name("fix_item"), x.fix, x.rationale);
}
template <class I>
typename I::result_type inspect(I& f, root_cause& x) {
  return f(caf::meta::type_name("root_cause"), x.cause, x.evidence, x.fixes);
}
template <class I>
typename I::result_type inspect(I& f, bottleneck& x) {
  return f(caf::meta::type_name("bottleneck"), x.category, x.summary, x.reasoning, x.root_causes,
           x.recommended_fixes);
}
template <class I>
typename I::result_type inspect(I& f, kernel_analysis& x) {
  wire::opt<kernel_profile> profile{x.profile};
  return f(caf::meta::type_name("kernel_analysis"), profile.has, profile.value, x.bottlenecks, x.source,
           caf::meta::load_callback([&]() -> caf::error {
             profile.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, chat_message& x) {
  return f(caf::meta::type_name("chat_message"), x.role, x.content);
}
template <class I>
typename I::result_type inspect(I& f, complete& x) {
  return f(caf::meta::type_name("complete"), x.request_id, x.purpose, x.model, x.system, x.messages, x.max_tokens,
           x.temperature, x.high_effort, x.candidate_id);
}
template <class I>
typename I::result_type inspect(I& f, completion& x) {
  wire::opt<llm_error_kind> kind{x.error_kind};
  return f(caf::meta::type_name("completion"), x.request_id, x.ok, x.text, x.error, kind.has, kind.value,
           x.input_tokens, x.output_tokens, x.cost_usd, x.attempts, x.model, x.provider, x.retry_after_s, x.latency_s,
           caf::meta::load_callback([&]() -> caf::error {
             kind.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, evaluate& x) {
  return f(caf::meta::type_name("evaluate"), x.candidate_id, x.code, x.mode, x.work_dir, x.best_ms);
}
template <class I>
typename I::result_type inspect(I& f, evaluation& x) {
  wire::opt<failure_kind> cause{x.failure_cause};
  return f(caf::meta::type_name("evaluation"), x.candidate_id, x.verified, x.benchmarked, x.time_ms,
           x.time_spread_pct, x.eager_ms, x.compile_ms, x.error, cause.has, cause.value, x.code_hash, x.floor_pct,
           x.stdout_tail, x.stderr_tail, x.wall_s, x.user_test_s, x.references_cached_at, x.artifacts,
           caf::meta::load_callback([&]() -> caf::error {
             cause.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, profile& x) {
  return f(caf::meta::type_name("profile"), x.candidate_id, x.code, x.label, x.kernel_name, x.work_dir, x.profile_id,
           x.budget_s);
}
template <class I>
typename I::result_type inspect(I& f, profile_batch& x) {
  return f(caf::meta::type_name("profile_batch"), x.items);
}
template <class I>
typename I::result_type inspect(I& f, profile_result& x) {
  return f(caf::meta::type_name("profile_result"), x.candidate_id, x.available, x.ok, x.profile, x.artifacts, x.error, x.invocation, x.output_tail, x.wall_s, x.synthetic, x.abandoned);
}
template <class I>
typename I::result_type inspect(I& f, profiling_failed& x) {
  return f(caf::meta::type_name("profiling_failed"), x.gpu_id, x.candidate_id, x.platform, x.invocation, x.reason,
           x.output_tail, x.turned_synthetic);
}
template <class I>
typename I::result_type inspect(I& f, candidate_spec& x) {
  wire::opt<kernel_analysis> baseline{x.baseline};
  return f(caf::meta::type_name("candidate_spec"), x.id, x.parent_id, x.round, x.bottleneck_id, x.sample_idx,
           x.model, x.parent_code, x.parent_time_ms, x.eager_ms, x.recent_attempts, x.recent_reflexions, x.work_dir,
           baseline.has, baseline.value, x.num_bottlenecks, x.worker_id, x.best_ms, x.tuned_code, x.tune_label,
           caf::meta::load_callback([&]() -> caf::error {
             baseline.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, candidate_result& x) {
  wire::opt<kernel_profile> profile{x.profile};
  wire::opt<failure_kind> cause{x.failure_cause};
  return f(caf::meta::type_name("candidate_result"), x.candidate_id, x.parent_id, x.round, x.gpu_id, x.ok, x.code,
           x.time_ms, x.error, cause.has, cause.value, x.code_hash, x.bottleneck, x.model, x.attempt,
           x.reflexion, profile.has, profile.value, x.device_s, x.user_test_s, x.llm_s, x.floor_pct,
           x.time_spread_pct, caf::meta::load_callback([&]() -> caf::error {
             profile.put();
             cause.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, candidate_measured& x) {
  return f(caf::meta::type_name("candidate_measured"), x.result);
}
template <class I>
typename I::result_type inspect(I& f, dedup_query& x) {
  return f(caf::meta::type_name("dedup_query"), x.candidate_id, x.code_hash);
}
template <class I>
typename I::result_type inspect(I& f, dedup_answer& x) {
  wire::opt<kernel_profile> profile{x.profile};
  return f(caf::meta::type_name("dedup_answer"), x.duplicate_of, profile.has, profile.value,
           caf::meta::load_callback([&]() -> caf::error {
             profile.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, analyze_parent& x) {
  wire::opt<kernel_profile> known{x.known_profile};
  return f(caf::meta::type_name("analyze_parent"), x.parent_id, x.code, x.time_ms, x.num_bottlenecks, x.work_dir,
           x.model, known.has, known.value, caf::meta::load_callback([&]() -> caf::error {
             known.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, parent_analysis& x) {
  return f(caf::meta::type_name("parent_analysis"), x.parent_id, x.analysis, x.profile_failed, x.device_s,
           x.llm_s);
}
template <class I>
typename I::result_type inspect(I& f, run_event& x) {
  wire::json_text payload{x.payload};
  return f(caf::meta::type_name("run_event"), x.kind, payload.text, caf::meta::load_callback([&]() -> caf::error {
             payload.put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, run_finished& x) {
  wire::json_text summary{x.summary};
  return f(caf::meta::type_name("run_finished"), x.exit_code, summary.text,
           caf::meta::load_callback([&]() -> caf::error {
             summary.put();
             return caf::none;
           }));
}

} // namespace kagent

// ---- platform/store records ----------------------------------------------------------------------

namespace kagent::store {
template <class I>
typename I::result_type inspect(I& f, shipped_file& x) {
  return f(caf::meta::type_name("artifact"), x.path, x.bytes);
}
template <class I>
typename I::result_type inspect(I& f, attempt_record& x) {
  wire::opt<std::string> pid{x.program_id}, err{x.error_message};
  wire::opt<double> before{x.time_before_ms}, after{x.time_after_ms}, imp{x.improvement_pct},
      compute{x.compute_sol_pct}, memory{x.memory_sol_pct}, combined{x.combined_sol_pct};
  return f(caf::meta::type_name("attempt_record"), x.round_num, x.worker_id, pid.has, pid.value,
           x.bottleneck_category, x.root_cause, x.recommended_fix, x.config_changes, before.has, before.value,
           after.has, after.value, imp.has, imp.value, x.is_improvement, compute.has, compute.value, memory.has,
           memory.value, combined.has, combined.value, x.passed_verification, err.has, err.value, x.created_at,
           x.seq, caf::meta::load_callback([&]() -> caf::error {
             for (auto* o : {&pid, &err}) o->put();
             for (auto* o : {&before, &after, &imp, &compute, &memory, &combined}) o->put();
             return caf::none;
           }));
}
template <class I>
typename I::result_type inspect(I& f, reflexion_record& x) {
  wire::opt<int> worker{x.worker_id};
  wire::opt<std::string> pid{x.program_id};
  wire::opt<double> delta{x.performance_delta_pct};
  return f(caf::meta::type_name("reflexion_record"), x.round_num, worker.has, worker.value, pid.has, pid.value,
           x.root_cause_diagnosed, x.fix_applied, x.expected_outcome, x.actual_outcome, delta.has, delta.value,
           x.was_diagnosis_correct, x.was_fix_effective, x.reasoning, x.lessons, x.avoid_patterns, x.try_patterns,
           x.created_at, x.seq, caf::meta::load_callback([&]() -> caf::error {
             worker.put();
             pid.put();
             delta.put();
             return caf::none;
           }));
}
/// Usage of one LLM call, from the llm_client to the manager (program.db's llm_calls).
template <class I>
typename I::result_type inspect(I& f, llm_call_record& x) {
  wire::opt<std::string> provider{x.provider}, kind{x.error_kind}, cand{x.candidate_id};
  wire::opt<double> cost{x.cost_usd}, latency{x.latency_ms};
  return f(caf::meta::type_name("llm_call_record"), x.purpose, x.model, provider.has, provider.value, x.tokens_in,
           x.tokens_out, cost.has, cost.value, x.attempts, x.ok, kind.has, kind.value, cand.has, cand.value,
           latency.has, latency.value, x.ts, x.seq, caf::meta::load_callback([&]() -> caf::error {
             for (auto* o : {&provider, &kind, &cand}) o->put();
             cost.put();
             latency.put();
             return caf::none;
           }));
}
} // namespace kagent::store

namespace kagent {

// ---- errors --------------------------------------------------------------------------------------
enum class errc : uint8_t {
  none = 0,
  actor_failed = 1,      ///< an actor threw; the context carries what()
  injected_fault = 2,    ///< KAGENT_INJECT_FAULT fired (tests, and users proving their set-up)
  device_lost = 3,       ///< the evaluator could not be restarted
  node_refused = 4,      ///< a node refused a manager (version, secret, platform); the context says why
};
std::string to_string(errc);
/// An error of ours with its one-line reason (the context), e.g. why a node refused a manager.
caf::error make_error(errc code, std::string reason);
/// The reason of an error made by make_error, else CAF's rendering of it.
std::string reason_of(const caf::error& e);

/// Registers every message type and the error category with `cfg`. Call before constructing the
/// actor_system, in every process that sends or receives them.
void register_messages(caf::actor_system_config& cfg);

template <class I>
typename I::result_type inspect(I& f, node_hello& x) {
  return f(caf::meta::type_name("node_hello"), x.wire, x.version, x.client);
}
template <class I>
typename I::result_type inspect(I& f, node_challenge& x) {
  return f(caf::meta::type_name("node_challenge"), x.nonce, x.node_name, x.version);
}
template <class I>
typename I::result_type inspect(I& f, node_auth& x) {
  return f(caf::meta::type_name("node_auth"), x.proof);
}
template <class I>
typename I::result_type inspect(I& f, device_offer& x) {
  return f(caf::meta::type_name("device_offer"), x.device_id, x.name, x.gpu_name);
}
template <class I>
typename I::result_type inspect(I& f, node_offer& x) {
  return f(caf::meta::type_name("node_offer"), x.node_name, x.platform, x.vendor, x.devices);
}
template <class I>
typename I::result_type inspect(I& f, run_setup& x) {
  return f(caf::meta::type_name("run_setup"), x.run_id, x.config_yaml, x.input_code, x.problem_code, x.test_code);
}
template <class I>
typename I::result_type inspect(I& f, node_device& x) {
  return f(caf::meta::type_name("node_device"), x.device_id, x.name, x.handle);
}
template <class I>
typename I::result_type inspect(I& f, node_joined& x) {
  return f(caf::meta::type_name("node_joined"), x.node, x.devices);
}
template <class I>
typename I::result_type inspect(I& f, node_refused& x) {
  return f(caf::meta::type_name("node_refused"), x.node, x.reason);
}

} // namespace kagent

CAF_ERROR_CODE_ENUM(kagent::errc, "kagent")

namespace caf {
// gtest prints caf::error as bytes otherwise.
inline void PrintTo(const error& e, std::ostream* os) { *os << to_string(e); }
} // namespace caf
