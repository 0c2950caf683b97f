#pragma once
// A loopback HTTP/1.1 server (127.0.0.1, ephemeral port, its own threads) that answers each request
// with a scripted reply: any status and headers, Content-Length / chunked / close-delimited framing,
// delays, gzip, and connections dropped mid-body. Plus a tiny forwarding proxy (CONNECT tunnels and
// absolute-form requests). The only Beast translation unit of the tests.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace kagent::test {

struct received_request {
  std::string method, target, body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(const std::string& name) const;  ///< case-insensitive, "" when absent
};

struct scripted_reply {
  enum class framing { content_length, chunked, close };
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> chunks;  ///< body pieces, written one by one
  framing frame = framing::content_length;
  double delay_before_s = 0;        ///< before the status line
  double delay_between_s = 0;       ///< between body pieces
  bool drop_mid_body = false;       ///< close the connection after the pieces without finishing the body
  bool gzip = false;                ///< gzip the whole body (content_length framing) + Content-Encoding
  bool close_after = false;         ///< Connection: close after this reply
  bool silent_close = false;        ///< close after this reply without announcing it (stale keep-alive)
};

using reply_fn = std::function<scripted_reply(const received_request& req, int index)>;

/// PEM files of a server certificate and key: the server then speaks HTTPS.
struct tls_files {
  std::string cert_pem;
  std::string key_pem;
};

class loopback_server {
public:
  explicit loopback_server(reply_fn fn, const tls_files* tls = nullptr);
  ~loopback_server();
  std::string url() const;
  int port() const;
  int connections() const;
  int requests() const;
  std::vector<received_request> received() const;
  /// SNI host names sent by TLS clients, one per handshake ("" when none was sent).
  std::vector<std::string> sni_names() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

class forward_proxy {
public:
  forward_proxy();
  ~forward_proxy();
  std::string url() const;
  /// Request lines seen ("CONNECT 127.0.0.1:1234 HTTP/1.1", "POST http://... HTTP/1.1").
  std::vector<std::string> request_lines() const;

private:
  struct impl;
  std::unique_ptr<impl> p_;
};

} // namespace kagent::test
