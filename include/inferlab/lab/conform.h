// `inferlab conform`: named checks of the OpenAI API surface against a live server (ours,
// llama.cpp's llama-server, vLLM, SGLang...), each pass, fail or skip with the request and the
// offending bytes as evidence. docs/conformance.md lists the checks and the peers' results.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace inferlab::lab {

struct ConformOptions {
  std::string base_url;  // with or without /v1
  std::string api_key;   // given: the auth checks run (401 without a key and with a wrong one)
  std::string model;     // empty: the first of /v1/models
  std::string only;      // ECMAScript regex searched in each check's name; empty: every check
  double timeout_s = 60; // per request
};

enum class CheckStatus { pass, fail, skip };
const char* to_string(CheckStatus status);

struct CheckResult {
  std::string name;      // group.what, e.g. "stream.first_chunk_role"
  std::string summary;   // what the check asks, one line
  CheckStatus status = CheckStatus::pass;
  std::string detail;    // pass: what was seen; fail: what is wrong; skip: why it did not apply
  std::string request;   // fail: the request that shows it (method, path, body), cut
  std::string evidence;  // fail: the offending bytes, cut
  double ms = 0;
};

struct ConformReport {
  std::string base_url, model;
  std::vector<CheckResult> results;

  int count(CheckStatus status) const;
  bool ok() const { return count(CheckStatus::fail) == 0; }  // skips are not failures
  std::string table() const;  // one row per check, evidence lines under a failure
  std::string json() const;
};

// Every check's name and summary, in run order.
std::vector<std::pair<std::string, std::string>> conform_checks();

// Runs the checks (those --only selects) in order; on_result sees each as it ends. Throws Error
// when the server cannot be reached or no model is listed (nothing could be checked).
ConformReport run_conformance(const ConformOptions& options, const std::function<void(const CheckResult&)>& on_result = {});

}  // namespace inferlab::lab
