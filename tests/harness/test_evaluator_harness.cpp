// evaluator_client driving the real harness/evaluator.py on the CPU platform (Triton interpreter,
// small shapes). Needs an interpreter with torch and triton (KAGENT_PYTHON); skipped without one.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "platform/process/evaluator_client.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using kagent::evaluator_client;
using kagent::evaluator_failure;

namespace {

const fs::path root = KAGENT_SOURCE_DIR;
const fs::path matvec = root / "examples" / "optimize_01_matvec";

bool harness_python_usable() {
  static const bool usable = [] {
    std::string cmd = std::string("'") + KAGENT_PYTHON + "' -c 'import torch, triton' >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }();
  return usable;
}

bool group_gone(pid_t pgid) {
  for (int i = 0; i < 200; ++i) {
    bool any = false;
    for (const auto& e : fs::directory_iterator("/proc")) {
      std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(e.path() / "stat");
      std::string stat((std::istreambuf_iterator<char>(in)), {});
      auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      long ppid = 0, pgrp = 0;
      rest >> state >> ppid >> pgrp;
      any = any || (pgrp == pgid && state != 'Z' && state != 'X');
    }
    if (!any) return true;
    std::this_thread::sleep_for(25ms);
  }
  return false;
}

class EvaluatorHarness : public ::testing::Test {
protected:
  void SetUp() override {
    if (!harness_python_usable())
      GTEST_SKIP() << KAGENT_PYTHON << " cannot import torch and triton (configure -DKAGENT_PYTHON=...)";
    char tmpl[] = "/tmp/kagent-harness-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    kagent::evaluator_options o;
    o.python = KAGENT_PYTHON;
    o.script = (root / "harness" / "evaluator.py").string();
    o.env = kagent::scrub_env(kagent::current_environment(), kagent::default_secret_patterns());
    o.env["TRITON_INTERPRET"] = "1";
    o.cwd = dir_.string();
    client_ = std::make_unique<evaluator_client>(o);
  }
  void TearDown() override {
    client_.reset();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  kagent::evaluator_reply load() {
    return client_->request({{"op", "load_problem"}, {"problem", matvec.string()}, {"device", "cpu"},
                             {"dtype", "bfloat16"}, {"size", "small"}},
                            120s);
  }
  kagent::evaluator_reply verify_code(const std::string& code, std::chrono::milliseconds timeout = 120s) {
    return client_->request({{"op", "verify"}, {"code", code}, {"workdir", dir_.string()}}, timeout);
  }
  kagent::evaluator_reply verify_start_kernel() {
    return client_->request({{"op", "verify"}, {"path", (matvec / "input.py").string()}}, 120s);
  }

  fs::path dir_;
  std::unique_ptr<evaluator_client> client_;
};

TEST_F(EvaluatorHarness, PingVerifyTheMatvecStartingKernelOnCpuAndLeaveNothingBehind) {
  auto p = client_->ping();
  ASSERT_TRUE(p.ok()) << p.message << p.stderr_tail;
  auto l = load();
  ASSERT_TRUE(l.ok()) << l.error() << l.stderr_tail;
  EXPECT_EQ(l.body["result"]["device"], "cpu");
  auto v = verify_start_kernel();
  ASSERT_TRUE(v.ok()) << v.error() << v.stderr_tail;
  EXPECT_TRUE(v.body["result"]["passed"].get<bool>());
  // PyTorch doing the work (no Triton launch) is a cheat, seen before the values are compared.
  auto w = verify_code("def kernel_function(A, B):\n    return A[:, :1] * 0\n");
  EXPECT_EQ(w.failure, evaluator_failure::none);
  EXPECT_FALSE(w.ok());
  EXPECT_EQ(w.body["kind"], "integrity");
  EXPECT_EQ(w.error().rfind("integrity: torch compute op aten::", 0), 0u) << w.error();
  auto b = client_->request({{"op", "verify"}, {"code", "import torch\ndef kernel_function(A, B):\n    return torch.mm(A, B)\n"}}, 60s);
  EXPECT_EQ(b.error().rfind("Disallowed PyTorch usage detected: ", 0), 0u) << b.error();
  EXPECT_EQ(client_->starts(), 1);

  // Destroying the client leaves nothing of the server's process group behind.
  pid_t pid = client_->pid();
  client_.reset();
  EXPECT_TRUE(group_gone(pid));
}

TEST_F(EvaluatorHarness, HangingCandidateIsKilledAndTheServerRestartedWithItsProblem) {
  ASSERT_TRUE(load().ok());
  pid_t first = client_->pid();
  auto h = verify_code("def kernel_function(A, B):\n    while True:\n        pass\n", 3s);
  EXPECT_EQ(h.failure, evaluator_failure::timeout) << h.message;
  EXPECT_TRUE(group_gone(first));
  auto v = verify_start_kernel();  // no load_problem from us: the client replays it
  ASSERT_TRUE(v.ok()) << v.error() << v.stderr_tail;
  EXPECT_EQ(client_->starts(), 2);
}

TEST_F(EvaluatorHarness, CrashingCandidatesFailAloneAndTheNextRequestSucceeds) {
  // A candidate runs in a worker process of its own: its crash ends that process only, the server
  // (the judge) lives on and says how the candidate died.
  ASSERT_TRUE(load().ok());
  const pid_t server = client_->pid();
  auto s = verify_code("import ctypes\ndef kernel_function(A, B):\n    return ctypes.string_at(0)\n");
  EXPECT_EQ(s.failure, evaluator_failure::none) << s.message;
  EXPECT_EQ(s.body["kind"], "crashed");
  EXPECT_NE(s.error().find("signal 11"), std::string::npos) << s.error();
  EXPECT_NE(s.body.value("stderr", "").find("Segmentation fault"), std::string::npos) << s.body.dump();
  ASSERT_TRUE(verify_start_kernel().ok());

  auto a = verify_code("import os\ndef kernel_function(A, B):\n    os.abort()\n");
  EXPECT_EQ(a.body["kind"], "crashed");
  EXPECT_NE(a.error().find("signal 6"), std::string::npos) << a.error();

  auto e = verify_code("def kernel_function(A, B):\n    raise RuntimeError('plain failure')\n");
  EXPECT_EQ(e.failure, evaluator_failure::none);
  EXPECT_EQ(e.body["kind"], "candidate_error");
  ASSERT_TRUE(verify_start_kernel().ok());
  EXPECT_EQ(client_->pid(), server);
  EXPECT_EQ(client_->starts(), 1);
}

} // namespace
