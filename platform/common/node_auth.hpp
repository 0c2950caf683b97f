#pragma once
// What a manager and a node (kagent-actors serve) agree on before any work crosses their link: where
// a node is (HOST:PORT), and proof of the shared secret (KAGENT_NODE_SECRET) by challenge and response.
// The secret itself never travels: the node sends a fresh nonce, the manager answers
// HMAC-SHA256(secret, nonce | its own CAF node id | wire version), and the node recomputes it for the
// node id the link says the message came from. A proof is good for one nonce, one manager process.
#include <cstdint>
#include <string>

namespace kagent {

/// The environment variable both sides read the secret from (never a flag, never logged).
inline constexpr const char* node_secret_env = "KAGENT_NODE_SECRET";

struct node_address {
  std::string host;
  uint16_t port = 0;
  std::string text() const;  ///< "host:port"
};

/// "HOST:PORT" (or "[v6]:PORT"). Throws user_error naming `what` (e.g. "--node") and the expected form.
/// `any_port`: port 0 (a listener's "any free port") is allowed.
node_address parse_node_address(const std::string& s, const std::string& what, bool any_port = false);

/// 32 random bytes, hex (OpenSSL's RAND_bytes).
std::string fresh_nonce();

/// HMAC-SHA256(secret, "kagent-node|" + nonce + "|" + client_node + "|" + wire), hex.
std::string node_proof(const std::string& secret, const std::string& nonce, const std::string& client_node,
                       int32_t wire);

/// Constant-time comparison of two proofs.
bool proofs_match(const std::string& a, const std::string& b);

/// The secret from the environment; throws user_error when it is unset or shorter than 16 bytes.
std::string node_secret_from_env();

}  // namespace kagent
