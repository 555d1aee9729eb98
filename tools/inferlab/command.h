// Each cmd_*.cpp registers its subcommands at start-up: one file per command group.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace inferlab::cli {

using CommandSetup = std::function<void(CLI::App& app)>;

struct Registrar {
  explicit Registrar(CommandSetup setup);
};

// A subcommand several files add children to (e.g. `bench`): created by whichever file asks first.
inline CLI::App& command_group(CLI::App& app, const std::string& name, const std::string& description) {
  for (CLI::App* existing : app.get_subcommands([](CLI::App*) { return true; }))
    if (existing->get_name() == name) return *existing;
  CLI::App* group = app.add_subcommand(name, description);
  group->require_subcommand(1);
  return *group;
}

}  // namespace inferlab::cli
