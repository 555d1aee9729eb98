#include "inferlab/lab/environment.h"

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lab/http_client.h"
#include "inferlab/lab/openai_client.h"
#include "inferlab/util/build_info.h"

namespace inferlab::lab {

std::optional<nlohmann::json> load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0, five = 0, fifteen = 0;
  if (!(in >> one >> five >> fifteen)) return std::nullopt;
  return nlohmann::json{{"1m", one}, {"5m", five}, {"15m", fifteen}};
}

namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("model name")) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    return value;
  }
  return "unknown";  // e.g. some ARM kernels print no "model name"
}

}  // namespace

nlohmann::json host_environment() {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return {{"cpu_model", cpu_model()},
          {"cores", cores > 0 ? cores : 0},
          {"inferlab_version", inferlab_version()},
          {"git_commit", inferlab_git_commit()}};
}

nlohmann::json target_environment(const std::string& base_url, const std::string& api_key, double timeout_s) {
  const std::string api = api_root(base_url);
  const std::string root = api.substr(0, api.size() - 3);  // without "/v1"
  nlohmann::json out = nlohmann::json::object();
  auto record = [&](const char* key, const std::string& url) {
    HttpResponse r = fetch({.url = url, .api_key = api_key, .timeout_ms = static_cast<long>(timeout_s * 1000)});
    if (r.outcome.end != TransferOutcome::End::answered || r.outcome.status != 200) return;
    auto body = nlohmann::json::parse(r.body, nullptr, false);
    out[key] = body.is_discarded() ? nlohmann::json(r.body) : body;
  };
  record("models", api + "/models");
  record("props", root + "/props");            // llama.cpp
  record("server_info", root + "/server_info");  // SGLang
  return out;
}

}  // namespace inferlab::lab
