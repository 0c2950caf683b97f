#pragma once
// Blocking HTTP/1.1 client for the LLM providers. The only code that includes Beast/Asio/OpenSSL is
// http_client.cpp (each such translation unit costs about a minute and 1.4 GB to compile).
//
// - https with certificate verification against the system store (SSL_CERT_FILE / SSL_CERT_DIR are
//   honoured by OpenSSL), SNI and host-name verification; plain http for local endpoints;
// - keep-alive: a small pool of idle connections per scheme+host+port (+proxy), reused by later calls;
//   a stale pooled connection that fails before any response byte is retried once on a fresh one;
// - deadlines enforced with async operations + expires_after: connect, idle (no byte for N seconds)
//   and total;
// - proxies from HTTPS_PROXY / HTTP_PROXY / NO_PROXY: a CONNECT tunnel for https, absolute-form
//   requests for http; "user:pass@" in the proxy URL becomes Proxy-Authorization: Basic;
// - Content-Encoding: gzip/deflate decoded (also while streaming);
// - streaming: with `on_data`, the body of a 2xx response is handed over as it arrives (chunked or
//   close-delimited), so a long generation is bounded by the idle timeout between bytes, not by one
//   read.
// Thread-safe: any number of threads may call send() on one client.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "platform/common/env.hpp"

namespace kagent {

struct http_request {
  std::string method = "POST";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  ///< Host/Content-Length are added
  std::string body;
  double connect_timeout_s = 15;
  double idle_timeout_s = 120;   ///< max silence while waiting for the headers of a streamed reply and
                                 ///< between body bytes
  double total_timeout_s = 600;  ///< whole exchange, including connect and retry of a stale connection
  /// Streaming sink for a 2xx body (decoded). Unset: the body is collected into http_response::body.
  std::function<void(std::string_view)> on_data;
};

struct http_response {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;              ///< decoded; empty when streamed to on_data
  bool reused_connection = false;
  /// The first header named `name` (case-insensitive), or "".
  std::string header(std::string_view name) const;
};

/// A transport failure (no HTTP status to judge). `kind` is "timeout", "connection", "tls", "proxy",
/// "cancelled" (the run is stopping: platform/common/stop.hpp) or
/// "url"; the message names the host and what failed, never a header value.
class http_error : public std::runtime_error {
public:
  http_error(std::string kind, const std::string& msg) : std::runtime_error(msg), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }

private:
  std::string kind_;
};

class http_client {
public:
  /// `env` supplies the proxy variables (a snapshot; the process environment is never read later).
  explicit http_client(env_map env = current_environment(), int max_idle_per_host = 4);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  http_response send(const http_request& req);

  /// Connections opened so far (tests check keep-alive reuse).
  long connections_opened() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace kagent
