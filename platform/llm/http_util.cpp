#include "platform/llm/http_util.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace kagent {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

static std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string parsed_url::authority() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + port;
}

parsed_url parse_url(const std::string& url) {
  parsed_url u;
  auto sep = url.find("://");
  if (sep == std::string::npos) throw std::invalid_argument("URL '" + url + "' has no scheme (expected http:// or https://)");
  u.scheme = lower(url.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https")
    throw std::invalid_argument("URL '" + url + "' has scheme '" + u.scheme + "' (expected http or https)");
  std::string rest = url.substr(sep + 3);
  auto slash = rest.find_first_of("/?");
  std::string auth = slash == std::string::npos ? rest : rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (!u.target.empty() && u.target[0] == '?') u.target = "/" + u.target;
  if (auto at = auth.rfind('@'); at != std::string::npos) {
    u.userinfo = auth.substr(0, at);
    auth = auth.substr(at + 1);
  }
  if (!auth.empty() && auth[0] == '[') {
    auto close = auth.find(']');
    if (close == std::string::npos) throw std::invalid_argument("URL '" + url + "' has an unterminated IPv6 address");
    u.host = auth.substr(1, close - 1);
    if (close + 1 < auth.size() && auth[close + 1] == ':') u.port = auth.substr(close + 2);
  } else if (auto colon = auth.rfind(':'); colon != std::string::npos) {
    u.host = auth.substr(0, colon);
    u.port = auth.substr(colon + 1);
  } else {
    u.host = auth;
  }
  if (u.host.empty()) throw std::invalid_argument("URL '" + url + "' has no host");
  if (u.port.empty()) u.port = u.tls() ? "443" : "80";
  if (!std::all_of(u.port.begin(), u.port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    throw std::invalid_argument("URL '" + url + "' has a non-numeric port '" + u.port + "'");
  return u;
}

std::string join_url(const std::string& base, const std::string& path) {
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  if (path.empty()) return b.empty() ? "/" : b;
  return path[0] == '/' ? b + path : b + "/" + path;
}

static std::optional<std::string> first_env(const env_map& env, std::initializer_list<const char*> names) {
  for (auto* n : names)
    if (auto v = env_get(env, n); v && !v->empty()) return v;
  return std::nullopt;
}

static bool no_proxy_matches(const std::string& list, const std::string& host_in) {
  std::string host = lower(host_in);
  size_t pos = 0;
  while (pos <= list.size()) {
    auto comma = list.find(',', pos);
    std::string e = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? list.size() + 1 : comma + 1;
    e.erase(0, e.find_first_not_of(" \t"));
    e.erase(e.find_last_not_of(" \t") + 1);
    e = lower(e);
    if (auto colon = e.rfind(':'); colon != std::string::npos && e.find(':') == colon) e = e.substr(0, colon);  // "host:port"
    if (e.empty()) continue;
    if (e == "*") return true;
    if (e[0] == '.') e = e.substr(1);
    if (host == e) return true;
    if (host.size() > e.size() && host.compare(host.size() - e.size(), e.size(), e) == 0 &&
        host[host.size() - e.size() - 1] == '.')
      return true;
  }
  return false;
}

std::optional<parsed_url> proxy_for(const parsed_url& url, const env_map& env) {
  auto proxy = url.tls() ? first_env(env, {"HTTPS_PROXY", "https_proxy"})
                         : first_env(env, {"HTTP_PROXY", "http_proxy"});
  if (!proxy) return std::nullopt;
  if (auto np = first_env(env, {"NO_PROXY", "no_proxy"}); np && no_proxy_matches(*np, url.host)) return std::nullopt;
  std::string p = *proxy;
  if (p.find("://") == std::string::npos) p = "http://" + p;
  auto u = parse_url(p);
  if (u.port.empty()) u.port = "80";
  return u;
}

// ---- SSE ---------------------------------------------------------------------------------------

void sse_parser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c == '\n' && last_cr_) {  // the \n of a \r\n pair: the line already ended at \r
      last_cr_ = false;
      continue;
    }
    last_cr_ = false;
    if (c == '\r' || c == '\n') {
      last_cr_ = c == '\r';
      line(pending_);
      pending_.clear();
    } else {
      pending_.push_back(c);
    }
  }
}

void sse_parser::finish() {
  if (!pending_.empty()) {
    line(pending_);
    pending_.clear();
  }
  line("");
}

void sse_parser::line(std::string_view l) {
  if (l.empty()) {
    if (has_data_ || !cur_.event.empty()) cb_(cur_);
    cur_ = {};
    has_data_ = false;
    return;
  }
  if (l[0] == ':') return;  // comment / keep-alive
  auto colon = l.find(':');
  std::string_view field = l.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (field == "event") {
    cur_.event = std::string(value);
  } else if (field == "data") {
    if (has_data_) cur_.data.push_back('\n');
    cur_.data.append(value);
    has_data_ = true;
  }
}

// ---- gzip ---------------------------------------------------------------------------------------

struct gunzip_stream::impl {
  z_stream z{};
};

gunzip_stream::gunzip_stream() : p_(std::make_unique<impl>()) {
  // 32 + MAX_WBITS: accept both gzip and zlib headers (servers mislabel deflate).
  if (inflateInit2(&p_->z, 32 + MAX_WBITS) != Z_OK) throw std::runtime_error("zlib inflateInit2 failed");
}

gunzip_stream::~gunzip_stream() { inflateEnd(&p_->z); }

std::string gunzip_stream::feed(std::string_view bytes) {
  std::string out;
  auto& z = p_->z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  char buf[16384];
  while (z.avail_in > 0 && !done_) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    int rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw std::runtime_error(std::string("corrupt gzip body: ") + (z.msg ? z.msg : "inflate failed"));
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_STREAM_END) done_ = true;
    if (rc == Z_BUF_ERROR && z.avail_out != 0) break;
  }
  // Drain output still pending inside zlib when the input is used up.
  while (!done_) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    int rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof buf - z.avail_out);
    if (rc == Z_STREAM_END) done_ = true;
    if (rc != Z_OK || z.avail_out != 0) break;
  }
  return out;
}

std::string gunzip(std::string_view bytes) {
  gunzip_stream g;
  std::string out = g.feed(bytes);
  if (!g.done()) throw std::runtime_error("truncated gzip body");
  return out;
}

std::string gzip_compress(std::string_view bytes) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("zlib deflateInit2 failed");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  char buf[16384];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = deflate(&z, Z_FINISH);
    out.append(buf, sizeof buf - z.avail_out);
  } while (rc == Z_OK);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip compression failed");
  return out;
}

} // namespace kagent
