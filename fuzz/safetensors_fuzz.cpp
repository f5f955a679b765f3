// Fuzz target: an arbitrary safetensors image given to the header parser (length prefix, JSON
// header, dtypes, shapes, offsets), and with a leading 'C' byte, arbitrary config.json text
// given to the Llama config reader. Only reprise::Error may come out; every tensor the parser
// accepts must lie inside the input (read here in full, so that ASan sees an overrun).
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "fuzz_support.h"
#include "hf/hf_config.h"
#include "hf/json_file.h"
#include "hf/safetensors.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reprise::fuzz::QuietLogging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    if (size > 0 && data[0] == 'C') {
      std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
      reprise::hf::Metadata metadata;
      reprise::hf::ReadConfig(reprise::hf::ParseJson(text, "config.json"), "config.json", "fuzz",
                              metadata);
      return 0;
    }
    auto tensors = reprise::hf::ParseSafetensors(data, size, "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& tensor : tensors) {
      if (tensor.data < data || tensor.data + tensor.num_bytes > data + size) __builtin_trap();
      for (size_t i = 0; i < tensor.num_bytes; ++i) sink = sink ^ tensor.data[i];
    }
  } catch (const reprise::Error&) {
  }
  return 0;
}
