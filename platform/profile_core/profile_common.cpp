#include "platform/profile_core/profile_common.hpp"

#include <csv.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "platform/common/errors.hpp"

namespace kagent {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

struct record_sink {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> current;
};

void on_field(void* data, size_t len, void* sink) {
  auto* s = static_cast<record_sink*>(sink);
  s->current.emplace_back(data ? static_cast<const char*>(data) : "", data ? len : 0);
}

void on_record(int, void* sink) {
  auto* s = static_cast<record_sink*>(sink);
  // libcsv reports a record per line ending; a line holding only blanks yields one empty field.
  bool blank = s->current.empty() || (s->current.size() == 1 && s->current[0].empty());
  if (!blank) s->records.push_back(std::move(s->current));
  s->current.clear();
}

} // namespace

int csv_table::column(std::initializer_list<std::string_view> names) const {
  for (auto n : names)
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == n) return static_cast<int>(i);
  for (auto n : names)
    for (size_t i = 0; i < header.size(); ++i)
      if (iequals(header[i], n)) return static_cast<int>(i);
  return -1;
}

const std::string& csv_table::cell(const std::vector<std::string>& row, int col) const {
  static const std::string empty;
  if (col < 0 || static_cast<size_t>(col) >= row.size()) return empty;
  return row[static_cast<size_t>(col)];
}

std::vector<std::vector<std::string>> parse_csv_records(const std::string& text) {
  csv_parser p{};
  if (csv_init(&p, 0) != 0) throw run_error("CSV parser could not be initialised");
  record_sink sink;
  size_t done = csv_parse(&p, text.data(), text.size(), on_field, on_record, &sink);
  if (done != text.size()) {
    std::string why = csv_strerror(csv_error(&p));
    csv_free(&p);
    throw run_error("malformed CSV: " + why);
  }
  csv_fini(&p, on_field, on_record, &sink);
  csv_free(&p);
  return std::move(sink.records);
}

csv_table parse_csv_table(const std::string& text) {
  csv_table t;
  auto records = parse_csv_records(text);
  if (records.empty()) return t;
  t.header = std::move(records.front());
  for (auto& h : t.header) {
    // A UTF-8 byte-order mark would otherwise hide the first column's name.
    if (h.rfind("\xEF\xBB\xBF", 0) == 0) h.erase(0, 3);
  }
  t.rows.assign(std::make_move_iterator(records.begin() + 1), std::make_move_iterator(records.end()));
  return t;
}

std::optional<double> parse_number(std::string_view text) {
  std::string s;
  s.reserve(text.size());
  for (char c : text)
    if (c != ',' && !std::isspace(static_cast<unsigned char>(c))) s.push_back(c);
  if (!s.empty() && s.back() == '%') s.pop_back();
  if (s.empty()) return std::nullopt;
  double v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (*b == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec != std::errc{} || ptr != e) return std::nullopt;
  if (std::isnan(v)) return std::nullopt;
  return v;
}

bool is_pytorch_kernel(std::string_view name) { return name.find("at::") != std::string_view::npos; }

std::optional<std::string> busiest_kernel(const std::vector<std::pair<std::string, double>>& totals) {
  // Sum per name, remembering the position of each name's last entry so that a tie keeps the later.
  std::map<std::string, std::pair<double, size_t>> per_name;
  for (size_t i = 0; i < totals.size(); ++i) {
    const auto& [name, t] = totals[i];
    if (is_pytorch_kernel(name)) continue;
    auto& slot = per_name[name];
    slot.first += t;
    slot.second = i;
  }
  std::optional<std::string> best;
  double best_total = 0;
  size_t best_pos = 0;
  for (const auto& [name, v] : per_name) {
    if (!best || v.first > best_total || (v.first == best_total && v.second > best_pos)) {
      best = name;
      best_total = v.first;
      best_pos = v.second;
    }
  }
  return best;
}

std::string sanitize_kernel_id(const std::string& id) {
  std::string out;
  for (char c : id) {
    auto u = static_cast<unsigned char>(c);
    out.push_back(std::isalnum(u) || c == '-' || c == '_' || c == '.' ? c : '_');
  }
  return out;
}

double default_profile_budget_s(double candidate_timeout_s) { return candidate_timeout_s / 2.0; }

} // namespace kagent
