#include "platform/llm/replay.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "platform/common/errors.hpp"
#include "platform/common/redact.hpp"
#include "platform/common/stop.hpp"
#include "platform/common/text.hpp"
#include "platform/common/files.hpp"

namespace kagent {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "optimize_012.md" -> ("optimize", 12); false for names that do not follow the pattern.
bool split_name(const fs::path& p, std::string& purpose, int& number) {
  std::string ext = p.extension().string();
  if (ext != ".md" && ext != ".txt" && ext != ".py" && ext != ".json") return false;
  std::string stem = p.stem().string();
  auto us = stem.rfind('_');
  if (us == std::string::npos || us == 0 || us + 1 == stem.size()) return false;
  std::string digits = stem.substr(us + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) || digits.size() > 9)
    return false;
  purpose = stem.substr(0, us);
  number = std::stoi(digits);
  return true;
}

std::string safe_purpose(const std::string& p) {
  std::string out;
  for (char c : p) out.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '-');
  return out.empty() ? "any" : out;
}

json request_json(const llm_request& req) {
  json msgs = json::array();
  for (auto& m : req.messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  json j = {{"purpose", req.purpose}, {"system", req.system}, {"messages", msgs}, {"max_tokens", req.max_tokens},
            {"high_effort", req.high_effort}};
  j["temperature"] = req.temperature ? json(*req.temperature) : json(nullptr);
  return j;
}

long estimate_tokens(size_t chars) { return static_cast<long>((chars + 3) / 4); }

llm_error_kind kind_from_string(const std::string& s) {
  for (int i = 0; i <= static_cast<int>(last_llm_error_kind); ++i)
    if (s == to_string(static_cast<llm_error_kind>(i))) return static_cast<llm_error_kind>(i);
  return llm_error_kind::server;
}

// Redacts every string inside a JSON value.
void redact_json(json& j, const std::vector<std::string>& secrets) {
  if (j.is_string()) j = redact(j.get<std::string>(), secrets);
  else if (j.is_structured())
    for (auto& v : j) redact_json(v, secrets);
}

}  // namespace

std::string request_hash(const llm_request& req) {
  json j = request_json(req);
  std::string canon = j.dump();  // nlohmann objects are key-sorted: stable
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(canon.data(), canon.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char b[3];
  for (unsigned i = 0; i < 8 && i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  return hex;
}

// ---- replay ------------------------------------------------------------------------------------

replay_front_matter parse_replay_front_matter(const std::string& text, const std::string& where) {
  replay_front_matter fm;
  static const std::string open = "<!-- replay";
  if (text.compare(0, open.size(), open) != 0) return fm;
  auto eol = text.find('\n');
  const std::string first = text.substr(0, eol);
  if (first.size() > open.size() && !std::isspace(static_cast<unsigned char>(first[open.size()])))
    return fm;  // "<!-- replayed ..." is ordinary reply text
  if (trim(first) != open)  // e.g. "<!-- replay match: x -->" on one line
    throw user_error("replay file " + where + ": the front-matter opening line must be '<!-- replay' alone, got '" +
                     trim(first) + "'");
  if (eol == std::string::npos)
    throw user_error("replay file " + where + ": front-matter block '<!-- replay' is never closed (expected a '-->' line)");
  size_t pos = eol + 1;
  int line_no = 1;
  while (true) {
    ++line_no;
    if (pos >= text.size())
      throw user_error("replay file " + where + ": front-matter block '<!-- replay' is never closed (expected a '-->' line)");
    auto next = text.find('\n', pos);
    std::string line = trim(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    pos = next == std::string::npos ? text.size() : next + 1;
    if (line == "-->") break;
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("match:", 0) == 0) {
      std::string value = trim(line.substr(6));
      if (value.empty())
        throw user_error("replay file " + where + " line " + std::to_string(line_no) +
                         ": 'match:' needs the literal text to look for");
      fm.match.push_back(value);
      continue;
    }
    throw user_error("replay file " + where + " line " + std::to_string(line_no) + ": unknown front-matter line '" + line +
                     "' (expected 'match: TEXT', '# comment' or '-->')");
  }
  fm.present = true;
  fm.body_offset = pos;
  return fm;
}

replay_provider::replay_provider(std::string dir, replay_options opt, std::string model)
    : dir_(std::move(dir)), opt_(opt), model_(std::move(model)) {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) throw user_error("replay directory '" + dir_ + "' does not exist (llm.replay_dir)");
  std::map<std::string, std::vector<entry>> all;
  for (auto& de : fs::directory_iterator(dir_)) {
    std::string purpose;
    int number = 0;
    if (!de.is_regular_file() || !split_name(de.path(), purpose, number)) continue;
    entry e;
    e.number = number;
    e.path = de.path().string();
    const std::string name = de.path().filename().string();
    if (de.path().extension() == ".json") {
      // A recording is matched when it carries a top-level "match" array (anything unparsable is
      // reported when it is served, as before).
      json j = json::parse(read_file(e.path), nullptr, false);
      if (j.is_object() && j.contains("match")) {
        if (!j["match"].is_array())
          throw user_error("replay file " + e.path + ": \"match\" must be an array of strings");
        for (auto& m : j["match"]) {
          if (!m.is_string() || m.get<std::string>().empty())
            throw user_error("replay file " + e.path + ": \"match\" must hold non-empty strings");
          e.match.push_back(m.get<std::string>());
        }
        e.matched = true;
      }
    } else {
      auto fm = parse_replay_front_matter(read_file(e.path), e.path);
      e.matched = fm.present;
      e.match = std::move(fm.match);
    }
    all[purpose].push_back(std::move(e));
  }
  for (auto& [purpose, v] : all) {
    std::sort(v.begin(), v.end(), [](const entry& a, const entry& b) { return a.number < b.number; });
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].number == v[i - 1].number)
        throw user_error("replay directory '" + dir_ + "' has two replies numbered " + std::to_string(v[i].number) +
                         " for purpose '" + purpose + "': " + fs::path(v[i - 1].path).filename().string() + " and " +
                         fs::path(v[i].path).filename().string());
    auto& set = sets_[purpose];
    for (auto& e : v) (e.matched ? set.matched : set.ordered).push_back(e);
  }
}

