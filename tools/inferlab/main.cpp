#include <cstdio>
#include <vector>

#include "command.h"
#include "inferlab/util/error.h"

namespace inferlab::cli {

static std::vector<CommandSetup>& registry() {
  static std::vector<CommandSetup> setups;
  return setups;
}

Registrar::Registrar(CommandSetup setup) { registry().push_back(std::move(setup)); }

}  // namespace inferlab::cli

int main(int argc, char** argv) {
  CLI::App app{"inferlab: run large language models and measure how they run"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "inferlab 0.1.0");
  for (auto& setup : inferlab::cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const inferlab::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
