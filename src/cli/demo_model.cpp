#include "cli/demo_model.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "modelgen/make_model.h"
#include "vocabgen/builtin_vocab.h"

namespace reprise::cli {

std::string DemoCacheDir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg == '/') return (std::filesystem::path(xdg) / "reprise").string();
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') {
    return (std::filesystem::path(home) / ".cache" / "reprise").string();
  }
  throw Error("no cache folder for the demo model: set XDG_CACHE_HOME or HOME");
}

std::string EnsureDemoModel(const std::string& shape, int threads) {
  modelgen::MakeModelOptions options;
  options.shape = shape;
  modelgen::ShapeByName(shape);  // refuses an unknown shape before anything is made
  // Q8_0 is what a CPU deployment of a model this size would run; the tiny shape is for tests.
  options.type = shape == "tiny" ? kernels::WeightType::kF16 : kernels::WeightType::kQ8_0;
  options.threads = threads;
  // The name changes with everything that changes the file, so a stale model is never reused.
  std::string name =
      fmt::format("demo-{}-{}-vocab-{}.gguf", shape, kernels::WeightTypeName(options.type),
                  vocabgen::BuiltinVocabFingerprint(vocabgen::BuiltinVocab()));
  std::filesystem::path folder = DemoCacheDir();
  std::filesystem::path path = folder / name;
  if (std::filesystem::exists(path)) return path.string();

  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) throw Error(fmt::format("cannot create {}: {}", folder.string(), error.message()));
  std::fprintf(stderr,
               "Making the demo model once: a %s-shaped llama model with random weights "
               "and the built-in vocabulary, in %s\n",
               shape.c_str(), path.c_str());
  std::filesystem::path partial = folder / fmt::format("{}.partial-{}", name, ::getpid());
  options.output_path = partial.string();
  try {
    modelgen::MakeModel(options);
  } catch (...) {
    std::filesystem::remove(partial, error);
    throw;
  }
  std::filesystem::rename(partial, path, error);
  if (error) throw Error(fmt::format("cannot write {}: {}", path.string(), error.message()));
  return path.string();
}

}  // namespace reprise::cli
