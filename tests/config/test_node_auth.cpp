// The rules a manager and a node agree on (platform/common/node_auth.hpp): addresses and the proof
// of the shared secret.
#include <gtest/gtest.h>

#include "platform/common/errors.hpp"
#include "platform/common/node_auth.hpp"

using namespace kagent;

namespace {
std::string error_of(const std::string& s, bool any_port = false) {
  try {
    parse_node_address(s, "--node", any_port);
  } catch (const user_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(NodeAddress, HostAndPortOrOneClearLine) {
  auto a = parse_node_address("gpu-node-1:7420", "--node");
  EXPECT_EQ(a.host, "gpu-node-1");
  EXPECT_EQ(a.port, 7420);
  EXPECT_EQ(a.text(), "gpu-node-1:7420");
  auto v6 = parse_node_address("[::1]:9", "--node");
  EXPECT_EQ(v6.host, "::1");
  EXPECT_EQ(v6.text(), "[::1]:9");
  EXPECT_EQ(error_of("gpu-node-1"), "--node 'gpu-node-1': no port (expected HOST:PORT, e.g. gpu-node-1:7420)");
  EXPECT_NE(error_of(":7420").find("no port"), std::string::npos) << "a leading colon names no host either";
  EXPECT_NE(error_of("h:0").find("from 1 to 65535"), std::string::npos);
  EXPECT_NE(error_of("h:65536").find("from 1 to 65535"), std::string::npos);
  EXPECT_NE(error_of("h:12x").find("from 1 to 65535"), std::string::npos);
  EXPECT_EQ(error_of("127.0.0.1:0", true), "") << "a listener may ask for any free port";
}

TEST(NodeProof, DependsOnEverythingItBindsAndOnlyTheSameProofMatches) {
  const std::string secret = "0123456789abcdef", nonce = fresh_nonce(), me = "ABCDEF#42";
  const auto p = node_proof(secret, nonce, me, 1);
  EXPECT_EQ(p.size(), 64u) << "hex of HMAC-SHA256";
  EXPECT_EQ(p, node_proof(secret, nonce, me, 1)) << "deterministic";
  EXPECT_TRUE(proofs_match(p, node_proof(secret, nonce, me, 1)));
  EXPECT_FALSE(proofs_match(p, node_proof("0123456789abcdeF", nonce, me, 1))) << "another secret";
  EXPECT_FALSE(proofs_match(p, node_proof(secret, fresh_nonce(), me, 1))) << "another nonce: no replay";
  EXPECT_FALSE(proofs_match(p, node_proof(secret, nonce, "ABCDEF#43", 1))) << "another manager process";
  EXPECT_FALSE(proofs_match(p, node_proof(secret, nonce, me, 2))) << "another wire version";
  EXPECT_FALSE(proofs_match("", "")) << "an empty proof proves nothing";
  EXPECT_NE(fresh_nonce(), fresh_nonce());
  EXPECT_EQ(fresh_nonce().size(), 64u);
}