int replay_provider::served(const std::string& purpose) const {
  std::lock_guard lk(m_);
  auto it = served_.find(safe_purpose(purpose));
  return it == served_.end() ? 0 : it->second;
}

llm_response replay_provider::complete(const llm_request& req, const text_callback& on_text) {
  // KAGENT_REPLAY_DELAY_S: answer like a slow endpoint (tests that must interrupt a run while an LLM
  // call is in flight; demos). Read per call, never changed by us.
  if (const char* d = std::getenv("KAGENT_REPLAY_DELAY_S"); d && *d) {
    char* end = nullptr;
    const double s = std::strtod(d, &end);
    if (end != d && s > 0 && s < 3600) {
      // In slices, so that a run being stopped (Ctrl-C) does not wait for a slow fake endpoint.
      if (!wait_unless_giving_up(s))
        throw llm_error(llm_error_kind::unavailable, stop_requested() ? "the run is stopping (interrupted)"
                                                                       : "cancelled: the candidate timed out");
    }
  }
  std::string purpose = safe_purpose(req.purpose);
  auto count = [&] {
    std::lock_guard lk(m_);
    ++served_[purpose];
  };
  if (opt_.by_hash) {
    std::string h = request_hash(req);
    for (auto& [p, set] : sets_)
      for (auto* v : {&set.matched, &set.ordered})
        for (auto& e : *v) {
          if (fs::path(e.path).extension() != ".json") continue;
          json j = json::parse(read_file(e.path), nullptr, false);
          if (j.is_object() && j.value("request_hash", "") == h) {
            count();
            return serve(e, req, on_text);
          }
        }
    throw llm_error(llm_error_kind::replay_exhausted,
                    "replay: no recording in '" + dir_ + "' matches request hash " + h + " (purpose '" + purpose + "')");
  }
  const purpose_set* set = nullptr;
  std::string key = purpose;
  if (auto it = sets_.find(purpose); it != sets_.end()) set = &it->second;
  else if (auto any = sets_.find("any"); any != sets_.end()) {
    set = &any->second;
    key = "any";
  }
  if (!set)
    throw llm_error(llm_error_kind::replay_exhausted, "replay: '" + dir_ + "' has no reply for purpose '" + purpose +
                                                          "' (expected files like " + purpose + "_001.md)");
  // Matched files first: the same request always gets the same reply, whatever came before it.
  auto contains = [&](const std::string& needle) {
    if (req.system.find(needle) != std::string::npos) return true;
    for (auto& m : req.messages)
      if (m.content.find(needle) != std::string::npos) return true;
    return false;
  };
  std::string misses;  // why each matched file did not match, for the error below
  int listed = 0;
  for (auto& e : set->matched) {
    auto missing = std::find_if(e.match.begin(), e.match.end(), [&](const std::string& m) { return !contains(m); });
    if (missing == e.match.end()) {
      count();
      return serve(e, req, on_text);
    }
    if (listed < 4) {
      std::string shown = missing->size() > 60 ? missing->substr(0, 57) + "..." : *missing;
      misses += (listed ? "; " : "") + fs::path(e.path).filename().string() + " lacks '" + shown + "'";
    } else if (listed == 4) {
      misses += "; " + std::to_string(set->matched.size() - 4) + " more";
    }
    ++listed;
  }
  entry e;
  {
    std::lock_guard lk(m_);
    int& n = next_[key];
    const bool left = n < static_cast<int>(set->ordered.size());
    if (!left && (!opt_.cycle || set->ordered.empty())) {
      const std::string next_name =
          key + "_" +
          std::to_string(std::max(set->ordered.empty() ? 0 : set->ordered.back().number,
                                  set->matched.empty() ? 0 : set->matched.back().number) +
                         1) +
          ".md";
      if (set->matched.empty())
        throw llm_error(llm_error_kind::replay_exhausted,
                        "replay: the set '" + dir_ + "' has no more replies for purpose '" + key + "' (all " +
                            std::to_string(set->ordered.size()) + " used); add " + next_name + " or enable cycling");
      throw llm_error(llm_error_kind::replay_exhausted,
                      "replay: no reply in '" + dir_ + "' for this '" + purpose + "' request: no matched file matches it (" +
                          misses + ") and " +
                          (set->ordered.empty() ? "there is no unmatched reply for purpose '" + key + "'"
                                                : "all " + std::to_string(set->ordered.size()) +
                                                      " unmatched replies for purpose '" + key + "' are used"));
    }
    if (!left) n = 0;
    e = set->ordered[static_cast<size_t>(n++)];
    ++served_[purpose];
  }
  return serve(e, req, on_text);
}

