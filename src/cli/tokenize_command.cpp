// `reprise tokenize`: print the token ids of a text with the model's (or a vocab file's) tokenizer.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "tokenizer/tokenizer.h"

namespace reprise::cli {

namespace {

struct TokenizeOptions {
  std::string model;
  std::string text;
  bool no_bos = false;
  bool parse_special = false;
  bool pieces = false;
};

int RunTokenize(const TokenizeOptions& options) {
  // Only the vocabulary is read, so vocab-only GGUF files work too.
  gguf::GgufFile file = OpenModelFile(options.model);
  Tokenizer tokenizer = Tokenizer::FromGguf(file);
  std::vector<int32_t> ids = tokenizer.Encode(options.text, !options.no_bos, options.parse_special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string(ids[i]);
    if (options.pieces) line += fmt::format(":'{}'", tokenizer.TokenToPiece(ids[i]));
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<TokenizeOptions>();
  auto* command = app.add_subcommand("tokenize", "Print the token ids of a text");
  command
      ->add_option("-m,--model", options->model,
                   "GGUF model or vocabulary file, or Hugging Face folder")
      ->required();
  command->add_option("text", options->text, "text to tokenize")->required();
  command->add_flag("--no-bos", options->no_bos, "do not add BOS/EOS even if the model asks");
  command->add_flag("--parse-special", options->parse_special, "match special-token texts");
  command->add_flag("--pieces", options->pieces, "print each token's text beside its id");
  command->callback([options, &run] { run = [options] { return RunTokenize(*options); }; });
}

}  // namespace reprise::cli
