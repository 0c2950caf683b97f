#include "platform/llm/dotenv.hpp"
#include "platform/common/text.hpp"

#include <fstream>
#include <sstream>

namespace kagent {

env_map parse_dotenv(const std::string& text) {
  env_map out;
  std::istringstream in(text);
  std::string raw;
  while (std::getline(in, raw)) {
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = trim(line.substr(7));
    auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string key = trim(line.substr(0, eq));
    if (key.find_first_of(" \t") != std::string::npos) continue;
    std::string v = trim(line.substr(eq + 1));
    std::string value;
    if (!v.empty() && v[0] == '\'') {
      auto close = v.find('\'', 1);
      value = v.substr(1, close == std::string::npos ? std::string::npos : close - 1);
    } else if (!v.empty() && v[0] == '"') {
      for (size_t i = 1; i < v.size() && v[i] != '"'; ++i) {
        if (v[i] == '\\' && i + 1 < v.size()) {
          char n = v[++i];
          value.push_back(n == 'n' ? '\n' : n == 't' ? '\t' : n);
        } else {
          value.push_back(v[i]);
        }
      }
    } else {
      auto hash = v.find(" #");
      value = trim(hash == std::string::npos ? v : v.substr(0, hash));
    }
    out[key] = value;
  }
  return out;
}

env_map load_dotenv(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_dotenv(ss.str());
}

env_map merge_env(env_map env, const env_map& dotenv) {
  for (auto& [k, v] : dotenv) env.emplace(k, v);  // emplace keeps an existing entry: the environment wins
  return env;
}

std::string api_key_from(const env_map& env, const std::string& var) {
  auto v = env_get(env, var);
  if (!v || v->empty() || *v == "your-api-key-here") return {};
  return *v;
}

} // namespace kagent
