#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "messages/messages.hpp"
#include "tests/support/actor_system.hpp"

using namespace kagent;

namespace {
struct cfg_t : kagent::test::actor_test_config {
  cfg_t() : actor_test_config(1) {}
};

// Serializes through CAF's binary format, both as the bare value and wrapped in a caf::message (the
// form that crosses the middleman), and reads it back.
template <class T>
T round_trip(caf::actor_system& sys, const T& in) {
  std::vector<char> buf;
  {
    caf::binary_serializer sink{sys, buf};
    T copy = in;
    auto err = sink(copy);
    EXPECT_FALSE(err) << sys.render(err);
  }
  T out;
  {
    caf::binary_deserializer source{sys, buf};
    auto err = source(out);
    EXPECT_FALSE(err) << sys.render(err);
  }
  std::vector<char> mbuf;
  {
    caf::binary_serializer sink{sys, mbuf};
    auto msg = caf::make_message(in);
    auto err = sink(msg);
    EXPECT_FALSE(err) << "message of " << typeid(T).name() << ": " << sys.render(err);
  }
  caf::message back;
  caf::binary_deserializer source{sys, mbuf};
  auto err = source(back);
  EXPECT_FALSE(err) << sys.render(err);
  EXPECT_TRUE(back.match_elements<T>());
  return out;
}
} // namespace

