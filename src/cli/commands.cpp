#include "cli/commands.h"

#include <pthread.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "cli/configuration_doc.h"
#include "core/error.h"
#include "core/log.h"

namespace reprise::cli {

void AddMmapFlags(CLI::App& command, std::function<void(bool)> set) {
  command.add_flag_callback(
      "--mmap", [set] { set(true); },
      "Keep the weights in the model file's memory map (shared by processes, read when used) "
      "instead of reading them into huge-page memory, where decode runs faster");
  command.add_flag_callback(
      "--no-mmap", [set] { set(false); }, "Read the weights into huge-page memory (the default)");
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

int Main(int argc, char** argv) {
  CLI::App app{"Reprise: an LLM inference server that never computes the same prefix twice"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "reprise 0.1.0");
  // Help shows every option's default; options the subcommands add inherit this.
  app.option_defaults()->always_capture_default();
  // Options of the top level (--log-level) may also follow the subcommand.
  app.fallthrough();
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off");
  CommandAction run;
  RegisterDemoCommand(app, run);
  RegisterServeCommand(app, run);
  RegisterRouteCommand(app, run);
  RegisterGenerateCommand(app, run);
  RegisterTokenizeCommand(app, run);
  RegisterTemplateCommand(app, run);
  RegisterMakeModelCommand(app, run);
  RegisterBenchCommand(app, run);
  // Hidden from --help: it prints docs/configuration.md (scripts/update_docs.sh).
  app.add_subcommand("configuration-doc", "Print docs/configuration.md: every flag and variable")
      ->group("")
      ->callback([&app, &run] {
        run = [&app] {
          std::fputs(ConfigurationMarkdown(app).c_str(), stdout);
          return 0;
        };
      });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    ConfigureLogging(log_level);
    return run ? run() : 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "reprise: error: %s\n", error.what());
    return 1;
  }
}

}  // namespace reprise::cli
