// The only Beast translation unit of the LLM layer (see the header for what it does and why).
#include "platform/llm/http_client.hpp"
#include "platform/common/redact.hpp"
#include "platform/common/stop.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "platform/llm/http_util.hpp"

namespace kagent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

std::string http_response::header(std::string_view name) const {
  for (auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

namespace {

struct connection {
  asio::io_context ioc;
  std::optional<beast::tcp_stream> tcp;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buf;
  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
};

[[noreturn]] void throw_stopped() {
  throw http_error("cancelled", "the run is stopping (interrupted): the request was abandoned");
}

// Runs one async operation to completion on the connection's own io_context, so the calling thread
// blocks while Beast's expires_after timers stay effective (sync Beast I/O ignores them).
// It also watches for the run's stop (platform/common/stop.hpp): then it throws at once, and the
// operation's handler is destroyed with the connection without ever running (the caller must drop the
// connection, which unwinding does: connections live in local unique_ptrs until given back).
template <class Start>
beast::error_code run_op(asio::io_context& ioc, Start&& start) {
  auto result = std::make_shared<beast::error_code>(asio::error::would_block);
  ioc.restart();
  start([result](beast::error_code ec, auto&&...) { *result = ec; });
  while (!ioc.stopped()) {
    ioc.run_for(std::chrono::milliseconds(100));
    if (!ioc.stopped() && should_give_up()) throw_stopped();
  }
  return *result;
}

/// The time left for one operation: its own timeout, shortened by the total deadline.
struct deadline {
  steady::time_point end;
  double total_s;
  // Returns the duration and whether the total deadline (rather than the op's own) bounds it.
  std::pair<steady::duration, bool> op(double op_s) const {
    auto left = end - steady::now();
    if (left <= steady::duration::zero()) return {steady::duration::zero(), true};
    if (op_s <= 0) return {left, true};
    auto own = std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(op_s));
    return own < left ? std::make_pair(own, false) : std::make_pair(left, true);
  }
};

std::string fmt_s(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", s);
  return b;
}

std::string base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool is_disconnect(const beast::error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == ssl::error::stream_truncated || ec == asio::error::connection_aborted;
}

}  // namespace

struct http_client::impl {
  env_map env;
  int max_idle;
  ssl::context ctx{ssl::context::tls_client};
  std::mutex m;
  std::map<std::string, std::vector<std::unique_ptr<connection>>> idle;
  std::atomic<long> opened{0};

  impl(env_map e, int mi) : env(std::move(e)), max_idle(mi) {
    ctx.set_default_verify_paths();  // system store; honours SSL_CERT_FILE / SSL_CERT_DIR
    ctx.set_verify_mode(ssl::verify_peer);
    ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                    ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  }

  std::unique_ptr<connection> take(const std::string& key) {
    std::lock_guard lk(m);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto c = std::move(it->second.back());
    it->second.pop_back();
    return c;
  }

  void give_back(const std::string& key, std::unique_ptr<connection> c) {
    std::lock_guard lk(m);
    auto& v = idle[key];
    if (static_cast<int>(v.size()) < max_idle) v.push_back(std::move(c));
  }

  [[noreturn]] static void fail_op(const beast::error_code& ec, bool total_bound, double op_s, const deadline& dl,
                                   const std::string& what) {
    if (ec == beast::error::timeout) {
      if (total_bound) throw http_error("timeout", what + ": total timeout of " + fmt_s(dl.total_s) + " s exceeded");
      throw http_error("timeout", what + ": no data for " + fmt_s(op_s) + " s (timeout)");
    }
    throw http_error("connection", what + ": " + ec.message());
  }

  std::unique_ptr<connection> open(const parsed_url& u, const std::optional<parsed_url>& proxy,
                                   const http_request& r, const deadline& dl) {
    if (should_give_up()) throw_stopped();
    auto c = std::make_unique<connection>();
    const parsed_url& hop = proxy ? *proxy : u;
    const std::string where = proxy ? u.authority() + " via proxy " + proxy->authority() : u.authority();

    // Name resolution has no expires_after: bound it with run_for and cancel.
    tcp::resolver resolver(c->ioc);
    tcp::resolver::results_type results;
    beast::error_code rec = asio::error::would_block;
    resolver.async_resolve(hop.host, hop.port, [&](beast::error_code ec, tcp::resolver::results_type res) {
      rec = ec;
      results = std::move(res);
    });
    auto [rdur, rtotal] = dl.op(r.connect_timeout_s);
    for (auto until = steady::now() + rdur; rec == asio::error::would_block && steady::now() < until && !should_give_up();)
      c->ioc.run_for(std::min<steady::duration>(until - steady::now(), std::chrono::milliseconds(100)));
    if (rec == asio::error::would_block && should_give_up()) {
      resolver.cancel();
      c->ioc.run();
      throw_stopped();
    }
    if (rec == asio::error::would_block) {
      resolver.cancel();
      c->ioc.run();
      fail_op(beast::error::timeout, rtotal, r.connect_timeout_s, dl, "resolving " + hop.host);
    }
    if (rec) throw http_error("connection", "cannot resolve host '" + hop.host + "': " + rec.message());

    c->tcp.emplace(c->ioc);
    auto [cdur, ctotal] = dl.op(r.connect_timeout_s);
    c->tcp->expires_after(cdur);
    auto ec = run_op(c->ioc, [&](auto h) { c->tcp->async_connect(results, h); });
    if (ec) fail_op(ec, ctotal, r.connect_timeout_s, dl, "cannot connect to " + hop.authority());
    c->tcp->socket().set_option(tcp::no_delay(true));
    ++opened;

    if (proxy && u.tls()) {
      http::request<http::empty_body> creq{http::verb::connect, u.authority(), 11};
      creq.set(http::field::host, u.authority());
      if (!proxy->userinfo.empty()) creq.set(http::field::proxy_authorization, "Basic " + base64(proxy->userinfo));
      auto [wdur, wtotal] = dl.op(r.connect_timeout_s);
      c->tcp->expires_after(wdur);
      ec = run_op(c->ioc, [&](auto h) { http::async_write(*c->tcp, creq, h); });
      if (ec) fail_op(ec, wtotal, r.connect_timeout_s, dl, "proxy " + proxy->authority());
      http::response_parser<http::empty_body> p;
      p.skip(true);  // a CONNECT reply has no body; the tunnel starts right after the header
      auto [pdur, ptotal] = dl.op(r.connect_timeout_s);
      c->tcp->expires_after(pdur);
      ec = run_op(c->ioc, [&](auto h) { http::async_read_header(*c->tcp, c->buf, p, h); });
      if (ec) fail_op(ec, ptotal, r.connect_timeout_s, dl, "proxy " + proxy->authority() + " (CONNECT)");
      if (p.get().result_int() / 100 != 2)
        throw http_error("proxy", "proxy " + proxy->authority() + " refused CONNECT to " + u.authority() + ": " +
                                      std::to_string(p.get().result_int()) + " " + std::string(p.get().reason()));
      c->buf.consume(c->buf.size());
    }

    if (u.tls()) {
      c->tls.emplace(std::move(*c->tcp), ctx);
      c->tcp.reset();
      // SNI carries names only (RFC 6066); an IP literal is still checked against the certificate.
      beast::error_code ip_ec;
      asio::ip::make_address(u.host, ip_ec);
      if (ip_ec && !SSL_set_tlsext_host_name(c->tls->native_handle(), u.host.c_str()))
        throw http_error("tls", "cannot set SNI host name '" + u.host + "'");
      c->tls->set_verify_mode(ssl::verify_peer);
      c->tls->set_verify_callback(ssl::host_name_verification(u.host));
      auto [hdur, htotal] = dl.op(r.connect_timeout_s);
      beast::get_lowest_layer(*c->tls).expires_after(hdur);
      ec = run_op(c->ioc, [&](auto h) { c->tls->async_handshake(ssl::stream_base::client, h); });
      if (ec == beast::error::timeout) fail_op(ec, htotal, r.connect_timeout_s, dl, "TLS handshake with " + where);
      if (ec) throw http_error("tls", "TLS handshake with " + where + " failed: " + ec.message());
    }
    return c;
  }

  // One request/response on an open connection. Sets `stale` when the connection died before any
  // byte of the response (a pooled keep-alive connection the server had closed).
  template <class Stream>
  http_response exchange(connection& c, Stream& s, const parsed_url& u, const std::optional<parsed_url>& proxy,
                         const http_request& r, const deadline& dl, bool& stale, bool& keep) {
    http::request<http::string_body> req;
    if (auto v = http::string_to_verb(r.method); v != http::verb::unknown) req.method(v);
    else req.method_string(r.method);
    req.version(11);
    req.target(proxy && !u.tls() ? u.scheme + "://" + u.authority() + u.target : u.target);
    bool default_port = (u.tls() && u.port == "443") || (!u.tls() && u.port == "80");
    req.set(http::field::host, default_port ? u.host : u.authority());
    req.set(http::field::user_agent, "kagent-actors");
    req.set(http::field::accept_encoding, "gzip");
    if (proxy && !u.tls() && !proxy->userinfo.empty())
      req.set(http::field::proxy_authorization, "Basic " + base64(proxy->userinfo));
    for (auto& [k, v] : r.headers) req.set(k, v);
    req.body() = redact(r.body);  // nothing a child printed leaves this machine with a secret in it
    req.prepare_payload();

    const std::string where = u.scheme + "://" + u.authority();
    auto [wdur, wtotal] = dl.op(r.idle_timeout_s);
    c.lowest().expires_after(wdur);
    auto ec = run_op(c.ioc, [&](auto h) { http::async_write(s, req, h); });
    if (ec) {
      if (is_disconnect(ec)) stale = true;
      fail_op(ec, wtotal, r.idle_timeout_s, dl, "sending the request to " + where);
    }

    http::response_parser<http::buffer_body> p;
    // Not boost::none: Boost 1.74 compares Content-Length against the empty optional and then
    // rejects every sized body with body_limit.
    p.body_limit(std::numeric_limits<std::uint64_t>::max());
    // A non-streamed reply only starts once the whole generation is done: only the total bounds it.
    double head_s = r.on_data ? r.idle_timeout_s : 0;
    auto [hdur, htotal] = dl.op(head_s);
    c.lowest().expires_after(hdur);
    ec = run_op(c.ioc, [&](auto h) { http::async_read_header(s, c.buf, p, h); });
    if (ec) {
      if (is_disconnect(ec) && !p.got_some()) stale = true;
      fail_op(ec, htotal, head_s, dl, "waiting for the response of " + where);
    }

    http_response res;
    res.status = static_cast<int>(p.get().result_int());
    for (auto& f : p.get()) res.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    std::string enc = res.header("content-encoding");
    std::optional<gunzip_stream> gz;
    if (iequals(enc, "gzip") || iequals(enc, "x-gzip") || iequals(enc, "deflate")) gz.emplace();
    bool to_sink = r.on_data && res.status / 100 == 2;

    size_t received = 0;
    char buf[16384];
    auto deliver = [&](std::string_view bytes) {
      std::string decoded;
      if (gz) {
        try {
          decoded = gz->feed(bytes);
        } catch (const std::exception& e) {
          throw http_error("connection", "response from " + where + ": " + e.what());
        }
        bytes = decoded;
      }
      if (bytes.empty()) return;
      if (to_sink) r.on_data(bytes);
      else res.body.append(bytes);
    };
    while (!p.is_done()) {
      p.get().body().data = buf;
      p.get().body().size = sizeof buf;
      auto [bdur, btotal] = dl.op(r.idle_timeout_s);
      c.lowest().expires_after(bdur);
      ec = run_op(c.ioc, [&](auto h) { http::async_read_some(s, c.buf, p, h); });
      if (ec == http::error::need_buffer) ec = {};
      size_t n = sizeof buf - p.get().body().size;
      received += n;
      if (n) deliver(std::string_view(buf, n));
      if (ec) {
        if (is_disconnect(ec))
          throw http_error("connection", "connection to " + where + " dropped after " + std::to_string(received) +
                                             " bytes of the response body (" + ec.message() + ")");
        fail_op(ec, btotal, r.idle_timeout_s, dl, "reading the response of " + where);
      }
    }
    keep = p.get().keep_alive() && !p.need_eof();
    return res;
  }

  http_response send(const http_request& r) {
    parsed_url u;
    try {
      u = parse_url(r.url);
    } catch (const std::invalid_argument& e) {
      throw http_error("url", e.what());
    }
    std::optional<parsed_url> proxy;
    try {
      proxy = proxy_for(u, env);
    } catch (const std::invalid_argument& e) {
      throw http_error("proxy", std::string("bad proxy setting: ") + e.what());
    }
    const std::string key = u.scheme + "://" + u.authority() + (proxy ? "|" + proxy->authority() : "");
    deadline dl{steady::now() + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(r.total_timeout_s)),
                r.total_timeout_s};
    for (int round = 0;; ++round) {
      auto c = round == 0 ? take(key) : nullptr;
      bool reused = c != nullptr;
      if (!c) c = open(u, proxy, r, dl);
      bool stale = false, keep = false;
      try {
        http_response res = c->tls ? exchange(*c, *c->tls, u, proxy, r, dl, stale, keep)
                                   : exchange(*c, *c->tcp, u, proxy, r, dl, stale, keep);
        res.reused_connection = reused;
        if (keep) give_back(key, std::move(c));
        return res;
      } catch (const http_error&) {
        if (reused && stale) continue;  // the server closed an idle keep-alive connection: open a fresh one
        throw;
      }
    }
  }
};

http_client::http_client(env_map env, int max_idle_per_host)
    : p_(std::make_unique<impl>(std::move(env), max_idle_per_host)) {}
http_client::~http_client() = default;
http_response http_client::send(const http_request& req) { return p_->send(req); }
long http_client::connections_opened() const { return p_->opened.load(); }

} // namespace kagent