TEST(Messages, EveryTypeSurvivesTheBinarySerializer) {
  cfg_t cfg;
  caf::actor_system sys{cfg};

  complete c{"req-1", "optimize", "gpt-5", "sys", {{"user", "hi"}, {"assistant", "there"}}, 20000, 0.7, true, "r1_c0"};
  auto c2 = round_trip(sys, c);
  EXPECT_EQ(c2.messages.size(), 2u);
  EXPECT_EQ(c2.messages[1].content, "there");
  EXPECT_EQ(c2.max_tokens, 20000);
  EXPECT_TRUE(c2.high_effort);

  completion cp{"req-1", true, "```python\n```", "", std::nullopt, 10, 20, 0.5, 2, "gpt-5", "openai"};
  auto cp2 = round_trip(sys, cp);
  EXPECT_EQ(cp2.output_tokens, 20);
  EXPECT_FALSE(cp2.error_kind);
  completion failed_call;
  failed_call.error_kind = llm_error_kind::truncated;
  EXPECT_EQ(round_trip(sys, failed_call).error_kind, llm_error_kind::truncated);

  evaluate ev{"r1_c0", "code", device_mode::benchmark, "/tmp/x"};
  EXPECT_EQ(round_trip(sys, ev).mode, device_mode::benchmark);

  evaluation en;
  en.candidate_id = "r1_c0";
  en.verified = true;
  en.time_ms = 1.25;
  EXPECT_DOUBLE_EQ(round_trip(sys, en).time_ms, 1.25);
  evaluation unmeasured;  // not measured stays not measured across the wire
  EXPECT_FALSE(is_measured(round_trip(sys, unmeasured).time_ms));

  profile p{"r1_c0", "code", "sol", "matvec_kernel", "/tmp", "r1_c0_sol", 30.0};
  EXPECT_EQ(round_trip(sys, p).kernel_name, "matvec_kernel");
  profile_result pr;
  pr.candidate_id = "r1_c0";
  pr.available = true;
  pr.ok = true;
  pr.profile.platform = "rocm";
  pr.profile.kernel_name = "matvec_kernel";
  pr.profile.metrics = {{"a", 1.0}, {"inf", std::numeric_limits<double>::infinity()}};
  roofline_result rl;
  rl.vendor = "rocm";
  rl.memory_sol_pct = 67.5;
  rl.efficiency_pct = 67.5;
  rl.bottleneck = "memory";
  rl.details = {{"achieved_bandwidth_gbps", 3580.0}, {"nan", std::nan("")}};
  rl.notes = {"memory SOL from bytes over time"};
  pr.profile.roofline = rl;
  pr.wall_s = 2.5;
  auto pr2 = round_trip(sys, pr);
  EXPECT_EQ(pr2.profile.kernel_name, "matvec_kernel");
  EXPECT_EQ(pr2.profile.metrics, (metric_map{{"a", 1.0}})) << "a metric that is not a number was not measured";
  ASSERT_TRUE(pr2.profile.roofline);
  EXPECT_EQ(pr2.profile.roofline->memory_sol_pct, 67.5);
  EXPECT_FALSE(pr2.profile.roofline->compute_sol_pct) << "an absent SOL stays absent";
  EXPECT_EQ(pr2.profile.roofline->bottleneck, "memory");
  EXPECT_EQ(pr2.profile.roofline->details, (std::map<std::string, double>{{"achieved_bandwidth_gbps", 3580.0}}));
  EXPECT_EQ(pr2.profile.roofline->notes, rl.notes);
  EXPECT_EQ(pr2.profile.platform, "rocm");
  EXPECT_TRUE(pr2.ok);
  profiling_failed pf{1, "r1_c0", "rocm", "PMC pass 2", "timed out", "tail"};
  EXPECT_EQ(round_trip(sys, pf).invocation, "PMC pass 2");

  candidate_spec cs;
  cs.id = "r2_c3";
  cs.parent_id = "r1_c0";
  cs.round = 2;
  cs.bottleneck_id = 2;
  cs.parent_time_ms = 3.5;
  cs.num_bottlenecks = 3;
  kernel_analysis base;
  base.source = "llm";
  bottleneck b;
  b.category = "memory";
  b.root_causes = {{"strided loads", {{"dram__bytes", "64 MiB", "streamed once"}}, {{"coalesce", "one pass"}}}};
  b.recommended_fixes = {{"coalesce", "one pass"}};
  base.bottlenecks = {b};
  cs.baseline = base;
  cs.recent_attempts.resize(2);
  cs.recent_attempts[1].bottleneck_category = "compute";
  auto cs2 = round_trip(sys, cs);
  ASSERT_TRUE(cs2.baseline);
  EXPECT_EQ(cs2.baseline->source, "llm");
  EXPECT_FALSE(cs2.baseline->profile);
  ASSERT_EQ(cs2.baseline->bottlenecks.size(), 1u);
  EXPECT_EQ(to_json(cs2.baseline->bottlenecks[0]), to_json(b));
  ASSERT_EQ(cs2.recent_attempts.size(), 2u);
  EXPECT_EQ(cs2.recent_attempts[1].bottleneck_category, "compute");
  EXPECT_FALSE(round_trip(sys, candidate_spec{}).baseline) << "no analysis stays none";
  EXPECT_EQ(cs2.num_bottlenecks, 3);
  EXPECT_EQ(cs2.bottleneck_id, 2);
  EXPECT_EQ(cs2.parent_id, "r1_c0");

  candidate_result cr;
  cr.candidate_id = "r2_c3";
  cr.ok = true;
  cr.time_ms = 0.9;
  cr.failure_cause = std::nullopt;
  store::attempt_record a;
  a.round_num = 2;
  a.bottleneck_category = "memory";
  a.config_changes = {{"BLOCK", "128"}};
  a.time_before_ms = 2.0;
  a.time_after_ms = 0.9;
  a.passed_verification = true;
  cr.attempt = {a};
  store::reflexion_record r;
  r.worker_id = 1;
  r.performance_delta_pct = -55.0;
  r.lessons = {"coalesce the loads"};
  cr.reflexion = {r};
  cr.profile = pr.profile;
  cr.device_s = 1.5;
  auto cr2 = round_trip(sys, cr);
  ASSERT_EQ(cr2.attempt.size(), 1u);
  EXPECT_EQ(cr2.attempt[0].round_num, 2);
  EXPECT_EQ(cr2.attempt[0].config_changes.at("BLOCK"), "128");
  EXPECT_EQ(cr2.attempt[0].time_before_ms, 2.0);
  EXPECT_EQ(cr2.attempt[0].time_after_ms, 0.9);
  EXPECT_FALSE(cr2.attempt[0].improvement_pct) << "an unset optional stays unset";
  EXPECT_FALSE(cr2.attempt[0].program_id);
  EXPECT_TRUE(cr2.attempt[0].passed_verification);
  ASSERT_EQ(cr2.reflexion.size(), 1u);
  EXPECT_EQ(cr2.reflexion[0].worker_id, 1);
  EXPECT_EQ(cr2.reflexion[0].performance_delta_pct, -55.0);
  EXPECT_EQ(cr2.reflexion[0].lessons, std::vector<std::string>{"coalesce the loads"});
  EXPECT_FALSE(cr2.reflexion[0].program_id);
  ASSERT_TRUE(cr2.profile);
  EXPECT_EQ(nlohmann::json(*cr2.profile), nlohmann::json(pr2.profile));
  EXPECT_DOUBLE_EQ(cr2.device_s, 1.5);

  analyze_parent ap{"r1_c0", "code", 1.5, 3, "/tmp/x", "gpt-5", pr.profile};
  auto ap2 = round_trip(sys, ap);
  EXPECT_EQ(ap2.num_bottlenecks, 3);
  ASSERT_TRUE(ap2.known_profile);
  EXPECT_EQ(ap2.known_profile->kernel_name, "matvec_kernel");
  base.profile = pr2.profile;
  parent_analysis pa{"r1_c0", base, true, 0.5, 1.0};
  auto pa2 = round_trip(sys, pa);
  EXPECT_TRUE(pa2.profile_failed);
  EXPECT_EQ(to_json(pa2.analysis), to_json(base));
  dedup_answer da{"r1_c0", pr2.profile};
  EXPECT_EQ(round_trip(sys, da).profile->metrics.at("a"), 1.0);

  store::llm_call_record u;
  u.purpose = "optimize";
  u.model = "m";
  u.provider = "anthropic";
  u.tokens_in = 1200;
  u.cost_usd = 0.25;
  u.ok = false;
  u.error_kind = "timeout";
  u.latency_ms = std::numeric_limits<double>::infinity();  // never on the wire: it travels as unset
  auto u2 = round_trip(sys, u);
  EXPECT_EQ(u2.provider, "anthropic");
  EXPECT_EQ(u2.tokens_in, 1200);
  EXPECT_EQ(u2.cost_usd, 0.25);
  EXPECT_EQ(u2.error_kind, "timeout");
  EXPECT_FALSE(u2.candidate_id);
  EXPECT_FALSE(u2.latency_ms);

  run_event e{event_kind::round_start, {{"round", 1}, {"ratio", std::numeric_limits<double>::infinity()}}};
  auto e2 = round_trip(sys, e);
  EXPECT_EQ(e2.kind, event_kind::round_start);
  EXPECT_EQ(to_string(e2.kind), std::string{"round_start"});
  EXPECT_EQ(e2.payload.at("round"), 1);
  EXPECT_TRUE(e2.payload.at("ratio").is_null()) << "a non-finite number travels as null, as events.jsonl writes it";
}

