// Each cmd_*.cpp registers its subcommands at start-up: one file per command group.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>

namespace inferlab::cli {

using CommandSetup = std::function<void(CLI::App& app)>;

struct Registrar {
  explicit Registrar(CommandSetup setup);
};

}  // namespace inferlab::cli
