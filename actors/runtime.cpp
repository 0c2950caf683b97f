#include "actors/runtime.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "actors/actors.hpp"
#include "actors/manager.hpp"
#include "actors/node_link.hpp"
#include "platform/common/errors.hpp"
#include "platform/search/stored_run.hpp"
#include "platform/store/node_scratch.hpp"
#include "platform/store/program_db.hpp"
#include "platform/common/stop.hpp"
#include "platform/common/redact.hpp"
#include "platform/gpu/gpu_name.hpp"
#include "platform/gpu/selection.hpp"
#include "platform/gpu/timeouts.hpp"
#include "platform/profile_core/profile_common.hpp"
#include "platform/profiling/profile_cache.hpp"
#include "platform/llm/dotenv.hpp"
#include "platform/llm/preflight.hpp"
#include "platform/prompt/prompt.hpp"
#include "platform/llm/replay.hpp"
#include "platform/process/sandbox.hpp"
#include "platform/store/program_db.hpp"
#include "platform/store/run_directory.hpp"
#include "platform/store/run_lock.hpp"
#include "platform/common/files.hpp"

namespace fs = std::filesystem;

namespace kagent {

namespace {

struct system_config : caf::actor_system_config {
  system_config() {
    // Actors are cheap and mostly wait; blocking work runs on detached actors with their own threads.
    set("scheduler.max-threads", std::max(2u, std::min(8u, std::thread::hardware_concurrency())));
    set("logger.verbosity", caf::atom("quiet"));
    // Every message type is registered (and round-trip tested), so a middleman can be loaded the day
    // actors span processes; a single-process run does not pay for its thread today.
    register_messages(*this);
  }
};

std::string pick_python(const run_config& cfg, const std::string& root) {
  if (const char* p = std::getenv("KAGENT_PYTHON"); p && *p) return p;
  if (cfg.python != "python3") return cfg.python;
  // The project's own venv (scripts/setup-python.sh) holds torch and triton.
  if (fs::exists(fs::path(root) / ".venv/bin/python")) return (fs::path(root) / ".venv/bin/python").string();
  return cfg.python;
}

std::string sanitize(std::string s) {
  for (auto& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  return s;
}

} // namespace

void check_kernel_dir(const std::string& dir) {
  if (dir.empty()) throw user_error("--kernel-dir is required (a directory holding input.py, problem.py and test.py)");
  if (!fs::is_directory(dir)) throw user_error("--kernel-dir " + dir + ": not a directory");
  for (const char* f : {"input.py", "problem.py", "test.py"})
    if (!fs::is_regular_file(fs::path(dir) / f))
      throw user_error(fmt::format("--kernel-dir {}: missing {} (a kernel directory needs input.py, problem.py "
                                   "and test.py)",
                                   dir, f));
}

resume_target read_resume_target(const std::string& run_dir, int extend_to_rounds) {
  if (!fs::is_directory(run_dir)) throw user_error("--resume " + run_dir + ": not a directory");
  auto rd = store::run_directory::open_existing(run_dir);
  resume_target t;
  t.config_path = rd.config_path().string();
  auto db = store::program_db::open(rd.program_db_path(), store::program_db::mode::read_only);
  const auto status = db.get_state(store::state_key::status).value_or("");
  if (status == "finished") {
    // A finished run goes on only to rounds it has not run yet: --max-rounds N beyond its last round.
    int ran = 0;
    try {
      ran = std::max(std::stoi(db.get_state(store::state_key::round_done).value_or("0")),
                     std::stoi(db.get_state(store::state_key::round).value_or("0")));
    } catch (const std::exception&) {
      ran = 0;
    }
    if (extend_to_rounds <= ran)
      throw user_error(fmt::format("--resume {}: this run finished already (status: finished); nothing to resume "
                                   "(it ran {} round{}; add --max-rounds N with N > {} to extend it)",
                                   run_dir, ran, ran == 1 ? "" : "s", ran));
    t.extends = true;
  }
  auto kd = db.get_state(store::state_key::kernel_dir);
  if (!kd || kd->empty())
    throw user_error("--resume " + run_dir + ": program.db does not name the kernel directory (expected run_state "
                     "'kernel_dir'); the run was killed before it started");
  t.kernel_dir = *kd;
  t.strategy_name = db.get_state(store::state_key::strategy_name).value_or("");
  return t;
}

namespace {

/// The kernel directory's paths and the three files a run (and each node of it) works from.
void read_kernel_dir(run_context& ctx, const std::string& kernel_dir) {
  ctx.kernel_dir = kernel_dir;
  ctx.problem_path = (fs::path(kernel_dir) / "problem.py").string();
  ctx.test_path = (fs::path(kernel_dir) / "test.py").string();
  ctx.input_code = read_file(fs::path(kernel_dir) / "input.py");
  ctx.problem_code = read_file(ctx.problem_path);
  ctx.test_code = read_file(ctx.test_path);
}

/// What the run reads of its request and kernel directory before anything else.
std::shared_ptr<run_context> context_from(const run_request& req) {
  auto ctx = std::make_shared<run_context>();
  ctx->cfg = req.cfg;
  ctx->resume = !req.resume_dir.empty();
  read_kernel_dir(*ctx, fs::absolute(req.kernel_dir).lexically_normal().string());
  ctx->install_root = install_root();
  ctx->python = pick_python(req.cfg, ctx->install_root);
  ctx->verbose = req.verbose;
  ctx->quiet = req.quiet;
  ctx->llm_record_dir = req.llm_record_dir;
  if (const char* f = std::getenv("KAGENT_INJECT_FAULT"); f) ctx->inject_fault = f;
  if (ctx->cfg.llm.provider == "replay" && ctx->cfg.llm.replay_dir.empty())
    ctx->cfg.llm.replay_dir = (fs::path(ctx->kernel_dir) / "replay").string();
  return ctx;
}

/// The devices of the run: the configured ones on a GPU-less platform, else what the vendor's CLI tool
/// lists under the visibility masks (this process never touches a GPU runtime, SPEC §10.2 rules 12-13).
void select_devices(run_context& rc, const env_map& env, std::vector<std::string>& notes) {
  auto* ctx = &rc;
  check_mask_conflict(env);  // for every strategy, before anything else (SPEC §10.2 rule 2)
  if (platform_needs_no_gpu(ctx->cfg.platform)) {
    ctx->device_ids = ctx->cfg.gpu_ids.empty() ? std::vector<int>{0} : ctx->cfg.gpu_ids;
    ctx->gpu_name = ctx->cfg.gpu_name.empty() ? "" : validate_gpu_name(ctx->cfg.gpu_name);
    if (ctx->cfg.platform.verifier == "cpu")
      if (auto n = cpu_device_note(ctx->device_ids.size(), std::thread::hardware_concurrency()); !n.empty())
        notes.push_back(n);
  } else {
    if (!ctx->cfg.gpu_name.empty()) validate_gpu_name(ctx->cfg.gpu_name);
    auto sel = detect_gpus({ctx->cfg.platform, ctx->cfg.gpu_ids}, env, tool_locations::from_env(env, ctx->python));
    ctx->cfg.platform = apply_detected_vendor(ctx->cfg.platform, sel);
    ctx->vendor = sel.vendor;
    ctx->device_ids = sel.ids;
    for (const auto& d : sel.devices) ctx->device_names.push_back(d.name);
    auto choice = reconcile_gpu_name(ctx->cfg.gpu_name, sel);
    ctx->gpu_name = choice.name;
    if (!choice.note.empty()) notes.push_back(choice.note);
    notes.push_back("devices: " + sel.reason);
  }
}

/// The sandbox every candidate process runs under, probed once: "bwrap" required but broken is a
/// configuration error (exit 2).
void plan_candidate_sandbox(run_context& rc, std::vector<std::string>& notes) {
  auto* ctx = &rc;
  auto plan = plan_sandbox(ctx->cfg.sandbox.mode, {});
  ctx->sandbox_mode = plan.mode;
  ctx->sandbox_warning = plan.warning;
  if (!plan.warning.empty()) notes.push_back(plan.warning);
  // Every candidate process (the harness's workers, the user's test.py) runs under this prefix;
  // "{scratch}" is the one directory it may write. CUDA IPC between the judge and its workers
  // needs the host's /dev/shm.
  sandbox_request r;
  r.writable = {"{scratch}"};
  std::error_code ec;
  r.readable = {ctx->kernel_dir, ctx->install_root};
  if (auto py = fs::canonical(ctx->python, ec); !ec) r.readable.push_back(py.parent_path().parent_path().string());
  r.hidden = {fs::absolute(".env").string()};
  r.vendor = ctx->vendor;
  r.limits = limits_from_config(ctx->cfg.sandbox, ctx->vendor, std::max(600.0, 2 * ctx->cfg.candidate_timeout_s));
  r.share_dev_shm = !ctx->vendor.empty();
  ctx->sandbox_prefix = plan_sandbox(ctx->sandbox_mode, r).prefix;
}

/// A provider for `ps`, checked by a preflight call unless it replays or llm.preflight is off.
std::shared_ptr<llm_provider> checked_provider(run_context& rc, const provider_settings& ps) {
  auto* ctx = &rc;
  if (!ps.api_key_env.empty()) ctx->child_env.erase(ps.api_key_env);
  auto provider = make_provider(ps);
  if (ctx->cfg.llm.preflight && ps.provider != "replay") {
    // Before the long initial phase and before any directory exists: a refused key, an endpoint that
    // does not answer or an unknown model is one line, exit 2.
    const auto endpoint = ps.base_url.empty() ? std::string{"its default endpoint"} : ps.base_url;
    auto quick = make_provider(preflight_settings(ps));
    auto pf = run_preflight(*quick, ps.model);
    if (pf.result == preflight_outcome::verdict::fatal)
      throw user_error(fmt::format("LLM preflight failed for {} model {} at {}: {} (check the key{}, --model and "
                                   "--base-url; llm.preflight: false skips this check)",
                                   ps.provider, ps.model, endpoint, redact(pf.message),
                                   ps.api_key_env.empty() ? "" : " in " + ps.api_key_env));
    if (pf.result == preflight_outcome::verdict::transient)
      ctx->notes.push_back("LLM preflight got a transient answer (the run retries): " + redact(pf.message));
  }
  return provider;
}

/// The LLM provider, before anything is created: a missing key, an unknown provider or a malformed
/// replay set is one line and exit 2, never a run whose every call fails.
void connect_llm(run_context& rc, const env_map& env, const std::vector<std::string>& secret_patterns) {
  auto* ctx = &rc;
  const auto dotenv = load_dotenv(".env");
  for (const auto& [k, v] : dotenv)
    if (scrub_env({{k, v}}, secret_patterns).empty()) register_secret(k, v);
  auto llm_env = merge_env(merge_env(env, scrubbed_secrets()), dotenv);
  auto settings = resolve_provider(ctx->cfg.llm, ctx->cfg.openai_model, llm_env);
  register_secret(settings.api_key_env, settings.api_key);  // also when it came from .env
  // `auto` is resolved once, here: every request names the model it picked.
  if (ctx->cfg.openai_model == "auto") ctx->cfg.openai_model = settings.model;
  if (ctx->cfg.llm.model == "auto") ctx->cfg.llm.model = settings.model;
  for (auto& m : ctx->cfg.strategy_cfg.models)
    if (m == "auto") m = settings.model;
  ctx->llm_chosen = {settings.provider, settings.model,
                     settings.provider == "replay" ? settings.replay_dir : settings.base_url, settings.reason,
                     settings.api_key_env};
  std::vector<std::string> keys{settings.api_key};
  ctx->llm = checked_provider(*ctx, settings);
  // strategy_config.models: each model reaches its own provider (its entry's provider, base_url
  // and api_key_env, else the llm block's rules applied to that model), so one run can ask
  // Anthropic and OpenAI models side by side.
  std::map<std::string, std::shared_ptr<llm_provider>> by_model;
  for (const auto& m : ctx->cfg.strategy_cfg.models) {
    if (m == settings.model || by_model.count(m)) continue;
    const auto c = config_for_model(ctx->cfg.llm, m, ctx->cfg.strategy_cfg.model_endpoints);
    auto ms = resolve_provider(c, m, llm_env);
    register_secret(ms.api_key_env, ms.api_key);
    keys.push_back(ms.api_key);
    by_model[m] = checked_provider(*ctx, ms);
    ctx->llm_models.push_back({ms.provider, ms.model, ms.provider == "replay" ? ms.replay_dir : ms.base_url,
                               ms.reason, ms.api_key_env});
  }
  if (!by_model.empty()) ctx->llm = std::make_shared<model_router>(ctx->llm, std::move(by_model));
  if (!ctx->llm_record_dir.empty())
    ctx->llm = std::make_shared<recording_provider>(ctx->llm, ctx->llm_record_dir, keys);
}

// torch.compile of the reference leaves inductor's cache (about 118 MB of precompiled headers on a
// GPU host) in the evaluator's TMPDIR under workers/: removed once the actor system, and with it
// every evaluator, is gone (this guard is destroyed after `sys`).
struct drop_inductor_caches {
  fs::path workers;
  ~drop_inductor_caches() {
    std::error_code ec;
    if (!fs::is_directory(workers, ec)) return;
    for (const auto& w : fs::directory_iterator(workers, ec)) {
      const auto tmp = w.path() / "tmp";
      if (!fs::is_directory(tmp, ec)) continue;
      for (const auto& e : fs::directory_iterator(tmp, ec))
        if (e.path().filename().string().starts_with("torchinductor_")) fs::remove_all(e.path(), ec);
    }
  }
};

} // namespace

std::shared_ptr<run_context> node_base_context(const run_config& cfg) {
  auto ctx = std::make_shared<run_context>();
  ctx->cfg = cfg;
  ctx->install_root = install_root();
  ctx->python = pick_python(cfg, ctx->install_root);
  std::vector<std::string> patterns = default_secret_patterns();
  patterns.insert(patterns.end(), cfg.secret_env_patterns.begin(), cfg.secret_env_patterns.end());
  scrub_own_environment(patterns);
  const env_map env = current_environment();
  std::vector<std::string> notes;
  select_devices(*ctx, env, notes);
  ctx->notes = notes;
  ctx->child_env = scrub_env(env, patterns);
  ctx->cache_root = default_cache_root(env).string();
  return ctx;
}

context_ptr node_run_context(const run_context& base, run_config run_cfg, const std::string& kernel_dir,
                             const std::string& run_path) {
  auto ctx = std::make_shared<run_context>(base);
  // The run's settings (timeouts, harness, dtype, ...), on the node's platform and devices.
  run_cfg.platform = base.cfg.platform;
  run_cfg.gpu_ids = base.cfg.gpu_ids;
  run_cfg.gpu_name = base.cfg.gpu_name;
  run_cfg.python = base.cfg.python;
  ctx->cfg = run_cfg;
  read_kernel_dir(*ctx, kernel_dir);
  ctx->run_path = run_path;
  std::vector<std::string> notes;
  plan_candidate_sandbox(*ctx, notes);
  ctx->test_timeout_s = resolve_test_timeout_s(ctx->cfg.test_timeout_s,
                                               ctx->vendor.empty() ? ctx->cfg.platform.verifier : ctx->vendor);
  return ctx;
}

namespace {

/// The evaluator logs of the runs this process opened on its nodes at the start, into
/// <run>/nodes/<HOST_PORT>/workers/ (the node deletes its copy when the run's link goes): a node keeps
/// nothing the run needs. A node that is gone by now, or answers in no 10 s, is skipped.
void collect_node_logs(caf::scoped_actor& owner, const run_context& ctx) {
  for (const auto& [address, gk] : ctx.node_gatekeepers) {
    if (!gk) continue;
    const auto safe = sanitize_kernel_id(address);  // 127.0.0.1_7420
    owner->request(gk, std::chrono::seconds(10), node_logs_atom::value)
        .receive(
            [&](const std::vector<artifact>& files) {
              store::write_shipped_files(fs::path(ctx.run_path) / "nodes" / safe / "workers", files);
            },
            [](caf::error&) {});
  }
}

/// Starts the manager and waits for its end; Ctrl-C / SIGTERM is passed on as a graceful stop.
void drive_manager(caf::actor_system& sys, context_ptr ctx, run_outcome& out) {
  caf::scoped_actor waiter{sys};
  auto mgr = sys.spawn(manager_actor, context_ptr{ctx}, caf::actor{waiter}, real_gpu_workers(ctx));
  waiter->monitor(mgr);
  waiter->send(mgr, start_atom::value);
  bool done = false;
  bool stopping = false;
  auto on_signal = [&] {
    const int sig = stop_signal();
    if (sig == 0 || stopping) return;
    stopping = true;
    std::cerr << "\nkagent-actors: " << stop_signal_name(sig)
              << ": stopping (in-flight candidates end now and stay pending for --resume; press Ctrl-C again "
                 "to quit at once)\n";
    // The manager stops recording results and its workers end their candidates; only then are the
    // children killed, so nothing that dies of the stop is recorded as a failure.
    waiter->request(mgr, std::chrono::seconds(5), interrupt_atom::value, sig)
        .receive([](bool) {}, [](caf::error&) {});
    request_stop();
    signal_child_groups(SIGKILL);
  };
  while (!done) {
    waiter->receive(
        [&](const run_finished& end) {
          out.exit_code = end.exit_code;
          out.summary = end.summary;
          if (end.exit_code != 0) out.error = out.summary.value("error", "run failed");
          done = true;
        },
        [&](const caf::down_msg& dm) {
          out.exit_code = 1;
          out.error = "the manager failed: " + sys.render(dm.reason);
          done = true;
        },
        caf::after(std::chrono::milliseconds(100)) >> on_signal);
  }
}

} // namespace

run_outcome run_optimization(const run_request& req) {
  run_outcome out;
  const bool resuming = !req.resume_dir.empty();
  if (resuming) (void)read_resume_target(req.resume_dir, req.extend_to_rounds);
  check_kernel_dir(req.kernel_dir);
  auto ctx = context_from(req);
  // Devices: detection by the CLI tools only; this process never touches a GPU runtime and never
  // changes its own environment (SPEC §10.2 rules 12-13).
  // Secrets leave our own environment before anything reads it (main already took the default
  // patterns; this adds the config's and llm.api_key_env): no child can inherit them, and
  // /proc/<our pid>/environ no longer shows them. No thread but this one runs yet.
  std::vector<std::string> secret_patterns = default_secret_patterns();
  secret_patterns.insert(secret_patterns.end(), ctx->cfg.secret_env_patterns.begin(), ctx->cfg.secret_env_patterns.end());
  std::vector<std::string> secret_names;
  if (!ctx->cfg.llm.api_key_env.empty()) secret_names.push_back(ctx->cfg.llm.api_key_env);
  scrub_own_environment(secret_patterns, secret_names);
  const env_map env = current_environment();
  std::vector<std::string> notes;
  if (ctx->cfg.local_devices) select_devices(*ctx, env, notes);
  else notes.push_back("devices: only the nodes' (local_devices: false)");
  plan_candidate_sandbox(*ctx, notes);
  ctx->notes = notes;
  ctx->cfg.target_platform = prompt_target_platform(ctx->cfg.target_platform, ctx->vendor, ctx->cfg.platform.verifier);
  ctx->test_timeout_s = resolve_test_timeout_s(ctx->cfg.test_timeout_s,
                                               ctx->vendor.empty() ? ctx->cfg.platform.verifier : ctx->vendor);
  ctx->child_env = scrub_env(env, secret_patterns);
  ctx->cache_root = default_cache_root(env).string();

  connect_llm(*ctx, env, secret_patterns);

  const std::string hint = sanitize(ctx->cfg.name + "-" + fs::path(ctx->kernel_dir).filename().string());

  // Destroyed after `sys`, so once every evaluator is gone.
  drop_inductor_caches inductor_guard;
  system_config cfg;
  if (!ctx->cfg.nodes.empty()) configure_links(cfg, ctx->cfg.node_tls);
  caf::actor_system sys{cfg};
  // The nodes' devices join before the run directory exists: a node that cannot be reached or refuses
  // this run is one line and no run (a resumed run reconnects to the nodes its config names).
  caf::scoped_actor node_owner{sys};  // the nodes end this run's devices when it is gone
  std::vector<std::string> unreachable;
  int first_node_id = 100;
  if (resuming) {
    // Past the ids an earlier session gave its nodes' devices (program.db names their nodes).
    auto db = store::program_db::open(fs::path(req.resume_dir) / "program.db", store::program_db::mode::read_only);
    first_node_id = search::first_node_device_id(db);
  }
  for (auto& session : connect_nodes(node_owner, *ctx, hint, first_node_id)) {
    ctx->node_gatekeepers.emplace_back(session.address, session.gatekeeper);
    if (!session.unreachable.empty()) {
      unreachable.push_back("node " + session.address + ": " + session.unreachable);
      ctx->notes.push_back("node " + session.address + " is not there yet (" + session.unreachable +
                           "): its devices join the run when it answers");
    }
    // Without devices of its own, the run's GPU (specs, the hardware floor, the roofline) is the nodes'.
    if (ctx->gpu_name.empty() && !session.gpu_name.empty()) {
      ctx->gpu_name = session.gpu_name;
      ctx->notes.push_back(fmt::format("gpu_name {}: from node {}", session.gpu_name, session.address));
    } else if (!session.gpu_name.empty() && session.gpu_name != ctx->gpu_name) {
      ctx->notes.push_back(fmt::format("node {} has {} (this run's gpu_name is {})", session.address,
                                       session.gpu_name, ctx->gpu_name));
    }
    for (const auto& d : session.devices) {
      ctx->remote_devices.push_back(d);
      ctx->device_ids.push_back(d.id);
      ctx->device_names.push_back(d.name);
      ctx->notes.push_back(fmt::format("device {}: {} on node {}", ctx->device_label(d.id), d.name, d.node));
    }
  }
  // A run needs a device to start on; a node that is not there yet may join later.
  if (ctx->device_ids.empty())
    throw user_error(unreachable.empty() ? "no device for this run" : unreachable.front());
  auto rd = resuming ? store::run_directory::open_existing(req.resume_dir)
                     : store::run_directory::create(req.run_dir_base, hint, to_yaml(ctx->cfg));
  store::run_lock lock{rd.path()};
  ctx->run_path = fs::absolute(rd.path()).string();
  out.run_path = ctx->run_path;

  inductor_guard.workers = fs::path(ctx->run_path) / "workers";

  // Ctrl-C / SIGTERM from here on: the first is handled below (a graceful stop), a second ends the
  // process at once (platform/common/stop.hpp). The handlers go when the run is over.
  install_stop_handlers();
  struct restore_signals {
    ~restore_signals() { remove_stop_handlers(); }
  } signals_guard;

  drive_manager(sys, ctx, out);
  collect_node_logs(node_owner, *ctx);
  return out;
}

} // namespace kagent
