#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "core/error.h"

namespace reprise::cli {

int Main(int argc, char** argv) {
  CLI::App app{"Reprise: an LLM inference server that never computes the same prefix twice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "reprise 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return 0;
}

}  // namespace reprise::cli
