#pragma once
// Pure helpers of the HTTP transport, kept out of the Beast translation unit so they compile fast and
// are unit-tested on their own: URL parsing, proxy choice (HTTPS_PROXY/HTTP_PROXY/NO_PROXY), the SSE
// event parser and a streaming gzip decoder.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent {

struct parsed_url {
  std::string scheme;    ///< "http" or "https"
  std::string host;      ///< without brackets
  std::string port;      ///< always filled (80/443 by default)
  std::string target;    ///< path + query, at least "/"
  std::string userinfo;  ///< "user:pass" (proxies only)
  bool tls() const { return scheme == "https"; }
  /// "host:port", bracketing IPv6 literals.
  std::string authority() const;
};

/// Parses http(s)://[user:pass@]host[:port][/path]. Throws std::invalid_argument naming the URL.
parsed_url parse_url(const std::string& url);

/// Joins a base URL ("http://h:8000/v1" or ".../v1/") and a path ("/chat/completions").
std::string join_url(const std::string& base, const std::string& path);

/// The proxy to use for `url`, from HTTPS_PROXY/https_proxy (https) or HTTP_PROXY/http_proxy (http),
/// unless NO_PROXY/no_proxy lists the host ("*", exact names, or domain suffixes like ".corp" / "corp").
/// A proxy given without scheme is taken as http://.
std::optional<parsed_url> proxy_for(const parsed_url& url, const env_map& env);

/// One Server-Sent Event.
struct sse_event {
  std::string event;  ///< "" when the server sent no `event:` line (OpenAI chat streams)
  std::string data;   ///< the `data:` lines joined with '\n'
};

/// Incremental SSE parser (WHATWG rules): feed arbitrary byte chunks, get whole events. Handles
/// \n, \r\n and \r line ends, events split across chunks, comments (": ping") and multi-line data.
class sse_parser {
public:
  using callback = std::function<void(const sse_event&)>;
  explicit sse_parser(callback cb) : cb_(std::move(cb)) {}
  void feed(std::string_view bytes);
  /// End of stream: dispatches a last event that had no trailing blank line.
  void finish();

private:
  void line(std::string_view l);
  callback cb_;
  std::string pending_;
  bool last_cr_ = false;
  sse_event cur_;
  bool has_data_ = false;
};

/// Streaming gzip (and zlib) decoder for Content-Encoding: gzip / deflate.
class gunzip_stream {
public:
  gunzip_stream();
  ~gunzip_stream();
  gunzip_stream(const gunzip_stream&) = delete;
  gunzip_stream& operator=(const gunzip_stream&) = delete;
  /// Decodes the next compressed bytes; throws std::runtime_error on corrupt data.
  std::string feed(std::string_view bytes);
  bool done() const { return done_; }

private:
  struct impl;
  std::unique_ptr<impl> p_;
  bool done_ = false;
};

/// One-shot helpers (tests and the loopback server use gzip_compress).
std::string gunzip(std::string_view bytes);
std::string gzip_compress(std::string_view bytes);

/// Case-insensitive ASCII comparison of header names.
bool iequals(std::string_view a, std::string_view b);

} // namespace kagent
