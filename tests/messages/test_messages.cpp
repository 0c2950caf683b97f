#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "messages/messages.hpp"

using namespace kagent;

namespace {
struct cfg_t : caf::actor_system_config {
  cfg_t() {
    set("scheduler.max-threads", 1);
    register_messages(*this);
  }
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

  completion cp{"req-1", true, "```python\n```", "", "", 10, 20, 0.5, 2, "gpt-5", "openai"};
  EXPECT_EQ(round_trip(sys, cp).output_tokens, 20);

  evaluate ev{"r1_c0", "code", "verify+benchmark", "/tmp/x"};
  EXPECT_EQ(round_trip(sys, ev).mode, "verify+benchmark");

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
  pr.platform = "rocm";
  pr.metrics_json = "{\"a\":1}";
  pr.wall_s = 2.5;
  auto pr2 = round_trip(sys, pr);
  EXPECT_EQ(pr2.metrics_json, "{\"a\":1}");
  EXPECT_EQ(pr2.platform, "rocm");
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
  cs.synthetic = true;
  cs.baseline_json = "{}";
  auto cs2 = round_trip(sys, cs);
  EXPECT_EQ(cs2.num_bottlenecks, 3);
  EXPECT_TRUE(cs2.synthetic);
  EXPECT_EQ(cs2.bottleneck_id, 2);
  EXPECT_EQ(cs2.parent_id, "r1_c0");

  candidate_result cr;
  cr.candidate_id = "r2_c3";
  cr.ok = true;
  cr.time_ms = 0.9;
  cr.failure_cause = "";
  cr.attempt_json = "{\"round_num\":2}";
  cr.profile_json = "{\"metrics\":{}}";
  cr.device_s = 1.5;
  auto cr2 = round_trip(sys, cr);
  EXPECT_EQ(cr2.attempt_json, "{\"round_num\":2}");
  EXPECT_EQ(cr2.profile_json, "{\"metrics\":{}}");
  EXPECT_DOUBLE_EQ(cr2.device_s, 1.5);

  analyze_parent ap{"r1_c0", "code", 1.5, 3, "/tmp/x", "gpt-5", ""};
  EXPECT_EQ(round_trip(sys, ap).num_bottlenecks, 3);
  parent_analysis pa{"r1_c0", "{\"bottlenecks\":[]}", true, 0.5, 1.0};
  auto pa2 = round_trip(sys, pa);
  EXPECT_TRUE(pa2.profile_failed);
  EXPECT_EQ(pa2.analysis_json, "{\"bottlenecks\":[]}");

  run_event e{"round_start", "{\"round\":1}"};
  EXPECT_EQ(round_trip(sys, e).type, "round_start");
}

TEST(Messages, ErrorCategoryRendersCodeAndContext) {
  cfg_t cfg;
  caf::actor_system sys{cfg};
  auto err = caf::make_error(errc::actor_failed, "boom");
  auto text = sys.render(err);
  EXPECT_NE(text.find("actor_failed"), std::string::npos) << text;
  EXPECT_NE(text.find("boom"), std::string::npos) << text;
}
