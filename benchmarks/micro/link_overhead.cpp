// What a node link adds to a candidate (issue 16), side by side in one run: the device protocol's
// evaluate -> evaluation round trip with a candidate's payload (its kernel code out; the evaluation and
// the files its work wrote back) to an actor that answers at once,
//   - in the same process (a local device),
//   - across a loopback link of CAF's middleman with the openssl module (TLS), the link a run uses,
//   - across a plain middleman link (no TLS), to show what the encryption costs.
// The argument is the bytes of files sent back per reply (a verification's logs: a few KiB; a
// profile's CSV and records: up to a few hundred KiB). A candidate's device work crosses the link as
// 2 round trips (verify, benchmark), 3 under `profile: every`.
// Run: build/benchmarks/link_overhead [--benchmark_min_time=1]
#include <benchmark/benchmark.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include <memory>
#include <stdexcept>
#include <string>

#include "actors/node_link.hpp"
#include "messages/messages.hpp"

using namespace kagent;

namespace {

/// A device that answers every evaluate at once with `reply_bytes` of files.
device_actor_type::behavior_type instant_device(device_actor_type::pointer, size_t reply_bytes) {
  return {
      [reply_bytes](const evaluate& e) {
        evaluation r;
        r.candidate_id = e.candidate_id;
        r.verified = true;
        r.time_ms = 0.9867;
        if (reply_bytes > 0) r.artifacts.push_back({"verify.log", std::string(reply_bytes, 'v')});
        return r;
      },
      [](const profile& p) {
        profile_result r;
        r.candidate_id = p.candidate_id;
        return r;
      },
      [](const profile_batch& b) { return std::vector<profile_result>(b.items.size()); },
      [](cancel_atom, const std::string&) {},
  };
}

evaluate a_candidate() {
  evaluate e;
  e.candidate_id = "r2_c3";
  e.mode = device_mode::verify;
  e.work_dir = "candidates/r2_c3";
  // A kernel of typical size (the example kernels are 2-5 KiB).
  e.code = "import torch\nimport triton\nimport triton.language as tl\n\n";
  while (e.code.size() < 4096) e.code += "# tile loop, masks, accumulate in fp32, store bf16\n";
  return e;
}

struct two_systems {
  link_system_config server_cfg{{}};
  link_system_config client_cfg{{}};
  std::unique_ptr<caf::actor_system> server, client;
  device_actor_type dev, remote;
  two_systems(size_t reply_bytes, bool tls) {
    server = std::make_unique<caf::actor_system>(server_cfg);
    client = std::make_unique<caf::actor_system>(client_cfg);
    dev = server->spawn(instant_device, reply_bytes);
    if (tls) {
      auto port = caf::openssl::publish(dev, 0, "127.0.0.1");
      if (!port) throw std::runtime_error(server->render(port.error()));
      auto r = caf::openssl::remote_actor<device_actor_type>(*client, "127.0.0.1", *port);
      if (!r) throw std::runtime_error(client->render(r.error()));
      remote = *r;
    } else {
      auto port = server->middleman().publish(dev, 0, "127.0.0.1");
      if (!port) throw std::runtime_error(server->render(port.error()));
      auto r = client->middleman().remote_actor<device_actor_type>("127.0.0.1", *port);
      if (!r) throw std::runtime_error(client->render(r.error()));
      remote = *r;
    }
  }
  // A published actor lives until told to end, and an actor system waits for its actors.
  ~two_systems() {
    remote = nullptr;
    caf::anon_send_exit(dev, caf::exit_reason::user_shutdown);
    dev = nullptr;
    client.reset();
    server.reset();
  }
};

void round_trips(benchmark::State& state, caf::actor_system& sys, const device_actor_type& dev) {
  caf::scoped_actor self{sys};
  const auto e = a_candidate();
  for (auto _ : state) {
    self->request(dev, caf::infinite, e)
        .receive([](const evaluation& r) { benchmark::DoNotOptimize(r.time_ms); },
                 [&](caf::error& err) { state.SkipWithError(sys.render(err).c_str()); });
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(e.code.size() + static_cast<size_t>(state.range(0))));
}

void BM_LocalDevice(benchmark::State& state) {
  link_system_config cfg{{}};
  caf::actor_system sys{cfg};
  auto dev = sys.spawn(instant_device, static_cast<size_t>(state.range(0)));
  round_trips(state, sys, dev);
}
BENCHMARK(BM_LocalDevice)->Arg(0)->Arg(16 << 10)->Arg(256 << 10)->UseRealTime();

void BM_AcrossTlsLink(benchmark::State& state) {
  two_systems link(static_cast<size_t>(state.range(0)), true);
  round_trips(state, *link.client, link.remote);
}
BENCHMARK(BM_AcrossTlsLink)->Arg(0)->Arg(16 << 10)->Arg(256 << 10)->UseRealTime();

void BM_AcrossPlainLink(benchmark::State& state) {
  two_systems link(static_cast<size_t>(state.range(0)), false);
  round_trips(state, *link.client, link.remote);
}
BENCHMARK(BM_AcrossPlainLink)->Arg(0)->Arg(16 << 10)->Arg(256 << 10)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
