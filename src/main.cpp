// Entry point of the `reprise` binary: every subcommand lives in cli/.
#include "cli/commands.h"

int main(int argc, char** argv) { return reprise::cli::Main(argc, argv); }
