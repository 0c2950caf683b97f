#pragma once
// Providers: one blocking call = one HTTP attempt (retries live in retry.hpp / the llm_client actor).
// Model -> provider resolution follows SPEC §11.1, overridable through the `llm:` block and the CLI.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "platform/common/env.hpp"
#include "platform/config/config.hpp"
#include "platform/llm/llm_types.hpp"

namespace kagent {

class http_client;

/// Called with each piece of generated text as it streams in (may be unset).
using text_callback = std::function<void(std::string_view)>;

class llm_provider {
public:
  virtual ~llm_provider() = default;
  /// One attempt. Throws llm_error (never containing the API key). Thread-safe.
  virtual llm_response complete(const llm_request& req, const text_callback& on_text = {}) = 0;
  /// "anthropic", "openai", "openai_responses", "openai_compatible", "relay", "replay".
  virtual std::string name() const = 0;
  /// The model used when a request leaves llm_request::model empty.
  virtual std::string default_model() const = 0;
};

/// Everything a provider needs, resolved from llm_config + model + environment.
struct provider_settings {
  std::string provider;
  std::string model;
  std::string base_url;     ///< for openai/openai_compatible it includes /v1
  std::string api_key_env;  ///< the variable the key came from ("" = no key)
  std::string api_key;      ///< the secret itself; never printed, logged or recorded
  bool stream = true;
  double connect_timeout_s = 15;
  double idle_timeout_s = 120;
  double timeout_s = 600;
  std::string replay_dir;
  bool replay_cycle = false;    ///< replay: start a purpose over when its replies run out (default: fail)
  bool replay_by_hash = false;  ///< replay: match recordings by request hash instead of order
  /// Where the choice came from, for `ask` and the run log ("llm.provider", "model registry", ...).
  std::string reason;
};

/// The registry of SPEC §11.1: provider names to try, in order, for a model. Unknown `claude-*` names
/// try anthropic then relay, unknown `gpt-*`/`o<digit>*` openai then relay, anything else relay.
std::vector<std::string> registry_providers(const std::string& model);

/// The models `auto` chooses from, in order: an Anthropic one (ANTHROPIC_API_KEY), an OpenAI one
/// (OPENAI_API_KEY).
const std::vector<std::string>& auto_models();
/// Model `auto`: the first of auto_models() whose provider has a key (or that llm.provider names).
/// Throws user_error saying which keys it looked for when none is set.
std::string auto_model(const llm_config& cfg, const env_map& env);

/// Resolves the provider. Model: cfg.model, else `fallback_model` (the run's openai_model); `auto`
/// resolves with auto_model().
/// Provider: cfg.provider if set; else base_url set -> anthropic for claude models, openai_compatible
/// otherwise; else the registry order, taking the first available one (a key is set; for relay,
/// `relay_probe(url)` answers). `env` must already include .env (see merge_env).
/// Throws user_error "No available provider for model <m> ..." or naming the missing variable.
provider_settings resolve_provider(const llm_config& cfg, const std::string& fallback_model, const env_map& env,
                                   const std::function<bool(const std::string& url)>& relay_probe = {});

/// The llm block as it applies to `model` of strategy_config.models: the block with that model, and
/// the model's own entry (`endpoints`) over it. An entry naming another provider than the block's
/// inherits neither the block's base_url nor its api_key_env (an OpenAI key must never be sent to
/// Anthropic's endpoint); its own settings, where given, win. Resolve the result with
/// resolve_provider(result, model, env).
llm_config config_for_model(const llm_config& block, const std::string& model,
                            const std::map<std::string, model_endpoint>& endpoints);

/// The default relay probe: GET <url>/ with a 5 s timeout; true on any HTTP answer.
bool probe_relay(const std::string& url);

/// One run, several models from different vendors: a request goes to the provider of its model
/// (strategy_config.models resolved per model), a model not listed (or none) to the default one.
class model_router final : public llm_provider {
public:
  model_router(std::shared_ptr<llm_provider> fallback, std::map<std::string, std::shared_ptr<llm_provider>> by_model)
      : fallback_(std::move(fallback)), by_model_(std::move(by_model)) {}
  llm_response complete(const llm_request& req, const text_callback& on_text = {}) override;
  std::string name() const override { return fallback_->name(); }
  std::string default_model() const override { return fallback_->default_model(); }
  /// The provider a request for `model` goes to.
  const llm_provider& route(const std::string& model) const;

private:
  std::shared_ptr<llm_provider> fallback_;
  std::map<std::string, std::shared_ptr<llm_provider>> by_model_;
};

/// Builds the provider. `http` may be shared between providers (connection pool); null: a new one.
std::shared_ptr<llm_provider> make_provider(const provider_settings& s, std::shared_ptr<http_client> http = nullptr);

} // namespace kagent
