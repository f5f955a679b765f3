// Fuzz target: the Jinja interpreter (src/jinja) on arbitrary template text, rendered with a
// small conversation as Hugging Face renders chat templates. Only jinja::Error (a
// reprise::Error) may come out; the render limits bound output, loops and recursion.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/error.h"
#include "jinja/template.h"

namespace {

const reprise::jinja::Value& Context() {
  static const reprise::jinja::Value context = reprise::jinja::Value::FromJson({
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Hello there\nfriend"}},
        {{"role", "assistant"}, {"content", "Hi!"}},
        {{"role", "user"}, {"content", "And now?"}}}},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"add_generation_prompt", true},
  });
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  reprise::jinja::RenderLimits limits;
  limits.max_output_bytes = size_t{1} << 20;
  limits.max_iterations = 100'000;
  try {
    reprise::jinja::Template::Parse(source).Render(Context(), limits);
  } catch (const reprise::Error&) {
    // A template that does not parse, or raises while rendering: refused with a message.
  }
  return 0;
}
