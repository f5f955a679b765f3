#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace reprise::cli {

// Placeholder until the HTTP server lands: says so instead of pretending to serve.
void RegisterServeCommand(CLI::App& app, CommandAction& run) {
  auto* command = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  command->allow_extras();
  command->callback([&run] {
    run = [] () -> int { throw Error("'serve' is not built yet"); };
  });
}

}  // namespace reprise::cli
