// The `reprise` command line: demo, serve, route, generate, bench, tokenize, template, make-model.
#pragma once

#include <signal.h>

#include <functional>

namespace CLI {
class App;
}

namespace reprise::cli {

// Parses argv and runs a subcommand; returns the process exit code (1 with a one-line message on
// stderr for bad input or a bad file).
int Main(int argc, char** argv);

// Each subcommand registers itself on the app and sets `run` to the action to perform once
// parsing succeeded; the action returns the exit code.
using CommandAction = std::function<int()>;

// For long-running commands (serve, route): blocks SIGINT and SIGTERM in this thread and every
// thread started after it, so that they are taken by sigtimedwait on the main thread and never
// by a handler in a random thread, and ignores SIGPIPE (a client that hangs up must not kill
// us). Returns the set to wait on.
sigset_t BlockStopSignals();
// --mmap and --no-mmap on a command that runs the engine (EngineConfig::mmap_weights): `set`
// receives true for --mmap, false for --no-mmap. One wording for serve, generate and bench.
void AddMmapFlags(CLI::App& command, std::function<void(bool)> set);

void RegisterGenerateCommand(CLI::App& app, CommandAction& run);
void RegisterTokenizeCommand(CLI::App& app, CommandAction& run);
void RegisterTemplateCommand(CLI::App& app, CommandAction& run);
void RegisterMakeModelCommand(CLI::App& app, CommandAction& run);
void RegisterServeCommand(CLI::App& app, CommandAction& run);
void RegisterBenchCommand(CLI::App& app, CommandAction& run);
void RegisterDemoCommand(CLI::App& app, CommandAction& run);
void RegisterRouteCommand(CLI::App& app, CommandAction& run);

}  // namespace reprise::cli
