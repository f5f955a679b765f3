#include "cli/configuration_doc.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "server/settings.h"

namespace reprise::cli {
namespace {

// Variables read outside `serve`'s settings, beside the ones server::EnvironmentVariables() lists.
struct OtherVariable {
  const char* name;
  const char* read_by;
  const char* meaning;
};
constexpr OtherVariable kOtherVariables[] = {
    {"XDG_CACHE_HOME", "demo, serve --demo",
     "The demo model is kept in $XDG_CACHE_HOME/reprise (when set to an absolute path)"},
    {"HOME", "demo, serve --demo", "Else in $HOME/.cache/reprise"},
    {"REPRISE_CPU_TARGET", "every command that runs a model",
     "scalar, avx2 or avx512: use this kernel path instead of the best one the CPU supports "
     "(to compare paths; a path the CPU lacks is ignored)"},
};

// Text safe inside a markdown table cell.
std::string Cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

void AppendOptions(const CLI::App& command, const std::string& title, std::string& out) {
  out += fmt::format("\n## {}\n\n{}\n\n", title, Cell(command.get_description()));
  out += "| option | value | default | meaning |\n|---|---|---|---|\n";
  for (const CLI::Option* option : command.get_options()) {
    if (option->get_group().empty()) continue;  // hidden
    if (option->get_name() == "--help") continue;
    bool positional = !option->nonpositional();
    std::string names = positional ? option->get_name(true) : option->get_name(false, true);
    std::string value = option->get_expected_min() == 0 ? "" : option->get_type_name();
    std::string fallback = option->get_required() ? "required" : option->get_default_str();
    if (fallback == "[]") fallback.clear();
    out += fmt::format(
        "| `{}`{} | {} | {} | {} |\n", Cell(names), positional ? " (positional)" : "", Cell(value),
        fallback.empty() ? "" : "`" + Cell(fallback) + "`", Cell(option->get_description()));
  }
}

}  // namespace

std::string ConfigurationMarkdown(const CLI::App& app) {
  std::string out =
      "# Configuration\n\n"
      "Every flag of every `reprise` subcommand, with its default, and every environment "
      "variable the binary reads. Generated from the code's own option table by "
      "`reprise configuration-doc`; do not edit by hand: regenerate with "
      "`scripts/update_docs.sh` (a test fails while this file is stale).\n\n"
      "Flags win over environment variables. `--log-level` may come before or after the "
      "subcommand.\n\n"
      "## Environment variables\n\n"
      "| variable | read by | meaning |\n|---|---|---|\n";
  for (const server::EnvironmentVariable& variable : server::EnvironmentVariables()) {
    out += fmt::format("| `{}` | serve | {} |\n", variable.name, Cell(variable.meaning));
  }
  for (const OtherVariable& variable : kOtherVariables) {
    out += fmt::format("| `{}` | {} | {} |\n", variable.name, variable.read_by,
                       Cell(variable.meaning));
  }
  AppendOptions(app, "`reprise` (before or after any subcommand)", out);
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (command->get_group().empty()) continue;  // hidden, like configuration-doc itself
    AppendOptions(*command, fmt::format("`reprise {}`", command->get_name()), out);
  }
  return out;
}

}  // namespace reprise::cli
