// The run's environment, recorded in every `bench serve` summary JSON (docs/measurement.md): the
// host (CPU model, cores, load average), this build (version, git commit baked in at configure
// time) and what the target says about itself (/v1/models, /props, /server_info).
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

namespace inferlab::lab {

// /proc/loadavg's 1, 5 and 15 minute figures; none where it cannot be read.
std::optional<nlohmann::json> load_average();

// {"cpu_model", "cores", "inferlab_version", "git_commit"}: cpu_model from /proc/cpuinfo's
// "model name" ("unknown" when absent), cores as nproc counts them, git_commit a short hash or
// "unknown" (never git at run time).
nlohmann::json host_environment();

// {"models": GET <root>/v1/models, "props": GET <root>/props, "server_info": GET <root>/server_info}:
// each the parsed JSON body (text when not JSON) when it answered 200; absent otherwise. <root> is
// --base-url without its /v1.
nlohmann::json target_environment(const std::string& base_url, const std::string& api_key, double timeout_s);

}  // namespace inferlab::lab
