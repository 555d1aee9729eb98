// `inferlab conform`: the OpenAI API conformance suite against a live server (inferlab/lab/conform.h).
#include <cstdio>

#include "command.h"
#include "inferlab/lab/conform.h"

namespace {

using inferlab::cli::Registrar;

static Registrar reg([](CLI::App& app) {
  auto o = std::make_shared<inferlab::lab::ConformOptions>();
  auto as_json = std::make_shared<bool>(false);
  auto list = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "conform", "OpenAI API conformance of a live server: ~50 named checks, pass / fail / skip with evidence; exit 1 "
                 "when one fails (docs/conformance.md)");
  cmd->add_option("--base-url", o->base_url, "Server URL, e.g. http://127.0.0.1:30000 (with or without /v1)");
  cmd->add_option("--api-key", o->api_key, "Bearer key; given: the auth checks run too")->envname("INFERLAB_API_KEY");
  cmd->add_option("--model", o->model, "Model name to send (default: the first of /v1/models)");
  cmd->add_option("--only", o->only, "Run the checks whose name matches this regular expression");
  cmd->add_option("--timeout", o->timeout_s, "Per-request timeout in seconds")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  cmd->add_flag("--json", *as_json, "Print the results as JSON");
  cmd->add_flag("--list", *list, "List the checks and exit");
  cmd->callback([o, as_json, list] {
    if (*list) {
      for (const auto& [name, summary] : inferlab::lab::conform_checks()) std::printf("%-28s %s\n", name.c_str(), summary.c_str());
      return;
    }
    if (o->base_url.empty()) throw CLI::RequiredError("--base-url");
    inferlab::lab::ConformReport report = inferlab::lab::run_conformance(*o);
    std::fputs((*as_json ? report.json() : report.table()).c_str(), stdout);
    std::fflush(stdout);
    if (!report.ok()) throw CLI::RuntimeError(1);
  });
});

}  // namespace
