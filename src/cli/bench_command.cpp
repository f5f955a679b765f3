#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace reprise::cli {

// Placeholder until the benchmark tool lands: says so instead of printing made-up figures.
void RegisterBenchCommand(CLI::App& app, CommandAction& run) {
  auto* command = app.add_subcommand("bench", "Measure kernels, prefill, decode and prefix reuse");
  command->allow_extras();
  command->callback([&run] {
    run = [] () -> int { throw Error("'bench' is not built yet"); };
  });
}

}  // namespace reprise::cli
