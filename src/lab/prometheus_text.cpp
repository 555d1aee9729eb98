// The Prometheus text format (see prometheus_text.h).
#include "inferlab/lab/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "inferlab/util/error.h"

namespace inferlab::lab {

std::string PrometheusSample::label(const std::string& key) const {
  for (const auto& [k, v] : labels)
    if (k == key) return v;
  return "";
}

std::string PrometheusText::type_of(const std::string& sample_name) const {
  if (auto it = types.find(sample_name); it != types.end()) return it->second;
  for (const char* suffix : {"_bucket", "_sum", "_count", "_created"}) {
    const std::string s = suffix;
    if (sample_name.size() > s.size() && sample_name.ends_with(s)) {
      auto it = types.find(sample_name.substr(0, sample_name.size() - s.size()));
      if (it != types.end() && (it->second == "histogram" || it->second == "summary")) return it->second;
    }
  }
  return "untyped";
}

bool parse_prometheus_number(const std::string& text, double& value) {
  // The format's spellings of the special values; strtod would also take "nan(...)", "infinity", hex.
  if (text == "NaN") return value = std::numeric_limits<double>::quiet_NaN(), true;
  if (text == "+Inf" || text == "Inf") return value = std::numeric_limits<double>::infinity(), true;
  if (text == "-Inf") return value = -std::numeric_limits<double>::infinity(), true;
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);  // the shortest text that reads back as the same double
}

std::string prometheus_labels(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ',';
    out += labels[i].first + "=\"";
    for (char c : labels[i].second) out += c == '\\' ? "\\\\" : c == '"' ? "\\\"" : c == '\n' ? "\\n" : std::string(1, c);
    out += '"';
  }
  return out + "}";
}

PrometheusText parse_prometheus_text(const std::string& text) {
  PrometheusText out;
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos) continue;
    if (line[i] == '#') {
      // "# TYPE name type" names a family's type; HELP and any other comment are skipped.
      const std::string rest = line.substr(i + 1);
      const std::size_t t = rest.find_first_not_of(" \t");
      if (t != std::string::npos && rest.compare(t, 5, "TYPE ") == 0) {
        const std::size_t n = rest.find_first_not_of(" \t", t + 5);
        const std::size_t n_end = n == std::string::npos ? n : rest.find_first_of(" \t", n);
        const std::size_t ty = n_end == std::string::npos ? n_end : rest.find_first_not_of(" \t", n_end);
        if (ty != std::string::npos)
          out.types[rest.substr(n, n_end - n)] = rest.substr(ty, rest.find_first_of(" \t", ty) - ty);
      }
      continue;
    }
    auto bad = [&](const char* why) { fail("/metrics line {}: {}: {}", line_no, why, line.substr(0, 200)); };
    PrometheusSample s;
    const std::size_t name_end = line.find_first_of("{ \t", i);
    s.name = line.substr(i, name_end - i);
    if (s.name.empty() || name_end == std::string::npos) bad("expected NAME[{LABELS}] VALUE");
    i = name_end;
    if (line[i] == '{') {
      ++i;
      while (true) {
        while (i < line.size() && (line[i] == ' ' || line[i] == ',')) ++i;
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        const std::size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') bad("expected label=\"value\"");
        std::string key = line.substr(i, eq - i), value;
        while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
        if (key.empty()) bad("a label without a name");
        i = eq + 2;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) {  // the format escapes \\, \" and \n
            ++i;
            value += line[i] == 'n' ? '\n' : line[i];
          } else {
            value += line[i];
          }
          ++i;
        }
        if (i >= line.size()) bad("unterminated label value");
        ++i;  // the closing quote
        s.labels.emplace_back(std::move(key), std::move(value));
      }
    }
    i = line.find_first_not_of(" \t", i);
    if (i == std::string::npos) bad("no value");
    const std::size_t value_end = line.find_first_of(" \t", i);
    if (!parse_prometheus_number(line.substr(i, value_end - i), s.value)) bad("the value is not a number");
    // An optional timestamp (integer ms), then possibly an OpenMetrics exemplar ("# {...} v"), ignored.
    std::size_t j = value_end == std::string::npos ? value_end : line.find_first_not_of(" \t", value_end);
    if (j != std::string::npos && line[j] != '#') {
      double timestamp = 0;
      const std::size_t t_end = line.find_first_of(" \t", j);
      if (!parse_prometheus_number(line.substr(j, t_end - j), timestamp)) bad("the timestamp is not a number");
      j = t_end == std::string::npos ? t_end : line.find_first_not_of(" \t", t_end);
      if (j != std::string::npos && line[j] != '#') bad("unexpected text after the timestamp");
    }
    out.samples.push_back(std::move(s));
  }
  return out;
}

std::vector<PrometheusSample> parse_prometheus(const std::string& text) { return parse_prometheus_text(text).samples; }

}  // namespace inferlab::lab
