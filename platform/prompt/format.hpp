#pragma once
// Helpers that turn numbers and analysis objects into the text pieces prompt templates show. Shared
// by the kernel prompts (platform/prompt) and the analysis prompts (platform/analysis).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kagent::promptfmt {

/// The platform family a prompt is written for: "rocm" (rocm, amd, hip), "cpu", "cuda" (cuda,
/// nvidia), "xpu", "noop", or the lower-cased input otherwise.
std::string platform_family(const std::string& platform);

/// A measured time or percentage: finite and >= 0. The actors use -1 for "not measured".
bool is_known(double v);

/// j[key] as a finite number, or nullopt (absent, null, a string, NaN, ...).
std::optional<double> number_at(const nlohmann::json& j, const char* key);
/// j[key] as a string: strings as they are, numbers and booleans printed, anything else "".
std::string string_at(const nlohmann::json& j, const char* key);
/// j[key] as a bool, or `fallback` when absent or not a bool.
bool bool_at(const nlohmann::json& j, const char* key, bool fallback);

/// `v` with `places` decimals ("12.3457").
std::string fixed(double v, int places);
/// `v` to 3 significant digits, without an exponent between 1e-3 and 1e15 ("0.0123", "45.7", "12300").
std::string sig3(double v);
/// A spec-sheet number as printed: "5300", "163.4", "1307.4".
std::string plain(double v);

/// The GPU specification view for templates, from the spec row of `gpu_name`:
///   {name, vendor, architecture, unit ("CU" on AMD/CDNA, "SM" on NVIDIA), is_cdna, lines: [{label, value}]}
/// Every number comes from the row; fields the row does not know (0) are left out. null when the
/// name is empty or not in the database.
nlohmann::json gpu_view(const std::string& gpu_name);

/// The roofline verdict view: {bottleneck (upper case), lines: ["Compute SOL: 12.3%", ...],
/// warnings: [...] (or ["None"]), warnings_text ("a; b" or "None"), notes: [...]} from a roofline_result JSON. null for null/non-object.
/// Absent SOL values read "not available"; the tensor-core line appears only for NVIDIA verdicts.
nlohmann::json roofline_view(const nlohmann::json& roofline);

} // namespace kagent::promptfmt
