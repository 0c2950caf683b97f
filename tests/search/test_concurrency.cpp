// num_workers: auto — the rule that sizes the pipelines in flight, values in, values out.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "platform/search/concurrency.hpp"

using kagent::search::concurrency_limits;
using kagent::search::concurrency_meter;
using kagent::search::pipelines_for;

TEST(Concurrency, ASlowLlmNeedsEnoughPipelinesToKeepTheDeviceFed) {
  // 20 s LLM, 0.75 s on the device: (20 + 0.75) / 0.75 = 27.7 per device, + 1 waiting.
  EXPECT_EQ(pipelines_for(20.0, 0.75, {1, 4, 64}), 29);
  // Two devices need twice as many.
  EXPECT_EQ(pipelines_for(20.0, 0.75, {2, 4, 64}), 58);
  // A device-bound run (instant LLM) keeps the old default: more would only plan from a stale beam.
  EXPECT_EQ(pipelines_for(0.01, 0.75, {1, 4, 64}), 4);
  EXPECT_EQ(pipelines_for(0.0, 10.0, {8, 4, 64}), 16);  // 8 busy + 8 waiting
}

TEST(Concurrency, BoundedByTheCapAndUnmeasuredIsTheFloor) {
  EXPECT_EQ(pipelines_for(120.0, 0.2, {4, 4, 64}), 64);
  EXPECT_EQ(pipelines_for(120.0, 0.2, {1, 4, 3}), 4);  // a cap below the floor: the floor
  EXPECT_EQ(pipelines_for(20.0, 0.0, {1, 4, 64}), 4);
  EXPECT_EQ(pipelines_for(20.0, -1.0, {1, 4, 64}), 4);
  EXPECT_EQ(pipelines_for(std::numeric_limits<double>::infinity(), 1.0, {1, 4, 64}), 4);
}

TEST(Concurrency, TheMeterUsesMediansOfTheLastCandidates) {
  concurrency_meter m({1, 4, 64}, /*window=*/4, /*min_samples=*/2);
  EXPECT_EQ(m.suggest(), 4);
  EXPECT_NE(m.reason().find("not yet measured"), std::string::npos);
  m.record(20.0, 0.75);
  EXPECT_EQ(m.suggest(), 4);  // one sample is not a measurement
  m.record(20.0, 0.75);
  EXPECT_EQ(m.suggest(), 29);
  EXPECT_NE(m.reason().find("LLM 20.0 s, device 0.75 s"), std::string::npos) << m.reason();
  // Candidates that never reached a device say nothing about device time.
  m.record(20.0, 0.0);
  m.record(-1.0, 0.5);
  EXPECT_EQ(m.samples(), 2u);
  // An outlier does not move a median; the window forgets old samples.
  m.record(600.0, 0.75);
  EXPECT_EQ(m.suggest(), 29);
  for (int i = 0; i < 4; ++i) m.record(1.0, 1.0);
  EXPECT_EQ(m.samples(), 4u);
  EXPECT_EQ(m.suggest(), 4);
}

TEST(Concurrency, SmallSwingsDoNotResizeThePipelines) {
  concurrency_meter m({1, 4, 64}, 16, 2);
  m.record(30.0, 12.0);
  m.record(30.0, 12.0);
  EXPECT_EQ(m.suggest(), 5);   // ceil(42 / 12) + 1
  EXPECT_EQ(m.next(4), 4);     // one more is not worth an event
  EXPECT_EQ(m.next(29), 5);    // a real change is taken at once
  concurrency_meter slow({1, 4, 64}, 16, 2);
  slow.record(20.0, 0.75);
  slow.record(20.0, 0.75);
  EXPECT_EQ(slow.next(4), 29);
  EXPECT_EQ(slow.next(27), 27);  // within a quarter
}

TEST(Concurrency, CandidatesInTwoClustersDoNotFlipThePipelines) {
  // 20 s replies twice per candidate; device seconds in two clusters, 0.74 s (a) and 1.04 s (b): an
  // H100 run's `auto` went 41, 57, 41, 57 within 6 s. In this order (drawn at random, then fixed) a
  // median of the last 16 jumps between the clusters three times once the window is full (41 and 57
  // pipelines); the middle half's mean never moves far enough to resize.
  const std::string order = "aabaabaababaaaaaabbbaaabaaabbbbbaababbaa";
  concurrency_meter m({1, 4, 64}, 16, 2);
  int current = 4, changes = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    m.record(40.0, order[i] == 'a' ? 0.74 : 1.04);
    const int n = m.next(current);
    if (i >= 16 && n != current) ++changes;
    current = n;
  }
  EXPECT_EQ(changes, 0) << "now " << current << ": " << m.reason();
}

TEST(Concurrency, AFirstEstimateSizesTheStartUntilCandidatesAreMeasured) {
  concurrency_meter m({1, 4, 64}, 16, 2);
  // What the starting kernel showed: a 10 s analysis reply (two such per candidate) and 0.5 s on the device.
  m.prime(20.0, 0.5);
  EXPECT_TRUE(m.primed());
  EXPECT_EQ(m.suggest(), 42);  // ceil(20.5 / 0.5) + 1
  EXPECT_EQ(m.next(4), 42);
  EXPECT_NE(m.reason().find("first estimate from the starting kernel: LLM 20.0 s, device 0.50 s"), std::string::npos)
      << m.reason();
  // One measured candidate is not yet a measurement: the estimate holds.
  m.record(8.0, 2.0);
  EXPECT_EQ(m.suggest(), 42);
  // Two are, and they replace it.
  m.record(8.0, 2.0);
  EXPECT_EQ(m.suggest(), 6);  // ceil(10 / 2) + 1
  EXPECT_NE(m.reason().find("LLM 8.0 s, device 2.00 s"), std::string::npos) << m.reason();
}

TEST(Concurrency, AnUnusableFirstEstimateLeavesTheFloor) {
  concurrency_meter m({1, 4, 64}, 16, 2);
  m.prime(20.0, 0.0);
  m.prime(-1.0, 0.5);
  m.prime(std::numeric_limits<double>::quiet_NaN(), 0.5);
  EXPECT_FALSE(m.primed());
  EXPECT_EQ(m.suggest(), 4);
  EXPECT_NE(m.reason().find("not yet measured"), std::string::npos);
  // Bounded like any measurement.
  m.prime(600.0, 0.01);
  EXPECT_EQ(m.suggest(), 64);
}
