#include "platform/common/node_auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <charconv>
#include <cstdlib>
#include <stdexcept>

#include "platform/common/env.hpp"
#include "platform/common/errors.hpp"

namespace kagent {

namespace {
std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}
}  // namespace

std::string node_address::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

node_address parse_node_address(const std::string& s, const std::string& what, bool any_port) {
  const auto bad = [&](const std::string& why) {
    return user_error(what + " '" + s + "': " + why + " (expected HOST:PORT, e.g. gpu-node-1:7420)");
  };
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("no port");
  std::string host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw bad("no host");
  const std::string port = s.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || (value == 0 && !any_port) || value > 65535)
    throw bad(any_port ? "the port must be a number from 0 (any free port) to 65535"
                       : "the port must be a number from 1 to 65535");
  return {host, static_cast<uint16_t>(value)};
}

std::string fresh_nonce() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("no randomness for a node challenge (RAND_bytes)");
  return hex(buf, sizeof buf);
}

std::string node_proof(const std::string& secret, const std::string& nonce, const std::string& client_node,
                       int32_t wire) {
  const std::string msg = "kagent-node|" + nonce + "|" + client_node + "|" + std::to_string(wire);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len))
    throw std::runtime_error("HMAC-SHA256 failed");
  return hex(mac, len);
}

bool proofs_match(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string node_secret_from_env() {
  // main() took every *SECRET* variable out of the environment at start-up (docs/sandbox.md): it is
  // read from what that kept in memory, or from the environment when nothing scrubbed it.
  std::string s;
  if (auto kept = scrubbed_secrets(); kept.count(node_secret_env)) s = kept.at(node_secret_env);
  else if (const char* v = std::getenv(node_secret_env)) s = v;
  if (s.empty())
    throw user_error(std::string(node_secret_env) +
                     " is not set: a node and the runs that use it share a secret through this variable "
                     "(at least 16 characters, the same on both sides)");
  if (s.size() < 16) throw user_error(std::string(node_secret_env) + " is too short: use at least 16 characters");
  return s;
}

}  // namespace kagent
