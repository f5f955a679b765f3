// The one place a model path is opened: a GGUF file, or a Hugging Face model folder
// (config.json, tokenizer.json, safetensors weights) presented as the same gguf::GgufFile, so
// that every reader of models (Model, Tokenizer, ModelConfig) and every command takes either.
#pragma once

#include <string>

#include "gguf/gguf_file.h"

namespace reprise {

// Throws Error naming the file (and the field or tensor) for a missing or malformed model.
// `residence`: where the files' bytes are held (Model copies its weights into huge-page memory;
// readers of metadata and vocabularies map them).
gguf::GgufFile OpenModelFile(const std::string& path,
                             FileResidence residence = FileResidence::kMapped);

namespace hf {

// A Hugging Face Llama-family folder as a GGUF model: tensors used in place from the safetensors
// files (model.safetensors, or the shards model.safetensors.index.json names; their bytes held as
// `residence` says) and renamed to GGUF names; only the Q and K projections are copied, their rows
// reordered from Hugging Face's rotary layout to the one the GGUF forward pass uses. Throws Error.
gguf::GgufFile OpenFolder(const std::string& dir, FileResidence residence = FileResidence::kMapped);

}  // namespace hf

}  // namespace reprise
