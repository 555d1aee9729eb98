// The Prometheus text exposition format (version 0.0.4, what every inference server's /metrics
// serves): sample lines `name{label="value",...} value [timestamp]`, `# TYPE` lines naming each
// family's type, other comments skipped. Read by `bench serve --replica-metrics` (counters before
// and after a run) and by the /metrics scrape during a run (docs/measurement.md).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace inferlab::lab {

// One sample: name{labels} value. Values may be NaN, +Inf or -Inf.
struct PrometheusSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order written, values unescaped
  double value = 0;
  std::string label(const std::string& key) const;  // "" when absent
};

struct PrometheusText {
  std::vector<PrometheusSample> samples;
  std::map<std::string, std::string> types;  // family name -> counter, gauge, histogram, summary, untyped
  // The type of the family a sample belongs to: a histogram's NAME_bucket / NAME_sum / NAME_count
  // belong to NAME; "untyped" when no # TYPE line names it.
  std::string type_of(const std::string& sample_name) const;
};

// Throws Error naming the line ("/metrics line N: ...") of a malformed sample line.
PrometheusText parse_prometheus_text(const std::string& text);
// The samples alone.
std::vector<PrometheusSample> parse_prometheus(const std::string& text);

// A number as the format writes it: NaN, +Inf, -Inf, or the shortest decimal that reads back the same.
std::string prometheus_number(double value);
// Reads one ("NaN", "+Inf", "1.5e3", ...); false when `text` is not a whole number.
bool parse_prometheus_number(const std::string& text, double& value);
// Labels written back as the format does, `{a="1",b="x \"y\""}` ("" for none), escaping \ " and newline.
std::string prometheus_labels(const std::vector<std::pair<std::string, std::string>>& labels);

}  // namespace inferlab::lab
