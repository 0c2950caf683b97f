#include "platform/llm/provider.hpp"

#include <cstdlib>

#include "platform/common/errors.hpp"
#include "platform/llm/dotenv.hpp"
#include "platform/llm/http_client.hpp"
#include "platform/llm/http_util.hpp"
#include "platform/llm/replay.hpp"
#include "platform/llm/wire.hpp"

namespace kagent {

namespace {

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

const std::string default_relay_url = "http://127.0.0.1:11434";

std::string default_key_env(const std::string& provider) {
  if (provider == "anthropic") return "ANTHROPIC_API_KEY";
  if (provider == "openai" || provider == "openai_responses") return "OPENAI_API_KEY";
  return "";
}

std::string default_base_url(const std::string& provider, const env_map& env) {
  if (provider == "anthropic") return "https://api.anthropic.com";
  if (provider == "openai" || provider == "openai_responses") return "https://api.openai.com/v1";
  if (provider == "relay") {
    auto v = env_get(env, "LLM_RELAY_URL");
    return v && !v->empty() ? *v : default_relay_url;
  }
  return "";
}

class http_provider final : public llm_provider {
public:
  http_provider(provider_settings s, std::shared_ptr<http_client> http) : s_(std::move(s)), http_(std::move(http)) {
    if (s_.provider == "anthropic") api_ = api_kind::anthropic;
    else if (s_.provider == "openai_responses") api_ = api_kind::openai_responses;
    else if (s_.provider == "relay") api_ = api_kind::relay;
    else api_ = api_kind::openai_chat;
    official_ = s_.provider == "openai" || s_.provider == "openai_responses";
    if (s_.provider == "openai" && needs_responses_api(s_.model)) api_ = api_kind::openai_responses;
  }

  std::string name() const override { return s_.provider; }
  std::string default_model() const override { return s_.model; }

  llm_response complete(const llm_request& req, const text_callback& on_text) override {
    try {
      return attempt(req, on_text);
    } catch (const llm_error& e) {
      throw llm_error(e.kind(), redact(e.what(), {s_.api_key}), e.http_status(), e.retry_after_s());
    }
  }

private:
  llm_response attempt(const llm_request& req, const text_callback& on_text) {
    const std::string model = req.model.empty() ? s_.model : req.model;
    api_kind api = api_;
    if (official_ && api == api_kind::openai_chat && needs_responses_api(model)) api = api_kind::openai_responses;
    // The relay speaks one JSON reply only.
    bool stream = s_.stream && api != api_kind::relay;
    wire_options opt{api, stream, official_};

    http_request hr;
    hr.method = "POST";
    hr.url = join_url(s_.base_url, endpoint_path(api));
    if (api == api_kind::relay && hr.url.find("://") != std::string::npos &&
        hr.url.find('/', hr.url.find("://") + 3) == std::string::npos)
      hr.url += "/";
    hr.body = build_body(req, model, opt).dump();
    hr.headers.push_back({"content-type", "application/json"});
    if (api == api_kind::anthropic) {
      if (!s_.api_key.empty()) hr.headers.push_back({"x-api-key", s_.api_key});
      hr.headers.push_back({"anthropic-version", "2023-06-01"});
    } else if (!s_.api_key.empty()) {
      hr.headers.push_back({"authorization", "Bearer " + s_.api_key});
    }
    if (stream) hr.headers.push_back({"accept", "text/event-stream"});
    hr.connect_timeout_s = s_.connect_timeout_s;
    hr.idle_timeout_s = s_.idle_timeout_s;
    hr.total_timeout_s = s_.timeout_s;

    // A server may ignore "stream": true and answer plain JSON; decide on the first byte.
    std::optional<stream_decoder> dec;
    std::optional<sse_parser> sse;
    std::string plain;
    std::string head;  // first bytes of an SSE-mode body, for the error when it holds no event at all
    size_t events = 0;
    enum { undecided, is_sse, is_json } mode = undecided;
    if (stream) {
      dec.emplace(api, s_.provider, on_text);
      sse.emplace([&](const sse_event& ev) {
        ++events;
        dec->on_event(ev);
      });
      hr.on_data = [&](std::string_view bytes) {
        if (mode == undecided) {
          auto p = bytes.find_first_not_of(" \t\r\n");
          if (p == std::string_view::npos) return;
          mode = bytes[p] == '{' || bytes[p] == '[' ? is_json : is_sse;
        }
        if (mode == is_json) {
          plain.append(bytes);
        } else {
          if (head.size() < 200) head.append(bytes.substr(0, 200 - head.size()));
          sse->feed(bytes);
        }
      };
    }

    http_response res;
    try {
      res = http_->send(hr);
    } catch (const http_error& e) {
      auto kind = e.kind() == "timeout" ? llm_error_kind::timeout
                  : e.kind() == "url" || e.kind() == "cancelled" ? llm_error_kind::unavailable
                                        : llm_error_kind::connection;
      throw llm_error(kind, s_.provider + ": " + e.what());
    }
    if (res.status / 100 != 2)
      throw classify_http_error(s_.provider, res.status, res.header("retry-after"), res.header("retry-after-ms"), res.body);

    llm_response out;
    if (!stream) {
      out = parse_body(api, res.body, s_.provider);
    } else if (mode == is_json) {
      out = parse_body(api, plain, s_.provider);
      if (on_text && !out.text.empty()) on_text(out.text);
    } else {
      sse->finish();
      // A whole reply that is neither JSON nor an event stream (a gateway's HTML page) is malformed,
      // not a dropped connection: say what arrived.
      if (events == 0 && !head.empty())
        throw llm_error(llm_error_kind::malformed,
                        s_.provider + ": the reply is neither JSON nor an event stream: " + head);
      out = dec->finish();
    }
    out.provider = s_.provider;
    if (out.model.empty()) out.model = model;
    out.raw_status = res.status;
    return out;
  }

