#pragma once
// Launch-constant sweeps: candidates the LLM never wrote. A verified kernel's tile sizes, warp count
// and pipeline depth (BLOCK_*, TILE_*, SPLIT*, GROUP_SIZE*, num_warps, num_stages), where the source
// gives them as plain integer literals, are stepped through their usual values one or two at a time.
// Each variant is a new kernel file, judged by the same trusted harness as any other candidate; the
// manager sends one to a device only while the search waits for the LLM, so the device works instead
// of idling (issue 14). Values in and values out: no actors, no files.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kagent::search {

/// One literal in the source that sets a launch constant: `NAME = 128`, `NAME=128` (a keyword
/// argument) or one element of `A, B = 16, 512`.
struct tune_site {
  std::string name;
  int value = 0;
  size_t offset = 0;  ///< of the literal in the source
  size_t length = 0;
};

/// A constant the sweep may change: every literal that sets it has the same value, and that value is
/// one of the name's usual values (`domain`, ascending).
struct tune_axis {
  std::string name;
  int value = 0;
  std::vector<int> domain;
};

/// One variant: the new value of each changed constant, and a label such as "BLOCK_K 512->1024".
struct tune_variant {
  std::map<std::string, int> values;
  std::string label;
};

/// The literals of launch constants in `code`, in source order (strings and comments skipped).
std::vector<tune_site> tune_sites(const std::string& code);

/// The constants of `code` a sweep may change, in order of first appearance. None for a kernel that
/// tunes itself (`triton.autotune`).
std::vector<tune_axis> tune_axes(const std::string& code);

/// At most `max` variants of `code`, nearest first: each constant one step down or up its domain,
/// then two constants one step each, then each constant two and three steps away.
std::vector<tune_variant> tune_variants(const std::string& code, size_t max);

/// `code` with the constants of `values` set; none when a constant is not an axis of `code`.
std::optional<std::string> apply_tune(const std::string& code, const std::map<std::string, int>& values);

/// "BLOCK_K 512->1024; num_warps 4->8": what a variant changes against `code`.
std::string tune_label(const std::string& code, const std::map<std::string, int>& values);

/// A variant's `bottleneck` in program.db ("tune: BLOCK_K 512->1024"), and its label back from one
/// (none for a candidate the LLM wrote).
std::string variant_bottleneck(const std::string& label);
std::optional<std::string> variant_label(const std::string& bottleneck);

/// Whether a program id is a variant's (r<round>_t<n>; the LLM's candidates are r<round>_c<n>).
bool is_variant_id(const std::string& id);

} // namespace kagent::search
