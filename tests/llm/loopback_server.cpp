#include "tests/llm/loopback_server.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "platform/llm/http_util.hpp"

namespace kagent::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string received_request::header(const std::string& name) const {
  for (auto& [k, v] : headers)
    if (kagent::iequals(k, name)) return v;
  return {};
}

namespace {

void sleep_s(double s) {
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Accept loop + one thread per connection; stop() unblocks accept with a dummy connect and wakes
// blocked reads by shutting the sockets down.
struct acceptor_base {
  asio::io_context ioc;
  tcp::acceptor acc{ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};
  std::atomic<bool> stopping{false};
  std::thread accept_thread;
  mutable std::mutex m;
  std::vector<std::thread> threads;
  // Sockets stay alive until stop(), so shutting them down never hits a reused descriptor.
  std::vector<std::shared_ptr<tcp::socket>> socks;

  int port() const { return acc.local_endpoint().port(); }

  void start(std::function<void(tcp::socket&)> serve) {
    accept_thread = std::thread([this, serve] {
      for (;;) {
        auto sock = std::make_shared<tcp::socket>(ioc);
        boost::system::error_code ec;
        acc.accept(*sock, ec);
        if (stopping || ec) return;
        std::lock_guard lk(m);
        socks.push_back(sock);
        on_accept();
        threads.emplace_back([sock, serve] {
          try {
            serve(*sock);
          } catch (const std::exception&) {
          }
          boost::system::error_code ignored;
          sock->shutdown(tcp::socket::shutdown_both, ignored);
        });
      }
    });
  }
  virtual void on_accept() {}

  void stop() {
    stopping = true;
    try {
      asio::io_context c;
      tcp::socket s(c);
      s.connect(acc.local_endpoint());
    } catch (const std::exception&) {
    }
    accept_thread.join();
    {
      std::lock_guard lk(m);
      for (auto& s : socks) ::shutdown(s->native_handle(), SHUT_RDWR);
    }
    for (auto& t : threads) t.join();
  }
  virtual ~acceptor_base() = default;
};

const char* reason_for(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "Status";
  }
}

}  // namespace

struct loopback_server::impl : acceptor_base {
  reply_fn fn;
  std::atomic<int> n_conn{0}, n_req{0};
  std::vector<received_request> seen;
  std::vector<std::string> snis;
  std::unique_ptr<asio::ssl::context> tls;
  void on_accept() override { ++n_conn; }

  void serve(tcp::socket& sock) {
    if (!tls) return serve_stream(sock);
    asio::ssl::stream<tcp::socket&> ss(sock, *tls);
    boost::system::error_code ec;
    ss.handshake(asio::ssl::stream_base::server, ec);
    {
      const char* name = SSL_get_servername(ss.native_handle(), TLSEXT_NAMETYPE_host_name);
      std::lock_guard lk(m);
      snis.push_back(name ? name : "");
    }
    if (!ec) serve_stream(ss);
  }

  template <class Stream>
  void serve_stream(Stream& s) {
    beast::flat_buffer buf;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(s, buf, req, ec);
      if (ec) return;
      received_request rr;
      rr.method = std::string(req.method_string());
      rr.target = std::string(req.target());
      rr.body = req.body();
      for (auto& f : req) rr.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
      int index;
      {
        std::lock_guard lk(m);
        seen.push_back(rr);
        index = n_req++;
      }
      scripted_reply r = fn(rr, index);
      sleep_s(r.delay_before_s);
      bool close = r.close_after || !req.keep_alive() || r.frame == scripted_reply::framing::close || r.drop_mid_body;
      std::string head = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_for(r.status) + "\r\n";
      for (auto& [k, v] : r.headers) head += k + ": " + v + "\r\n";
      std::string whole;
      for (auto& c : r.chunks) whole += c;
      if (r.frame == scripted_reply::framing::content_length) {
        if (r.gzip) {
          whole = kagent::gzip_compress(whole);
          head += "Content-Encoding: gzip\r\n";
        }
        head += "Content-Length: " + std::to_string(whole.size() + (r.drop_mid_body ? 100 : 0)) + "\r\n";
      } else if (r.frame == scripted_reply::framing::chunked) {
        head += "Transfer-Encoding: chunked\r\n";
      }
      if (close) head += "Connection: close\r\n";
      head += "\r\n";
      asio::write(s, asio::buffer(head), ec);
      if (ec) return;
      if (r.frame == scripted_reply::framing::content_length && (r.gzip || r.delay_between_s <= 0)) {
        asio::write(s, asio::buffer(whole), ec);
      } else {
        for (size_t i = 0; i < r.chunks.size() && !ec; ++i) {
          if (i) sleep_s(r.delay_between_s);
          const std::string& c = r.chunks[i];
          if (c.empty()) continue;
          if (r.frame == scripted_reply::framing::chunked) {
            char size[32];
            std::snprintf(size, sizeof size, "%zx\r\n", c.size());
            asio::write(s, asio::buffer(std::string(size) + c + "\r\n"), ec);
          } else {
            asio::write(s, asio::buffer(c), ec);
          }
        }
        if (!ec && r.frame == scripted_reply::framing::chunked && !r.drop_mid_body)
          asio::write(s, asio::buffer(std::string("0\r\n\r\n")), ec);
      }
      if (ec || close || r.silent_close) return;
    }
  }
};

