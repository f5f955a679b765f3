// `reprise template`: print the prompt a chat template renders for a conversation (the model's
// own template or --chat-template's), without loading the weights.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "hf/model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace reprise::cli {
namespace {

struct TemplateOptions {
  std::string model;
  std::string chat_template;
  std::string messages_file;
  bool no_generation_prompt = false;
};

// A JSON list of messages, or an object holding one under "messages".
jinja::Value ReadMessages(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(fmt::format("cannot read messages file '{}'", path));
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw Error(fmt::format("messages file '{}' is not valid JSON", path));
  if (json.is_object() && json.contains("messages")) json = json["messages"];
  if (!json.is_array()) {
    throw Error(
        fmt::format("messages file '{}' must hold a list of messages or "
                    "{{\"messages\": [...]}}",
                    path));
  }
  for (const nlohmann::json& message : json) {
    if (!message.is_object() || !message.contains("role")) {
      throw Error(
          fmt::format("messages file '{}': each message must be an object with a role", path));
    }
  }
  return jinja::Value::FromJson(json);
}

int RunTemplate(const TemplateOptions& options) {
  jinja::Value messages = ReadMessages(options.messages_file);
  gguf::GgufFile file = OpenModelFile(options.model);
  Tokenizer tokenizer = Tokenizer::FromGguf(file);
  ChatTemplate chat = ChatTemplate::Resolve(options.chat_template, tokenizer);
  std::string prompt;
  try {
    prompt = chat.RenderMessages(messages, !options.no_generation_prompt);
  } catch (const jinja::Error& error) {
    throw Error(fmt::format("{}: {}", chat.description(), error.what()));
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace

void RegisterTemplateCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<TemplateOptions>();
  auto* command = app.add_subcommand("template", "Print the prompt a chat template renders");
  command
      ->add_option("-m,--model", options->model,
                   "GGUF model or vocabulary file, or Hugging Face folder")
      ->required();
  command->add_option("--chat-template", options->chat_template,
                      "chatml, llama2, llama3, mistral, a Jinja file or Jinja text (default: the "
                      "model's own; chatml for a model without one)");
  command
      ->add_option("--messages", options->messages_file,
                   "JSON file: a list of {\"role\", \"content\"} messages")
      ->required();
  command->add_flag("--no-generation-prompt", options->no_generation_prompt,
                    "end after the last message, without the assistant's header");
  command->callback([options, &run] { run = [options] { return RunTemplate(*options); }; });
}

}  // namespace reprise::cli
