// Message rates of the actor layer's vocabulary (issue 13), side by side in one run:
//  - a candidate_result round trip between two actors of one process, with its attempt and reflexion
//    as typed records (today) and as JSON text that the receiver parses (the vocabulary before);
//  - the same message through CAF's binary serializer and back (what a node link would carry);
//  - fire-and-forget run_events to a sink (the manager's event stream to the reporter), with the
//    payload as the JSON object it is (today) and as text dumped by the sender and parsed by the
//    receiver (the vocabulary before).
// Run: build/benchmarks/message_rate [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <atomic>
#include <memory>
#include <thread>

#include "messages/messages.hpp"

using namespace kagent;

namespace {

using echo_json_atom = caf::atom_constant<caf::atom("echo_json")>;
using count_atom = caf::atom_constant<caf::atom("count")>;

struct cfg_t : caf::actor_system_config {
  cfg_t() {
    set("scheduler.max-threads", 2);
    set("logger.verbosity", caf::atom("quiet"));
    register_messages(*this);
  }
};

store::attempt_record an_attempt() {
  store::attempt_record a;
  a.round_num = 2;
  a.worker_id = 1;
  a.bottleneck_category = "memory";
  a.root_cause = "uncoalesced loads of A's rows: each program reads a 16 x 512 tile with a stride of K";
  a.recommended_fix = "split K across programs and reduce with atomics";
  a.config_changes = {{"BLOCK_M", "16 -> 32"}, {"BLOCK_K", "512 -> 1024"}};
  a.time_before_ms = 2.118;
  a.time_after_ms = 0.9867;
  a.improvement_pct = 53.4;
  a.is_improvement = true;
  a.memory_sol_pct = 90.7;
  a.passed_verification = true;
  return a;
}

store::reflexion_record a_reflexion() {
  store::reflexion_record r;
  r.round_num = 2;
  r.worker_id = 1;
  r.root_cause_diagnosed = "uncoalesced loads";
  r.fix_applied = "split-K";
  r.expected_outcome = "2x";
  r.actual_outcome = "2.15x";
  r.performance_delta_pct = -53.4;
  r.was_diagnosis_correct = r.was_fix_effective = true;
  r.reasoning = "the memory floor was 42 % before and 91 % after";
  r.lessons = {"split K when M is small", "keep the reduction in fp32"};
  r.try_patterns = {"split-K", "larger BLOCK_K"};
  return r;
}

candidate_result a_result() {
  candidate_result r;
  r.candidate_id = "r2_c7";
  r.parent_id = "r1_c2";
  r.round = 2;
  r.ok = true;
  r.code = std::string(3000, 'x');  // a kernel file's size
  r.time_ms = 0.9867;
  r.code_hash = std::string(64, 'a');
  r.model = "claude-opus-4-6";
  r.attempt = {an_attempt()};
  r.reflexion = {a_reflexion()};
  r.device_s = 0.7;
  r.llm_s = 41.0;
  return r;
}

caf::behavior echo(caf::event_based_actor*) {
  return {
      [](const candidate_result& r) { return r; },
      [](echo_json_atom, const candidate_result& r, const std::string& a, const std::string& x) {
        // What the manager did with the JSON fields: parse them back into records.
        auto out = r;
        out.attempt = {store::attempt_from_json(nlohmann::json::parse(a))};
        out.reflexion = {store::reflexion_from_json(nlohmann::json::parse(x))};
        return out;
      },
  };
}

void BM_RoundTripTypedRecords(benchmark::State& state) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto e = sys.spawn(echo);
  const auto msg = a_result();
  for (auto _ : state) {
    self->request(e, caf::infinite, msg).receive([](const candidate_result& r) { benchmark::DoNotOptimize(r.round); },
                                                 [](caf::error&) {});
  }
  state.SetItemsProcessed(state.iterations());
  self->send_exit(e, caf::exit_reason::user_shutdown);
}
BENCHMARK(BM_RoundTripTypedRecords)->UseRealTime();

void BM_RoundTripJsonRecords(benchmark::State& state) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto e = sys.spawn(echo);
  auto base = a_result();
  base.attempt.clear();
  base.reflexion.clear();
  for (auto _ : state) {
    // The sender serialized its records to text for every message, as the candidate did.
    const auto a = store::to_json(an_attempt()).dump();
    const auto x = store::to_json(a_reflexion()).dump();
    self->request(e, caf::infinite, echo_json_atom::value, base, a, x)
        .receive([](const candidate_result& r) { benchmark::DoNotOptimize(r.round); }, [](caf::error&) {});
  }
  state.SetItemsProcessed(state.iterations());
  self->send_exit(e, caf::exit_reason::user_shutdown);
}
BENCHMARK(BM_RoundTripJsonRecords)->UseRealTime();

void BM_BinarySerializeCandidateResult(benchmark::State& state) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  auto msg = caf::make_message(a_result());
  size_t bytes = 0;
  for (auto _ : state) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    if (auto err = sink(msg)) state.SkipWithError("serialize failed");
    caf::message back;
    caf::binary_deserializer source{sys, buf};
    if (auto err = source(back)) state.SkipWithError("deserialize failed");
    bytes = buf.size();
    benchmark::DoNotOptimize(back);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BinarySerializeCandidateResult);

nlohmann::json event_payload() {
  return nlohmann::json::parse(R"({"candidate_id":"r2_c7","ok":true,"time_ms":0.9867,"best_ms":0.9867,)"
                               R"("new_best":true,"device_s":0.7,"llm_s":41.0,"gpu_id":0,"round":2})");
}

caf::behavior sink(caf::event_based_actor*, std::shared_ptr<std::atomic<long>> n) {
  return {
      [n](const run_event&) { n->fetch_add(1, std::memory_order_relaxed); },
      [n](const std::string& type, const std::string& text) {
        auto payload = nlohmann::json::parse(text, nullptr, false);
        benchmark::DoNotOptimize(payload);
        benchmark::DoNotOptimize(type);
        n->fetch_add(1, std::memory_order_relaxed);
      },
      [n](count_atom) { return n->load(); },
  };
}

void BM_RunEventsToASink(benchmark::State& state) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto n = std::make_shared<std::atomic<long>>(0);
  auto s = sys.spawn(sink, n);
  const auto payload = event_payload();
  long sent = 0;
  for (auto _ : state) {
    if (state.range(0) == 0)
      self->send(s, run_event{event_kind::candidate_result, payload});
    else
      self->send(s, std::string{"candidate_result"}, payload.dump());
    ++sent;
  }
  // Every event is received before the clock stops: the rate is end to end.
  self->request(s, caf::infinite, count_atom::value).receive([](long) {}, [](caf::error&) {});
  while (n->load() < sent) std::this_thread::yield();
  state.SetItemsProcessed(state.iterations());
  self->send_exit(s, caf::exit_reason::user_shutdown);
}
// Arg 0: typed (event_kind + JSON object); arg 1: type and payload as text, parsed by the receiver.
BENCHMARK(BM_RunEventsToASink)->Arg(0)->Arg(1)->UseRealTime();

} // namespace

BENCHMARK_MAIN();
