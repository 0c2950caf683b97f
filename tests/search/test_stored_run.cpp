// The run_state of program.db read back as values for --resume (platform/search/stored_run.hpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "platform/common/errors.hpp"
#include "platform/search/stored_run.hpp"

using namespace kagent;
namespace fs = std::filesystem;

namespace {

struct temp_db {
  fs::path dir = fs::temp_directory_path() / ("kagent_stored_run_" + std::to_string(::getpid()) + "_" +
                                              std::to_string(reinterpret_cast<uintptr_t>(this)));
  store::program_db db;
  temp_db() : db((fs::create_directories(dir), store::program_db::open(dir / "program.db"))) {}
  ~temp_db() { fs::remove_all(dir); }
};

} // namespace

TEST(StoredRun, AFreshRunHasNothingStored) {
  temp_db t;
  auto s = search::load_stored_run(t.db);
  EXPECT_LT(s.eager_ms, 0);
  EXPECT_LT(s.compile_ms, 0);
  EXPECT_EQ(s.round_done, 0);
  EXPECT_TRUE(s.sessions.empty());
  EXPECT_TRUE(s.plans.empty() && s.analyses.empty() && s.profiles.empty() && s.diverged.empty());
  EXPECT_TRUE(s.synthetic_devices.empty());
}

TEST(StoredRun, EveryKeyTheManagerWritesComesBackAsAValue) {
  temp_db t;
  kernel_profile p;
  p.kernel_name = "matvec_kernel";
  p.platform = "rocm";
  p.label = "sol";
  p.metrics = {{"duration_ms", 1.2}};
  roofline_result rl;
  rl.vendor = "rocm";
  rl.memory_sol_pct = 67.5;
  rl.efficiency_pct = 67.5;
  p.roofline = rl;
  kernel_analysis a;
  a.profile = p;
  a.bottlenecks = {bottleneck_from_json({{"category", "memory"}, {"summary", "wider tiles"}})};
  a.source = "llm";
  t.db.set_state_json(store::state_key::eager_ms, 2.5);
  t.db.set_state_json(store::state_key::compile_ms, nullptr);  // not measured
  t.db.set_state(store::state_key::round_done, "2");
  t.db.set_state_json(store::state_key::sessions, nlohmann::json::array({{{"wall_s", 10.0}}}));
  t.db.set_state_json(store::state_key::diverged, {"r2_c1"});
  t.db.set_state_json(store::state_key::analysis_mode, {{"0", "profiled"}, {"3", "synthetic"}});
  t.db.set_state(std::string{store::state_key::analysis_prefix} + "r1_c0", to_json(a).dump());
  t.db.set_state(std::string{store::state_key::profile_prefix} + "r1_c0", nlohmann::json(p).dump());
  t.db.set_state(std::string{store::state_key::spec_prefix} + "r3_c0", R"({"id": "r3_c0"})");

  auto s = search::load_stored_run(t.db);
  EXPECT_EQ(s.eager_ms, 2.5);
  EXPECT_LT(s.compile_ms, 0);
  EXPECT_EQ(s.round_done, 2);
  EXPECT_EQ(s.sessions.size(), 1u);
  EXPECT_EQ(s.diverged, std::set<std::string>{"r2_c1"});
  EXPECT_EQ(s.synthetic_devices, std::set<int>{3});
  ASSERT_EQ(s.analyses.count("r1_c0"), 1u);
  EXPECT_EQ(to_json(s.analyses.at("r1_c0")), to_json(a));
  ASSERT_EQ(s.profiles.count("r1_c0"), 1u);
  EXPECT_EQ(nlohmann::json(s.profiles.at("r1_c0")), nlohmann::json(p));
  ASSERT_EQ(s.plans.count("r3_c0"), 1u);
  EXPECT_EQ(s.plans.at("r3_c0").at("id"), "r3_c0");
}

TEST(StoredRun, AnUnreadableValueIsLeftOutButAWrongRoundIsAnError) {
  temp_db t;
  t.db.set_state(std::string{store::state_key::analysis_prefix} + "a", "{not json");
  t.db.set_state(std::string{store::state_key::profile_prefix} + "b", R"({"metrics": {"k1": {"nested": 1}}})");
  t.db.set_state(std::string{store::state_key::spec_prefix} + "c", "[1, 2]");
  auto s = search::load_stored_run(t.db);
  EXPECT_TRUE(s.analyses.empty());
  EXPECT_TRUE(s.profiles.empty()) << "a profile keyed by kernel name is never unwrapped";
  EXPECT_TRUE(s.plans.empty());
  t.db.set_state(store::state_key::round_done, "2x");
  try {
    search::load_stored_run(t.db);
    FAIL() << "a round_done that is not an integer must not be guessed";
  } catch (const run_error& e) {
    EXPECT_NE(std::string(e.what()).find("'round_done' is not an integer: '2x'"), std::string::npos) << e.what();
  }
}

TEST(StoredRun, NodeDeviceIdsOfANewSessionComeAfterEveryEarlierOne) {
  temp_db t;
  EXPECT_EQ(search::first_node_device_id(t.db), 100) << "a run whose nodes never had a device";
  t.db.set_state("device_labels", R"({"100": "nodeA/gpu0", "104": "nodeB/gpu1", "x": "junk", "-3": "junk"})");
  EXPECT_EQ(search::first_node_device_id(t.db), 105);
  t.db.set_state("device_labels", "not json");
  EXPECT_EQ(search::first_node_device_id(t.db), 100) << "an unreadable state names no id";
}