  // Base URLs are forgiving about /v1: "https://gw/anthropic/v1" does not become .../v1/v1/messages,
  // and a bare "http://localhost:8000" for an OpenAI-style server gets the /v1 every such server uses.
  std::string endpoint_path(api_kind api) const {
    std::string base = s_.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    bool ends_v1 = base.size() >= 3 && base.compare(base.size() - 3, 3, "/v1") == 0;
    if (api == api_kind::anthropic) return ends_v1 ? "/messages" : "/v1/messages";
    if (api == api_kind::openai_chat || api == api_kind::openai_responses) {
      std::string target;
      try {
        target = parse_url(base).target;
      } catch (const std::invalid_argument&) {
      }
      return (target == "/" ? "/v1" : "") + api_path(api);
    }
    return api_path(api);
  }

  provider_settings s_;
  std::shared_ptr<http_client> http_;
  api_kind api_;
  bool official_ = true;
};

}  // namespace

std::vector<std::string> registry_providers(const std::string& model) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> registry = {
      {"o4-mini", {"openai"}},
      {"gpt-5", {"relay", "openai"}},
      {"gpt-5.2", {"openai"}},
      {"claude-opus-4-6", {"anthropic"}},
      {"claude-sonnet-4-6", {"anthropic"}},
      {"claude-opus-4-1-20250805", {"anthropic"}},
      {"claude-sonnet-4-20250514", {"anthropic"}},
      {"claude-sonnet-4-5-20250929", {"anthropic"}},
      {"gcp-claude-4-sonnet", {"relay"}},
      {"claude-opus-4.5", {"relay"}},
      {"gpt-5-2", {"relay"}},
  };
  for (auto& [name, providers] : registry)
    if (name == model) return providers;
  if (starts_with(model, "claude-")) return {"anthropic", "relay"};
  if (starts_with(model, "gpt-") ||
      (model.size() > 1 && model[0] == 'o' && std::isdigit(static_cast<unsigned char>(model[1]))))
    return {"openai", "relay"};
  return {"relay"};
}

