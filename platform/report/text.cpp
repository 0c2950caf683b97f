#include "platform/report/text.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

namespace kagent::report {

std::optional<double> finite_number(const nlohmann::json& v) {
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

std::optional<double> finite_number(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return finite_number(*it);
}

std::optional<double> positive_ms(const nlohmann::json& j, std::string_view key) {
  auto v = finite_number(j, key);
  if (v && *v > 0) return v;
  return std::nullopt;
}

std::int64_t int_or(const nlohmann::json& j, std::string_view key, std::int64_t fallback) {
  auto v = finite_number(j, key);
  return v ? static_cast<std::int64_t>(std::llround(*v)) : fallback;
}

bool flag_of(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

std::string text_of(const nlohmann::json& j, std::string_view key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number() || it->is_boolean()) return it->dump();
  return "";
}

std::string format_ms(std::optional<double> ms) {
  if (!ms || !std::isfinite(*ms) || *ms < 0) return "n/a";
  const double v = *ms;
  if (v >= 100) return fmt::format("{:.1f} ms", v);
  if (v >= 1) return fmt::format("{:.3f} ms", v);
  if (v >= 0.01 || v == 0) return fmt::format("{:.4f} ms", v);
  return fmt::format("{:.6f} ms", v);
}

std::string format_speedup(std::optional<double> ref, std::optional<double> best) {
  if (!ref || !best || !std::isfinite(*ref) || !std::isfinite(*best) || *ref <= 0 || *best <= 0) return "n/a";
  const double s = *ref / *best;
  if (!std::isfinite(s)) return "n/a";
  return fmt::format("{:.2f}x", s);
}

std::string format_count(std::int64_t n) {
  const double a = std::abs(static_cast<double>(n));
  if (a < 1000) return std::to_string(n);
  if (a < 1e6) return fmt::format("{:.1f}k", static_cast<double>(n) / 1e3);
  if (a < 1e9) return fmt::format("{:.2f}M", static_cast<double>(n) / 1e6);
  return fmt::format("{:.2f}G", static_cast<double>(n) / 1e9);
}

std::string format_usd(std::optional<double> usd) {
  if (!usd || !std::isfinite(*usd)) return "n/a";
  return fmt::format("${:.4f}", *usd);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "n/a";
  const auto total = static_cast<long long>(seconds);
  const long long h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02}:{:02}", h, m, s);
  return fmt::format("{:02}:{:02}", m, s);
}

std::string one_line(std::string_view s, std::size_t max_chars) {
  std::string out;
  out.reserve(std::min(s.size(), max_chars + 3));
  bool space = false;
  for (char c : s) {
    const bool ws = static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == 0x7f;
    if (ws) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
    if (out.size() > max_chars) break;
  }
  if (out.size() > max_chars) {
    // Cut at a character boundary so that a multi-byte UTF-8 sequence is never split.
    std::size_t cut = max_chars >= 3 ? max_chars - 3 : 0;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    // Between words where one ends near the limit: a cut line reads "... the kernel ..." rather
    // than "... the ker...".
    if (const auto sp = out.rfind(' ', cut); sp != std::string::npos && sp > 0 && cut - sp <= 24) cut = sp;
    out.resize(cut);
    out += "...";
  }
  return out;
}

std::string brief_error(std::string_view error, std::size_t max_chars) {
  // A hint (the harness's "Hint: ...") is kept whole after the error's first part, so the advice is
  // never the part that is cut.
  const auto at = error.find("Hint:");
  if (at == std::string_view::npos) return one_line(error, max_chars);
  const auto main = one_line(error.substr(0, at), max_chars);
  const auto hint = one_line(error.substr(at + 5), 320);
  return main.empty() ? "hint: " + hint : main + " (hint: " + hint + ")";
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::optional<double> parse_iso_utc(std::string_view s) {
  // yyyy-mm-ddTHH:MM:SS[.fff]Z
  if (s.size() < 20) return std::nullopt;
  auto digits = [&](std::size_t pos, std::size_t n, int& out) {
    out = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      out = out * 10 + (s[i] - '0');
    }
    return true;
  };
  int Y, M, D, h, m, sec;
  if (!digits(0, 4, Y) || s[4] != '-' || !digits(5, 2, M) || s[7] != '-' || !digits(8, 2, D) ||
      (s[10] != 'T' && s[10] != ' ') || !digits(11, 2, h) || s[13] != ':' || !digits(14, 2, m) || s[16] != ':' ||
      !digits(17, 2, sec))
    return std::nullopt;
  double frac = 0;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    double scale = 0.1;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, scale /= 10) frac += (s[i] - '0') * scale;
  }
  if (i != s.size() - 1 || s[i] != 'Z') return std::nullopt;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return std::nullopt;
  std::tm tm{};
  tm.tm_year = Y - 1900;
  tm.tm_mon = M - 1;
  tm.tm_mday = D;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = sec;
  return static_cast<double>(::timegm(&tm)) + frac;
}

} // namespace kagent::report