loopback_server::loopback_server(reply_fn fn, const tls_files* tls) : p_(std::make_unique<impl>()) {
  p_->fn = std::move(fn);
  if (tls) {
    p_->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    p_->tls->use_certificate_chain_file(tls->cert_pem);
    p_->tls->use_private_key_file(tls->key_pem, asio::ssl::context::pem);
  }
  p_->start([this](tcp::socket& s) { p_->serve(s); });
}
loopback_server::~loopback_server() { p_->stop(); }
std::string loopback_server::url() const { return "http://127.0.0.1:" + std::to_string(port()); }
int loopback_server::port() const { return p_->port(); }
int loopback_server::connections() const { return p_->n_conn; }
int loopback_server::requests() const { return p_->n_req; }
std::vector<received_request> loopback_server::received() const {
  std::lock_guard lk(p_->m);
  return p_->seen;
}
std::vector<std::string> loopback_server::sni_names() const {
  std::lock_guard lk(p_->m);
  return p_->snis;
}

// ---- proxy -----------------------------------------------------------------------------------------

struct forward_proxy::impl : acceptor_base {
  std::vector<std::string> lines;

  void serve(tcp::socket& client) {
    asio::streambuf sb;
    boost::system::error_code ec;
    size_t n = asio::read_until(client, sb, "\r\n\r\n", ec);
    if (ec) return;
    std::string head(asio::buffers_begin(sb.data()), asio::buffers_begin(sb.data()) + static_cast<long>(n));
    sb.consume(n);
    std::string line = head.substr(0, head.find("\r\n"));
    {
      std::lock_guard lk(m);
      lines.push_back(line);
    }
    auto sp1 = line.find(' '), sp2 = line.rfind(' ');
    std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string hostport = target;
    if (method != "CONNECT") {  // absolute-form: http://host:port/path
      auto u = kagent::parse_url(target);
      hostport = u.host + ":" + u.port;
    }
    auto colon = hostport.rfind(':');
    auto upp = std::make_shared<tcp::socket>(client.get_executor());
    tcp::socket& up = *upp;
    {
      std::lock_guard lk(m);
      socks.push_back(upp);
    }
    tcp::resolver res(client.get_executor());
    asio::connect(up, res.resolve(hostport.substr(0, colon), hostport.substr(colon + 1)), ec);
    if (ec) {
      asio::write(client, asio::buffer(std::string("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")), ec);
      return;
    }
    if (method == "CONNECT") {
      asio::write(client, asio::buffer(std::string("HTTP/1.1 200 Connection established\r\n\r\n")), ec);
    } else {
      asio::write(up, asio::buffer(head), ec);
    }
    if (sb.size()) asio::write(up, sb.data(), ec);
    // Pump both ways until either side closes.
    pollfd pf[2] = {{client.native_handle(), POLLIN, 0}, {up.native_handle(), POLLIN, 0}};
    char buf[16384];
    for (;;) {
      if (::poll(pf, 2, 10000) <= 0) return;
      for (int i = 0; i < 2; ++i) {
        if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t got = ::recv(pf[i].fd, buf, sizeof buf, 0);
        if (got <= 0) return;
        if (::send(pf[1 - i].fd, buf, static_cast<size_t>(got), MSG_NOSIGNAL) != got) return;
      }
    }
  }
};

forward_proxy::forward_proxy() : p_(std::make_unique<impl>()) {
  p_->start([this](tcp::socket& s) { p_->serve(s); });
}
forward_proxy::~forward_proxy() { p_->stop(); }
std::string forward_proxy::url() const { return "http://127.0.0.1:" + std::to_string(p_->port()); }
std::vector<std::string> forward_proxy::request_lines() const {
  std::lock_guard lk(p_->m);
  return p_->lines;
}

} // namespace kagent::test
