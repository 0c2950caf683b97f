// Matched replay files: replies chosen by what the request contains, not by the order of the calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "platform/common/errors.hpp"
#include "platform/llm/replay.hpp"

using namespace kagent;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  explicit temp_dir(const std::string& tag) {
    path = fs::temp_directory_path() / ("kagent_replay_match_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

llm_request req(const std::string& purpose, const std::string& prompt, const std::string& system = "") {
  llm_request r;
  r.purpose = purpose;
  r.system = system;
  r.messages = {{"user", prompt}};
  return r;
}

std::string block(const std::vector<std::string>& match) {
  std::string s = "<!-- replay\n";
  for (auto& m : match) s += "match: " + m + "\n";
  return s + "-->\n";
}

std::string exhausted_message(replay_provider& p, const llm_request& r) {
  try {
    p.complete(r);
  } catch (const llm_error& e) {
    EXPECT_EQ(e.kind(), llm_error_kind::replay_exhausted);
    return e.what();
  }
  ADD_FAILURE() << "no error for purpose " << r.purpose;
  return "";
}

}  // namespace

TEST(ReplayMatch, EveryMatchStringMustOccurAndTheBlockIsNotServed) {
  temp_dir d("basic");
  d.write("optimize_001.md", block({"# variant: v1", "direction 2"}) + "reply v1/2");
  d.write("optimize_002.md", block({"# variant: v1"}) + "reply v1 default");
  d.write("optimize_003.md", block({"# variant: v2"}) + "reply v2\n");
  replay_provider p(d.path.string());
  EXPECT_EQ(p.complete(req("optimize", "kernel:\n# variant: v2\n")).text, "reply v2\n");
  // Both v1 files match the first request; the lower number wins. Only the second matches the other.
  EXPECT_EQ(p.complete(req("optimize", "# variant: v1 ... work on direction 2")).text, "reply v1/2");
  EXPECT_EQ(p.complete(req("optimize", "# variant: v1 ... work on direction 1")).text, "reply v1 default");
  // Never used up: the same request gets the same reply again, as often as it is asked.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.complete(req("optimize", "# variant: v2")).text, "reply v2\n");
  EXPECT_EQ(p.served("optimize"), 6);
}

TEST(ReplayMatch, StringsAreSearchedInTheSystemPromptAndEachMessageButNotAcrossThem) {
  temp_dir d("where");
  d.write("refine_001.md", block({"ALPHA", "BETA"}) + "both");
  replay_provider p(d.path.string());
  EXPECT_EQ(p.complete(req("refine", "has BETA", "system says ALPHA")).text, "both");
  llm_request conv = req("refine", "first ALPHA");
  conv.messages.push_back({"assistant", "no code"});
  conv.messages.push_back({"user", "then BETA"});
  EXPECT_EQ(p.complete(conv).text, "both");
  llm_request split = req("refine", "ends with AL");
  split.messages.push_back({"user", "PHA BETA"});  // "ALPHA" only across two messages
  auto msg = exhausted_message(p, split);
  EXPECT_NE(msg.find("no matched file matches"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refine_001.md lacks 'ALPHA'"), std::string::npos) << msg;
}

TEST(ReplayMatch, UnmatchedFilesServeInOrderOnlyWhatNoMatchedFileMatches) {
  temp_dir d("mixed");
  d.write("bottleneck_001.md", block({"root kernel"}) + "root analysis");
  d.write("bottleneck_002.md", "first in order");
  d.write("bottleneck_003.md", "second in order");
  replay_provider p(d.path.string());
  EXPECT_EQ(p.complete(req("bottleneck", "something else")).text, "first in order");
  EXPECT_EQ(p.complete(req("bottleneck", "the root kernel")).text, "root analysis");
  EXPECT_EQ(p.complete(req("bottleneck", "another")).text, "second in order");
  EXPECT_EQ(p.complete(req("bottleneck", "the root kernel")).text, "root analysis");
  auto msg = exhausted_message(p, req("bottleneck", "a third"));
  EXPECT_NE(msg.find("no matched file matches it (bottleneck_001.md lacks 'root kernel')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("all 2 unmatched replies for purpose 'bottleneck' are used"), std::string::npos) << msg;
  // Cycling starts the in-order files over; matched files are unaffected.
  replay_provider cyc(d.path.string(), {true, false});
  for (int i = 0; i < 3; ++i) cyc.complete(req("bottleneck", "x"));
  EXPECT_EQ(cyc.complete(req("bottleneck", "x")).text, "second in order");
}

TEST(ReplayMatch, OnlyMatchedFilesAndNoMatchIsExhaustedWithTheReason) {
  temp_dir d("nomatch");
  d.write("optimize_010.md", block({"# variant: a", "summary A"}) + "x");
  d.write("optimize_020.md", block({"# variant: b"}) + "y");
  replay_provider p(d.path.string());
  auto msg = exhausted_message(p, req("optimize", "# variant: a without the summary"));
  EXPECT_NE(msg.find("no matched file matches it"), std::string::npos) << msg;
  EXPECT_NE(msg.find("optimize_010.md lacks 'summary A'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("optimize_020.md lacks '# variant: b'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("there is no unmatched reply for purpose 'optimize'"), std::string::npos) << msg;
  EXPECT_EQ(p.served("optimize"), 0);
}

TEST(ReplayMatch, ABlockWithoutMatchLinesAnswersEveryRequestOfItsPurpose) {
  temp_dir d("catchall");
  d.write("reflexion_001.md", "<!-- replay\n# a generic reflexion for every attempt\n-->\n{\"lessons\": []}\n");
  d.write("reflexion_002.md", "never reached: 001 matches first");
  replay_provider p(d.path.string());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.complete(req("reflexion", "attempt " + std::to_string(i))).text, "{\"lessons\": []}\n");
}

TEST(ReplayMatch, AnyFilesCanBeMatchedToo) {
  temp_dir d("any");
  d.write("any_001.md", block({"refine me"}) + "fixed");
  d.write("any_002.md", "fallback");
  d.write("optimize_001.md", "own file");
  replay_provider p(d.path.string());
  EXPECT_EQ(p.complete(req("refine", "please refine me")).text, "fixed");
  EXPECT_EQ(p.complete(req("reflexion", "other")).text, "fallback");
  EXPECT_EQ(p.complete(req("reflexion", "refine me again")).text, "fixed");
  // A purpose with files of its own never falls back to any_ files.
  EXPECT_EQ(p.complete(req("optimize", "refine me")).text, "own file");
}

TEST(ReplayMatch, TheReplyDoesNotDependOnTheOrderOrTheThreadOfTheCalls) {
  temp_dir d("order");
  const int n = 8;
  for (int i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "optimize_%03d.md", i + 1);
    d.write(name, block({"parent p" + std::to_string(i) + ";", "dir " + std::to_string(i % 2)}) + "child of " +
                      std::to_string(i));
  }
  auto prompt = [](int i) { return "parent p" + std::to_string(i) + "; dir " + std::to_string(i % 2); };
  std::vector<int> order(n * 4);
  for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int>(k % n);
  std::mt19937 rng(7);
  for (int run = 0; run < 3; ++run) {  // a fresh provider each time: a resumed run starts with new counters
    replay_provider p(d.path.string());
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> got(order.size());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (size_t k = static_cast<size_t>(t); k < order.size(); k += 4)
          got[k] = p.complete(req("optimize", prompt(order[k]))).text;
      });
    for (auto& th : threads) th.join();
    for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(got[k], "child of " + std::to_string(order[k])) << k;
    EXPECT_EQ(p.served("optimize"), static_cast<int>(order.size()));
  }
}

TEST(ReplayMatch, JsonRecordingsMatchThroughATopLevelArray) {
  temp_dir d("json");
  d.write("optimize_001.json", R"({"match": ["flaky endpoint"], "error": {"kind": "overloaded", "message": "busy", "http_status": 529}})");
  d.write("optimize_002.json", R"({"match": ["kernel"], "response": {"text": "from json", "output_tokens": 7}})");
  d.write("optimize_003.json", R"({"response": {"text": "in order"}})");
  replay_provider p(d.path.string());
  for (int i = 0; i < 2; ++i) {
    try {
      p.complete(req("optimize", "flaky endpoint, kernel"));
      FAIL();
    } catch (const llm_error& e) {
      EXPECT_EQ(e.kind(), llm_error_kind::overloaded);
    }
  }
  auto r = p.complete(req("optimize", "a kernel"));
  EXPECT_EQ(r.text, "from json");
  EXPECT_EQ(r.output_tokens, 7);
  EXPECT_EQ(p.complete(req("optimize", "other")).text, "in order");
}

TEST(ReplayMatch, CrlfBlocksAndLookalikesAreReadAsIntended) {
  temp_dir d("crlf");
  d.write("optimize_001.md", "<!-- replay\r\nmatch: needle\r\n-->\r\nbody\r\n");
  d.write("optimize_002.md", "<!-- replayed from a log -->\nplain text");
  d.write("optimize_003.md", "  <!-- replay\nmatch: x\n-->\nleading spaces: not a block");
  replay_provider p(d.path.string());
  EXPECT_EQ(p.complete(req("optimize", "a needle")).text, "body\r\n");
  EXPECT_EQ(p.complete(req("optimize", "none")).text, "<!-- replayed from a log -->\nplain text");
  EXPECT_EQ(p.complete(req("optimize", "none")).text, "  <!-- replay\nmatch: x\n-->\nleading spaces: not a block");
}

TEST(ReplayMatch, MalformedBlocksAreUserErrorsNamingTheFile) {
  struct bad_case {
    std::string name, text, expect;
  };
  std::vector<bad_case> cases = {
      {"optimize_001.md", "<!-- replay\nmatch: x\n", "never closed"},
      {"optimize_001.md", "<!-- replay\nmach: x\n-->\n", "unknown front-matter line 'mach: x'"},
      {"optimize_001.md", "<!-- replay\nmatch:   \n-->\n", "'match:' needs the literal text"},
      {"optimize_001.md", "<!-- replay match: x -->\nbody", "must be '<!-- replay' alone"},
      {"optimize_001.json", R"({"match": "x", "response": {"text": "t"}})", "must be an array of strings"},
      {"optimize_001.json", R"({"match": [""], "response": {"text": "t"}})", "non-empty strings"},
  };
  for (auto& c : cases) {
    temp_dir d("bad");
    d.write(c.name, c.text);
    try {
      replay_provider p(d.path.string());
      ADD_FAILURE() << "accepted: " << c.text;
    } catch (const user_error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
    }
  }
  // Two files with the same purpose and number stay an error, matched or not.
  temp_dir d("dupnum");
  d.write("optimize_1.md", block({"a"}) + "x");
  d.write("optimize_001.md", "y");
  EXPECT_THROW(replay_provider(d.path.string()), user_error);
}

TEST(ReplayMatch, FrontMatterParserReportsTheBodyOffset) {
  auto fm = parse_replay_front_matter("<!-- replay\n# note\n\nmatch:  spaced text  \nmatch: # variant: x\n-->\nBODY", "f");
  ASSERT_TRUE(fm.present);
  EXPECT_EQ(fm.match, (std::vector<std::string>{"spaced text", "# variant: x"}));
  EXPECT_EQ(std::string("<!-- replay\n# note\n\nmatch:  spaced text  \nmatch: # variant: x\n-->\nBODY").substr(fm.body_offset),
            "BODY");
  auto none = parse_replay_front_matter("plain reply", "f");
  EXPECT_FALSE(none.present);
  EXPECT_EQ(none.body_offset, 0u);
}

// ---- the example replay sets (examples/*/replay): the lineage tree their READMEs describe --------

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string python_block(const std::string& reply) {
  auto b = reply.find("```python\n");
  if (b == std::string::npos) return "";
  b += 10;
  return reply.substr(b, reply.find("```", b) - b);
}

std::string marker(const std::string& code) {
  auto p = code.find("# variant: ");
  if (p == std::string::npos) return "root";
  p += 11;
  return code.substr(p, code.find_first_of(" \n", p) - p);
}

// What the search sends, reduced to what the sets match on: the parent's full source, the chosen
// direction's category, summary and first fix.
struct pipeline {
  replay_provider p;
  explicit pipeline(const std::string& dir) : p(dir) {}

  nlohmann::json bottlenecks(const std::string& code) {
    auto r = p.complete(req("bottleneck", "Identify 2 bottlenecks of this kernel.\n```python\n" + code + "```\n"));
    return nlohmann::json::parse(r.text);
  }

  std::string child(const std::string& code, int direction, bool* followed_up = nullptr) {
    auto b = bottlenecks(code).at(static_cast<size_t>(direction - 1));
    std::string prompt = "CURRENT KERNEL\n```python\n" + code + "```\nBOTTLENECK ANALYSIS\nCategory: " +
                         b.at("category").get<std::string>() + "\nSummary: " + b.at("summary").get<std::string>() +
                         "\nFix: " + b.at("root_causes").at(0).at("fixes").at(0).at("fix").get<std::string>() + "\n";
    auto first = p.complete(req("optimize", prompt)).text;
    if (followed_up) *followed_up = false;
    if (!python_block(first).empty()) return python_block(first);
    llm_request f = req("optimize_followup", prompt);
    f.messages.push_back({"assistant", first});
    f.messages.push_back({"user", "Your reply could not be used: the reply contains no code block."});
    if (followed_up) *followed_up = true;
    return python_block(p.complete(f).text);
  }
};

void check_example(const std::string& example, const std::string& tag) {
  const fs::path dir = fs::path(KAGENT_SOURCE_DIR) / "examples" / example;
  pipeline pl((dir / "replay").string());
  const std::string root = slurp(dir / "input.py");
  auto v = [&](int n) { return tag + "-v" + std::to_string(n); };

  // Every parent's analysis: a JSON array of two directions with different summaries.
  for (auto& d : pl.bottlenecks(root)) EXPECT_TRUE(d.at("summary").is_string());
  EXPECT_NE(pl.bottlenecks(root)[0]["summary"], pl.bottlenecks(root)[1]["summary"]);

  bool followed = false;
  const std::string v1 = pl.child(root, 1, &followed);
  EXPECT_EQ(marker(v1), v(1));
  EXPECT_FALSE(followed);
  const std::string v1_again = pl.child(root, 2, &followed);
  EXPECT_TRUE(followed) << "direction 2 of the root answers without code first";
  EXPECT_EQ(marker(v1_again), v(1));
  EXPECT_NE(v1_again, v1) << "the duplicate differs in comments and layout only";

  const std::string v3 = pl.child(v1, 1), v4 = pl.child(v1, 2);
  EXPECT_EQ(marker(v3), v(3));
  EXPECT_EQ(marker(v4), v(4));
  EXPECT_EQ(pl.child(v1_again, 1), v3) << "the duplicate has the same replies as the original";
  EXPECT_EQ(pl.child(v3, 2), v3);
  const std::string v5 = pl.child(v3, 1);
  EXPECT_EQ(marker(v5), v(5));
  EXPECT_EQ(pl.child(v5, 1), v3);
  EXPECT_EQ(pl.child(v5, 2), v3);
  for (int round = 0; round < 2; ++round) {  // a resumed run (new provider) gets the same tree
    pipeline again((dir / "replay").string());
    EXPECT_EQ(again.child(v1, 2), v4);
    EXPECT_EQ(again.child(root, 1), v1);
  }

  // The wrong kernel's refinements stay wrong (same marker), and every reflexion gets one JSON object.
  auto refined = python_block(pl.p.complete(req("refine", "CURRENT KERNEL\n```python\n" + v4 + "```\nFAIL")).text);
  EXPECT_EQ(marker(refined), v(4));
  EXPECT_NE(refined, v4);
  auto again = python_block(pl.p.complete(req("refine", "CURRENT KERNEL\n```python\n" + refined + "```\nFAIL")).text);
  EXPECT_EQ(again, refined);
  auto reflexion = nlohmann::json::parse(pl.p.complete(req("reflexion", "Round 2 attempt ...")).text);
  for (const char* k : {"was_diagnosis_correct", "was_fix_effective", "lessons", "avoid_patterns", "try_patterns"})
    EXPECT_TRUE(reflexion.contains(k)) << k;

  // Today's optimize prompt (no bottleneck summary in it) gets each parent's direction-1 child.
  EXPECT_EQ(marker(python_block(pl.p.complete(req("optimize", "Current kernel:\n" + root)).text)), v(1));
  EXPECT_EQ(marker(python_block(pl.p.complete(req("optimize", "Current kernel:\n" + v1)).text)), v(3));
  // A request that names no known kernel is not answered by accident.
  EXPECT_THROW(pl.p.complete(req("optimize", "some other kernel")), llm_error);
  EXPECT_THROW(pl.p.complete(req("bottleneck", "some other kernel")), llm_error);
}

}  // namespace

TEST(ReplayExamples, RmsnormSetServesItsLineageTree) { check_example("optimize_02_rmsnorm", "rms"); }
TEST(ReplayExamples, MatvecSetServesItsLineageTree) { check_example("optimize_01_matvec", "mv"); }
