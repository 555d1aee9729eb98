// The conformance run (see include/inferlab/lab/conform.h): the registry of checks in order,
// each run alone (an exception from one is its failure, never the run's), and the report.
#include "inferlab/lab/conform.h"

#include <chrono>
#include <regex>

#include "lab/conform/probe.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/util/error.h"

namespace inferlab::lab {

using conform::Check;

const char* to_string(CheckStatus status) {
  switch (status) {
    case CheckStatus::pass: return "pass";
    case CheckStatus::fail: return "fail";
    case CheckStatus::skip: return "skip";
  }
  return "fail";
}

namespace {

std::vector<Check> all_checks() {
  std::vector<Check> checks;
  conform::add_model_checks(checks);
  conform::add_chat_checks(checks);
  conform::add_stream_checks(checks);
  conform::add_generation_checks(checks);
  conform::add_error_checks(checks);
  conform::add_serving_checks(checks);
  conform::add_responses_checks(checks);
  conform::add_messages_checks(checks);
  conform::add_embeddings_checks(checks);
  conform::add_sampling_checks(checks);
  return checks;
}

CheckResult run_one(const Check& check, conform::Probe& probe) {
  CheckResult r;
  r.name = check.name;
  r.summary = check.summary;
  const auto started = std::chrono::steady_clock::now();
  try {
    r.detail = check.run(probe);
    r.status = CheckStatus::pass;
  } catch (const conform::Skip& s) {
    r.status = CheckStatus::skip;
    r.detail = s.why;
  } catch (const conform::Failure& f) {
    r.status = CheckStatus::fail;
    r.detail = f.what;
    r.request = probe.last_request();
    r.evidence = conform::cut(f.evidence.value_or(probe.last_bytes()), 300);
  } catch (const std::exception& e) {  // a transport failure (timeout, reset) is the server's failure too
    r.status = CheckStatus::fail;
    r.detail = e.what();
    r.request = probe.last_request();
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return r;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> conform_checks() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Check& c : all_checks()) out.emplace_back(c.name, c.summary);
  return out;
}

ConformReport run_conformance(const ConformOptions& options, const std::function<void(const CheckResult&)>& on_result) {
  std::optional<std::regex> only;
  if (!options.only.empty()) {
    try {
      only.emplace(options.only, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail("--only '{}': not a regular expression ({})", options.only, e.what());
    }
  }
  ConformReport report;
  report.base_url = api_root(options.base_url);
  report.model = options.model.empty() ? first_model_id(options.base_url, options.api_key, options.timeout_s) : options.model;
  conform::Probe probe(options, report.model);
  for (const Check& check : all_checks()) {
    if (only && !std::regex_search(check.name, *only)) continue;
    report.results.push_back(run_one(check, probe));
    if (on_result) on_result(report.results.back());
  }
  if (only && report.results.empty()) fail("--only '{}' selects no check (see inferlab conform --list)", options.only);
  return report;
}

int ConformReport::count(CheckStatus status) const {
  int n = 0;
  for (const auto& r : results) n += r.status == status;
  return n;
}

std::string ConformReport::table() const {
  std::size_t width = 5;
  for (const auto& r : results) width = std::max(width, r.name.size());
  std::string out = fmt::format("conformance of {} (model {})\n\n{:<{}}  result  detail\n", base_url, model, "check", width);
  for (const auto& r : results) {
    const std::string detail = r.status == CheckStatus::skip ? "(" + r.detail + ")" : r.detail;
    out += fmt::format("{:<{}}  {:<6}  {}\n", r.name, width, to_string(r.status), detail);
    if (r.status != CheckStatus::fail) continue;
    if (!r.request.empty()) out += fmt::format("{:<{}}          request: {}\n", "", width, r.request);
    if (!r.evidence.empty()) out += fmt::format("{:<{}}          got:     {}\n", "", width, r.evidence);
  }
  out += fmt::format("\n{} checks: {} pass, {} fail, {} skip\n", results.size(), count(CheckStatus::pass),
                     count(CheckStatus::fail), count(CheckStatus::skip));
  return out;
}

std::string ConformReport::json() const {
  conform::json checks = conform::json::array();
  for (const auto& r : results)
    checks.push_back({{"name", r.name}, {"summary", r.summary}, {"status", to_string(r.status)}, {"detail", r.detail},
                      {"request", r.request}, {"evidence", r.evidence}, {"ms", std::round(r.ms * 10) / 10}});
  conform::json out = {{"base_url", base_url},
                       {"model", model},
                       {"pass", count(CheckStatus::pass)},
                       {"fail", count(CheckStatus::fail)},
                       {"skip", count(CheckStatus::skip)},
                       {"checks", std::move(checks)}};
  return out.dump(2, ' ', false, conform::json::error_handler_t::replace) + "\n";
}

}  // namespace inferlab::lab