TEST(Messages, ErrorCategoryRendersCodeAndContext) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  auto err = caf::make_error(errc::actor_failed, "boom");
  auto text = sys.render(err);
  EXPECT_NE(text.find("actor_failed"), std::string::npos) << text;
  EXPECT_NE(text.find("boom"), std::string::npos) << text;
}

TEST(Messages, FailureCausesAndTheRunsEndCrossAsTheirValues) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  // Every cause keeps its name in program.db and comes back from it as itself.
  for (int k = 0; k <= static_cast<int>(failure_kind::unknown); ++k) {
    const auto kind = static_cast<failure_kind>(k);
    EXPECT_EQ(parse_failure_kind(to_string(kind)), kind) << to_string(kind);
    candidate_result r;
    r.failure_cause = kind;
    EXPECT_EQ(round_trip(sys, r).failure_cause, kind) << to_string(kind);
  }
  EXPECT_FALSE(parse_failure_kind("exploded")) << "a name this version does not know is no cause";
  EXPECT_FALSE(round_trip(sys, candidate_result{}).failure_cause) << "a result without a cause stays without one";
  evaluation e;
  e.failure_cause = failure_kind::integrity;
  EXPECT_EQ(round_trip(sys, e).failure_cause, failure_kind::integrity);

  run_finished end{1, {{"success", false}, {"best_ms", nullptr}, {"failures_by_cause", {{"timeout", 2}}}}};
  const auto back = round_trip(sys, end);
  EXPECT_EQ(back.exit_code, 1);
  EXPECT_EQ(back.summary, end.summary);
}