llm_response replay_provider::serve(const entry& e, const llm_request& req, const text_callback& on_text) const {
  llm_response r;
  r.provider = "replay";
  r.model = req.model.empty() ? model_ : req.model;
  size_t prompt_chars = req.system.size();
  for (auto& m : req.messages) prompt_chars += m.content.size();
  std::string content = read_file(e.path);
  if (fs::path(e.path).extension() == ".json") {
    json j = json::parse(content, nullptr, false);
    if (j.is_discarded() || !j.is_object())
      throw llm_error(llm_error_kind::malformed, "replay: " + e.path + " is not a JSON object");
    if (j.contains("error") && j["error"].is_object()) {
      auto& err = j["error"];
      std::optional<double> ra;
      if (err.contains("retry_after_s") && err["retry_after_s"].is_number()) ra = err["retry_after_s"].get<double>();
      throw llm_error(kind_from_string(err.value("kind", "server")), err.value("message", "replayed error"),
                      err.value("http_status", 0), ra);
    }
    if (!j.contains("response") || !j["response"].is_object() || !j["response"].contains("text"))
      throw llm_error(llm_error_kind::malformed, "replay: " + e.path + " has neither 'response.text' nor 'error'");
    auto& res = j["response"];
    r.text = res.value("text", "");
    r.model = res.value("model", r.model);
    r.input_tokens = res.value("input_tokens", estimate_tokens(prompt_chars));
    r.output_tokens = res.value("output_tokens", estimate_tokens(r.text.size()));
    r.stop_reason = res.value("stop_reason", "end_turn");
  } else {
    if (e.matched) content.erase(0, parse_replay_front_matter(content, e.path).body_offset);
    r.text = content;
    r.input_tokens = estimate_tokens(prompt_chars);
    r.output_tokens = estimate_tokens(content.size());
    r.stop_reason = "end_turn";
  }
  if (on_text && !r.text.empty()) on_text(r.text);
  return r;
}

// ---- record --------------------------------------------------------------------------------------

recording_provider::recording_provider(std::shared_ptr<llm_provider> inner, std::string dir,
                                       std::vector<std::string> secrets)
    : inner_(std::move(inner)), dir_(std::move(dir)), secrets_(std::move(secrets)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) throw user_error("cannot create the recording directory '" + dir_ + "'");
  for (auto& de : fs::directory_iterator(dir_)) {
    std::string purpose;
    int number = 0;
    if (split_name(de.path(), purpose, number)) next_[purpose] = std::max(next_[purpose], number);
  }
}

llm_response recording_provider::complete(const llm_request& req, const text_callback& on_text) {
  try {
    llm_response r = inner_->complete(req, on_text);
    write(req, &r, nullptr);
    return r;
  } catch (const llm_error& e) {
    write(req, nullptr, &e);
    throw;
  }
}

void recording_provider::write(const llm_request& req, const llm_response* res, const llm_error* err) {
  json j;
  j["purpose"] = req.purpose;
  j["request_hash"] = request_hash(req);
  j["request"] = request_json(req);
  j["request"]["model"] = req.model.empty() ? inner_->default_model() : req.model;
  j["provider"] = inner_->name();
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char ts[32];
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["recorded_at"] = ts;
  if (res) {
    j["response"] = {{"text", res->text},
                     {"model", res->model},
                     {"provider", res->provider},
                     {"input_tokens", res->input_tokens},
                     {"output_tokens", res->output_tokens},
                     {"stop_reason", res->stop_reason}};
  } else {
    j["error"] = {{"kind", to_string(err->kind())}, {"message", err->what()}, {"http_status", err->http_status()}};
    if (err->retry_after_s()) j["error"]["retry_after_s"] = *err->retry_after_s();
  }
  redact_json(j, secrets_);
  std::string purpose = safe_purpose(req.purpose);
  int n;
  {
    std::lock_guard lk(m_);
    n = ++next_[purpose];
  }
  char num[16];
  std::snprintf(num, sizeof num, "%03d", n);
  fs::path final_path = fs::path(dir_) / (purpose + "_" + num + ".json");
  fs::path tmp = final_path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << redact(j.dump(2)) << "\n";  // also any secret a prompt quoted from a child

    if (!f) throw run_error("cannot write the LLM recording " + tmp.string());
  }
  fs::rename(tmp, final_path);
}

} // namespace kagent
