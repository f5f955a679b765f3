// `reprise make-model`: write a random-weight model of a realistic shape with a real vocabulary.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "gguf/gguf_types.h"
#include "modelgen/make_model.h"

namespace reprise::cli {

void RegisterMakeModelCommand(CLI::App& app, CommandAction& run) {
  auto options = std::make_shared<modelgen::MakeModelOptions>();
  auto type_name = std::make_shared<std::string>("f16");
  auto* command =
      app.add_subcommand("make-model", "Write a random-weight llama model (for benchmarks)");
  command->add_option("--shape", options->shape, modelgen::ShapeNames())->required();
  command->add_option("--arch", options->architecture, "llama or qwen2 (NeoX rope, Q/K/V biases)");
  command->add_option("--vocab-from", options->vocab_path,
                      "GGUF file or Hugging Face folder to copy the vocabulary from (default: the "
                      "built-in vocabulary)");
  command->add_option("--type", *type_name,
                      "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  command->add_option("-o,--output", options->output_path, "output GGUF path")->required();
  command->add_option("--seed", options->seed, "weights seed");
  command->add_option("-t,--threads", options->threads, "threads (0 = all cores)");
  command->callback([options, type_name, &run] {
    run = [options, type_name] {
      auto type = gguf::TypeFromName(*type_name);
      if (!type || !kernels::IsSupportedWeightType(static_cast<uint32_t>(*type))) {
        throw Error(fmt::format("unknown weight type '{}'", *type_name));
      }
      options->type = static_cast<kernels::WeightType>(*type);
      modelgen::MakeModel(*options);
      return 0;
    };
  });
}

}  // namespace reprise::cli
