// The `reprise` command line: serve, generate, bench, tokenize, make-model.
#pragma once

namespace reprise::cli {

// Parses argv and runs a subcommand; returns the process exit code (1 with a one-line message on
// stderr for bad input or a bad file).
int Main(int argc, char** argv);

}  // namespace reprise::cli