bool probe_relay(const std::string& url) {
  try {
    http_client c;
    http_request r;
    r.method = "GET";
    r.url = join_url(url, "/");
    r.connect_timeout_s = r.idle_timeout_s = r.total_timeout_s = 5;
    c.send(r);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string auto_model(const llm_config& cfg, const env_map& env) {
  const auto has_key = [&](const std::string& provider) {
    return !api_key_from(env, cfg.api_key_env.empty() ? default_key_env(provider) : cfg.api_key_env).empty();
  };
  if (cfg.provider == "anthropic" || (cfg.provider.empty() && has_key("anthropic"))) return auto_models().front();
  if (cfg.provider == "openai" || cfg.provider == "openai_responses" || (cfg.provider.empty() && has_key("openai")))
    return auto_models().back();
  throw user_error("model 'auto' picks " + auto_models().front() + " when ANTHROPIC_API_KEY is set and " +
                   auto_models().back() + " when OPENAI_API_KEY is set; neither is" +
                   (cfg.provider.empty() ? std::string{} : " for provider " + cfg.provider) +
                   ": set one (environment or .env) or pass --model (and --provider)");
}

const std::vector<std::string>& auto_models() {
  static const std::vector<std::string> m{"claude-opus-4-6", "gpt-5"};
  return m;
}

llm_config config_for_model(const llm_config& block, const std::string& model,
                            const std::map<std::string, model_endpoint>& endpoints) {
  llm_config c = block;
  c.model = model;
  auto ep = endpoints.find(model);
  if (ep == endpoints.end()) return c;
  const auto& e = ep->second;
  if (!e.provider.empty() && e.provider != c.provider) {
    // Another vendor: the block's endpoint and key variable are not this model's.
    c.base_url.clear();
    c.api_key_env.clear();
  }
  if (!e.provider.empty()) c.provider = e.provider;
  if (!e.base_url.empty()) c.base_url = e.base_url;
  if (!e.api_key_env.empty()) c.api_key_env = e.api_key_env;
  return c;
}

provider_settings resolve_provider(const llm_config& cfg, const std::string& fallback_model, const env_map& env,
                                   const std::function<bool(const std::string&)>& relay_probe) {
  static const std::vector<std::string> known = {"anthropic", "openai", "openai_responses", "openai_compatible",
                                                 "relay", "replay"};
  provider_settings s;
  s.model = cfg.model.empty() ? fallback_model : cfg.model;
  s.stream = cfg.stream;
  s.connect_timeout_s = cfg.connect_timeout_s;
  s.idle_timeout_s = cfg.idle_timeout_s;
  s.timeout_s = cfg.timeout_s;
  s.replay_dir = cfg.replay_dir;

  std::string provider = cfg.provider;
  if (s.model == "auto") s.model = auto_model(cfg, env);
  if (!provider.empty()) {
    bool ok = false;
    for (auto& k : known) ok = ok || k == provider;
    if (!ok)
      throw user_error("llm.provider '" + provider +
                       "' is unknown (expected anthropic, openai, openai_responses, openai_compatible, relay or replay)");
    s.reason = "llm.provider";
  } else if (!cfg.base_url.empty()) {
    provider = starts_with(s.model, "claude") ? "anthropic" : "openai_compatible";
    s.reason = "llm.base_url";
  } else if (!cfg.replay_dir.empty()) {
    provider = "replay";
    s.reason = "llm.replay_dir";
  } else {
    if (s.model.empty()) throw user_error("no model given (set openai_model or llm.model, or pass --model)");
    std::string tried;
    for (auto& cand : registry_providers(s.model)) {
      bool available = false;
      if (cand == "relay") {
        std::string url = default_base_url("relay", env);
        available = relay_probe ? relay_probe(url) : probe_relay(url);
        tried += (tried.empty() ? "" : ", ") + std::string("relay at ") + url + (available ? "" : " (not reachable)");
      } else {
        std::string var = cfg.api_key_env.empty() ? default_key_env(cand) : cfg.api_key_env;
        available = !api_key_from(env, var).empty();
        tried += (tried.empty() ? "" : ", ") + cand + (available ? "" : " (" + var + " not set)");
      }
      if (available) {
        provider = cand;
        break;
      }
    }
    if (provider.empty())
      throw user_error("No available provider for model " + s.model + ": tried " + tried +
                       "; set the key in the environment or .env, or set llm.provider / llm.base_url");
    s.reason = "model registry";
  }
  s.provider = provider;

  if (provider == "replay") {
    if (s.replay_dir.empty()) throw user_error("llm.provider replay needs llm.replay_dir (a directory of recorded replies)");
    return s;
  }
  s.base_url = cfg.base_url.empty() ? default_base_url(provider, env) : cfg.base_url;
  if (s.base_url.empty())
    throw user_error("llm.provider " + provider + " needs llm.base_url (for example http://localhost:8000/v1)");
  if (provider == "relay") {
    if (auto t = env_get(env, "LLM_RELAY_TIMEOUT_S"); t && !t->empty()) {
      char* end = nullptr;
      double v = std::strtod(t->c_str(), &end);
      if (end == t->c_str() || *end || v <= 0) throw user_error("LLM_RELAY_TIMEOUT_S='" + *t + "' is not a positive number of seconds");
      s.timeout_s = v;
    }
  }
  if (s.model.empty()) throw user_error("no model given for provider " + provider + " (set llm.model or pass --model)");

  s.api_key_env = cfg.api_key_env.empty() ? default_key_env(provider) : cfg.api_key_env;
  if (!s.api_key_env.empty()) {
    s.api_key = api_key_from(env, s.api_key_env);
    if (s.api_key.empty())
      throw user_error(s.api_key_env + " is not set (needed by provider " + provider + " for model " + s.model +
                       "); export it or put it in .env");
  }
  return s;
}

std::shared_ptr<llm_provider> make_provider(const provider_settings& s, std::shared_ptr<http_client> http) {
  if (s.provider == "replay") return std::make_shared<replay_provider>(s.replay_dir, replay_options{s.replay_cycle, s.replay_by_hash}, s.model);
  if (!http) http = std::make_shared<http_client>();
  return std::make_shared<http_provider>(s, std::move(http));
}

const llm_provider& model_router::route(const std::string& model) const {
  auto it = by_model_.find(model);
  return it == by_model_.end() ? *fallback_ : *it->second;
}

llm_response model_router::complete(const llm_request& req, const text_callback& on_text) {
  auto it = by_model_.find(req.model);
  return (it == by_model_.end() ? fallback_ : it->second)->complete(req, on_text);
}

} // namespace kagent
