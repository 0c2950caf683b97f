#pragma once
// Formatting helpers shared by the progress line, the summary table and report.html. Every
// number shown to a person goes through these, so a missing or non-finite value reads "n/a"
// instead of inf, nan or -1.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kagent::report {

/// `v` when it is a finite number (JSON integers count), else nullopt (null, text, missing).
std::optional<double> finite_number(const nlohmann::json& v);
/// finite_number(j[key]) when `j` is an object holding `key`, else nullopt.
std::optional<double> finite_number(const nlohmann::json& j, std::string_view key);
/// A positive time: finite_number(j, key) when it is > 0 (runs use -1 or null for "not measured").
std::optional<double> positive_ms(const nlohmann::json& j, std::string_view key);
/// j[key] as an integer when it is a number, else `fallback`.
std::int64_t int_or(const nlohmann::json& j, std::string_view key, std::int64_t fallback);
/// j[key] as text: a string as is, a number or bool as JSON, anything else (or missing) "".
std::string text_of(const nlohmann::json& j, std::string_view key);
/// j[key] when it is a boolean true; false when j is no object, lacks the key or holds anything else.
bool flag_of(const nlohmann::json& j, std::string_view key);

/// "0.1234 ms", with precision that keeps about four significant digits; "n/a" when unset.
std::string format_ms(std::optional<double> ms);
/// ref / best as "1.85x"; "n/a" unless both are positive and finite.
std::string format_speedup(std::optional<double> ref, std::optional<double> best);
/// 950 -> "950", 12345 -> "12.3k", 2500000 -> "2.50M".
std::string format_count(std::int64_t n);
/// "$0.4200"; "n/a" when unset.
std::string format_usd(std::optional<double> usd);
/// Seconds as "mm:ss" below an hour, "h:mm:ss" above; "n/a" when negative or non-finite.
std::string format_duration(double seconds);

/// `s` on one line: control characters and newlines become spaces, runs of spaces collapse, and
/// the result is cut to `max_chars` (an ellipsis "..." marks the cut).
std::string one_line(std::string_view s, std::size_t max_chars);
/// An error for a log line: its text cut to `max_chars` (between words), and its "Hint: ..." part,
/// when it has one, kept whole after it.
std::string brief_error(std::string_view error, std::size_t max_chars);

/// HTML text and attribute escaping: & < > " ' become entities.
std::string html_escape(std::string_view s);

/// Seconds since the epoch of an ISO-8601 UTC time as the store writes it
/// ("2026-12-02T12:15:30.123Z"; fraction optional). nullopt when `s` is not such a time.
std::optional<double> parse_iso_utc(std::string_view s);

} // namespace kagent::report
