// docs/configuration.md, written from the command line's own option table (every subcommand's
// flags with their defaults) and the environment variables the binary reads, so the page cannot
// drift from the code: `reprise configuration-doc` prints it, and a test compares.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace reprise::cli {

// The markdown page for `app` (after every subcommand has registered).
std::string ConfigurationMarkdown(const CLI::App& app);

}  // namespace reprise::cli
