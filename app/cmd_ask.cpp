// `kagent-actors ask`: one request through the same provider, retry and accounting code a run uses,
// printing the reply and the usage. It is how a user checks a key, a proxy or a local endpoint before
// starting a five-hour run.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>

#include "app/command.hpp"
#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"
#include "platform/config/config.hpp"
#include "platform/llm/dotenv.hpp"
#include "platform/llm/http_client.hpp"
#include "platform/llm/provider.hpp"
#include "platform/llm/replay.hpp"
#include "platform/llm/retry.hpp"

namespace kagent::app {
namespace {

struct ask_options {
  std::string prompt;
  std::string strategy;
  std::string model, provider, base_url, api_key_env, system, record_dir, replay_dir, purpose = "ask";
  std::optional<int> max_tokens;
  std::optional<double> temperature, timeout_s, retry_base_s;
  std::optional<int> retries;
  bool no_stream = false;
  bool high_effort = false;
};

int run_ask(const ask_options& o) {
  try {
    // Same sources as a run: the strategy's `llm:` block (when given), then the flags on top.
    run_config rc;
    if (!o.strategy.empty()) rc = load_strategy(o.strategy, config_search_dirs());
    llm_config cfg = rc.llm;
    if (!o.provider.empty()) cfg.provider = o.provider;
    if (!o.base_url.empty()) cfg.base_url = o.base_url;
    if (!o.model.empty()) cfg.model = o.model;
    if (!o.api_key_env.empty()) cfg.api_key_env = o.api_key_env;
    if (!o.replay_dir.empty()) {
      cfg.replay_dir = o.replay_dir;
      if (o.provider.empty()) cfg.provider = "replay";
    }
    if (o.no_stream) cfg.stream = false;
    if (o.max_tokens) cfg.max_tokens = *o.max_tokens;
    if (o.timeout_s) cfg.timeout_s = *o.timeout_s;
    if (o.retries) cfg.max_retries = *o.retries;

    env_map env = merge_env(merge_env(current_environment(), scrubbed_secrets()), load_dotenv(".env"));
    provider_settings s = resolve_provider(cfg, rc.openai_model, env);
    std::shared_ptr<llm_provider> provider = make_provider(s, std::make_shared<http_client>(env));
    if (!o.record_dir.empty())
      provider = std::make_shared<recording_provider>(provider, o.record_dir, std::vector<std::string>{s.api_key});

    std::cerr << fmt::format("provider: {} (chosen by {}), model: {}{}{}\n", s.provider, s.reason, s.model,
                             s.base_url.empty() ? "" : ", url: " + s.base_url,
                             s.api_key_env.empty() ? "" : ", key from " + s.api_key_env);

    llm_request req;
    req.purpose = o.purpose;
    req.model = s.model;
    req.system = o.system;
    req.messages = {{"user", o.prompt}};
    if (req.messages[0].content == "-")
      req.messages[0].content.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    req.max_tokens = cfg.max_tokens;
    req.temperature = o.temperature;
    req.high_effort = o.high_effort;

    usage_ledger ledger(cfg.prices);
    call_policy pol;
    pol.retry = retry_config_from(cfg);
    if (o.retry_base_s) pol.retry.base_delay_s = *o.retry_base_s;
    pol.ledger = &ledger;
    pol.run_budget_usd = cfg.budget_usd;
    pol.call_budget_usd = cfg.call_budget_usd;
    bool streamed_any = false;
    pol.on_retry = [&](const retry_decision& d, const llm_error& e) {
      if (streamed_any) std::cout << "\n" << std::flush;
      streamed_any = false;
      std::cerr << "attempt failed: " << e.what() << "\n" << d.reason << "\n";
    };
    auto out = call_with_retries(*provider, req, pol, [&](std::string_view t) {
      streamed_any = true;
      std::cout << t << std::flush;
    });
    if (!streamed_any) std::cout << out.response.text;
    if (out.response.text.empty() || out.response.text.back() != '\n') std::cout << "\n";

    auto price = price_for(out.response.model.empty() ? s.model : out.response.model, cfg.prices);
    std::string cost = price ? fmt::format("${:.4f} (estimate)", ledger.total_cost()) : std::string("unknown (no price for this model)");
    std::cout << "---\n"
              << fmt::format("provider: {}  model: {}  stop: {}\n", out.response.provider, out.response.model,
                             out.response.stop_reason.empty() ? "-" : out.response.stop_reason)
              << fmt::format("tokens: in {}, out {}  cost: {}\n", out.response.input_tokens, out.response.output_tokens, cost)
              << fmt::format("attempts: {}  latency: {:.2f} s  total: {:.2f} s\n", out.attempts, out.latency_s, out.total_s);
    if (out.response.truncated())
      std::cerr << "warning: the reply was cut off at max_tokens (" << req.max_tokens << ")\n";
    return 0;
  } catch (const user_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const llm_error& e) {
    std::cerr << "error: LLM call failed (" << to_string(e.kind()) << "): " << e.what() << "\n";
    return 1;
  } catch (const run_error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}

const register_command ask_command{"ask", [](CLI::App& root, int& exit_code) {
  auto o = std::make_shared<ask_options>();
  auto* sub = root.add_subcommand("ask", "send one prompt to the configured LLM and print the reply and usage");
  sub->add_option("prompt", o->prompt, "the prompt ('-' reads it from stdin)")->required();
  sub->add_option("--config,-c", o->strategy, "take the llm: block and model of this strategy (name or .yaml)");
  sub->add_option("--model,-m", o->model, "model name (default: the strategy's openai_model / llm.model)");
  sub->add_option("--provider", o->provider, "anthropic, openai, openai_responses, openai_compatible, relay or replay")
      ->check(CLI::IsMember({"anthropic", "openai", "openai_responses", "openai_compatible", "relay", "replay"}));
  sub->add_option("--base-url", o->base_url, "endpoint base URL (e.g. http://localhost:8000/v1 for vLLM)");
  sub->add_option("--api-key-env", o->api_key_env, "environment variable that holds the API key");
  sub->add_flag("--no-stream", o->no_stream, "ask for one JSON reply instead of an SSE stream");
  sub->add_option("--max-tokens", o->max_tokens, "max_tokens of the reply (default: llm.max_tokens)")->check(CLI::PositiveNumber);
  sub->add_option("--temperature", o->temperature, "sampling temperature (default: the server's)");
  sub->add_option("--system", o->system, "system prompt");
  sub->add_flag("--high-effort", o->high_effort, "request high reasoning effort");
  sub->add_option("--timeout", o->timeout_s, "total timeout per attempt in seconds (default: llm.timeout_s)")->check(CLI::PositiveNumber);
  sub->add_option("--retries", o->retries, "retries after the first attempt (default: llm.max_retries)")->check(CLI::NonNegativeNumber);
  sub->add_option("--retry-base-delay", o->retry_base_s, "first backoff delay in seconds (default 2)")->check(CLI::NonNegativeNumber);
  sub->add_option("--llm-record", o->record_dir, "record the exchange as JSON into this directory");
  sub->add_option("--replay", o->replay_dir, "answer from this replay directory instead of a server");
  sub->add_option("--purpose", o->purpose, "purpose recorded with the call (default: ask)");
  sub->callback([o, &exit_code] { exit_code = run_ask(*o); });
}};

}  // namespace
}  // namespace kagent::app
