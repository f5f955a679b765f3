// GGUF metadata built in memory from a model folder's JSON files: what the GGUF readers of model
// hyper-parameters and vocabularies (model/, tokenizer/) read, so that they serve both formats.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_value.h"

namespace reprise::hf {

using Metadata = std::map<std::string, gguf::Value>;

void PutString(Metadata& metadata, const std::string& key, std::string value);
void PutUint32(Metadata& metadata, const std::string& key, uint32_t value);
void PutFloat32(Metadata& metadata, const std::string& key, float value);
void PutBool(Metadata& metadata, const std::string& key, bool value);
void PutStrings(Metadata& metadata, const std::string& key, std::vector<std::string> values);
void PutFloats(Metadata& metadata, const std::string& key, const std::vector<float>& values);
void PutInt32s(Metadata& metadata, const std::string& key, const std::vector<int32_t>& values);

}  // namespace reprise::hf
