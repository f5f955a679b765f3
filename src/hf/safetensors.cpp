#include "hf/safetensors.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/text.h"
#include "hf/json_file.h"

namespace reprise::hf {

namespace {

// safetensors' own limit on the JSON header; a larger length is a broken or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr size_t kMaxDims = 8;

struct DtypeInfo {
  const char* name;
  gguf::TensorType type;
  size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", gguf::TensorType::kF32, 4},
    {"F16", gguf::TensorType::kF16, 2},
    {"BF16", gguf::TensorType::kBF16, 2},
};

uint64_t HeaderLength(const uint8_t* data) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | data[i];  // little-endian
  return length;
}

SafetensorsTensor ParseEntry(const std::string& name, const nlohmann::json& entry,
                             const uint8_t* data, size_t data_size) {
  if (!entry.is_object()) {
    throw Error(fmt::format("tensor '{}' is {}, expected an object", name, entry.type_name()));
  }
  std::string what = fmt::format("tensor '{}'", name);
  SafetensorsTensor tensor;
  tensor.name = name;
  std::string dtype = GetString(entry, "dtype", what).value_or("");
  const DtypeInfo* info = nullptr;
  for (const DtypeInfo& candidate : kDtypes) {
    if (dtype == candidate.name) info = &candidate;
  }
  if (info == nullptr) {
    throw Error(
        fmt::format("tensor '{}' has dtype '{}', which Reprise does not load (F32, F16, "
                    "BF16 are loaded)",
                    name, dtype));
  }
  tensor.type = info->type;
  const nlohmann::json* shape = GetArray(entry, "shape", what);
  if (shape == nullptr) throw Error(fmt::format("tensor '{}' has no shape", name));
  if (shape->size() > kMaxDims) {
    throw Error(
        fmt::format("tensor '{}' has {} dimensions (at most {})", name, shape->size(), kMaxDims));
  }
  uint64_t elements = 1;
  for (const nlohmann::json& dim : *shape) {
    if (!dim.is_number_unsigned()) {
      throw Error(fmt::format("tensor '{}' has a shape entry that is not a count", name));
    }
    uint64_t size = dim.get<uint64_t>();
    if (size != 0 && elements > UINT64_MAX / size) {
      throw Error(fmt::format("tensor '{}' has a shape too large to address", name));
    }
    elements *= size;
    tensor.shape.push_back(size);
  }
  const nlohmann::json* offsets = GetArray(entry, "data_offsets", what);
  if (offsets == nullptr || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    throw Error(fmt::format("tensor '{}' needs data_offsets [begin, end]", name));
  }
  uint64_t begin = (*offsets)[0].get<uint64_t>();
  uint64_t end = (*offsets)[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    throw Error(fmt::format("tensor '{}' has data_offsets [{}, {}] outside the {} data bytes", name,
                            begin, end, data_size));
  }
  if (elements > UINT64_MAX / info->bytes || elements * info->bytes != end - begin) {
    throw Error(fmt::format(
        "tensor '{}': shape [{}] of {} needs {} bytes, data_offsets give {}", name,
        fmt::join(tensor.shape, ", "), dtype,
        elements > UINT64_MAX / info->bytes ? UINT64_MAX : elements * info->bytes, end - begin));
  }
  tensor.data = data + begin;
  tensor.num_bytes = static_cast<size_t>(end - begin);
  return tensor;
}

}  // namespace

std::vector<SafetensorsTensor> ParseSafetensors(const uint8_t* data, size_t size,
                                                std::string_view what) {
  try {
    if (size < 8) throw Error(fmt::format("file of {} bytes has no header length", size));
    const uint64_t header_size = HeaderLength(data);
    if (header_size > kMaxHeaderBytes || header_size > size - 8) {
      throw Error(fmt::format("header length {} is too long (file of {} bytes, limit {})",
                              header_size, size, kMaxHeaderBytes));
    }
    std::string_view text(reinterpret_cast<const char*>(data + 8), header_size);
    nlohmann::json header = ParseJson(text, "header");
    if (!header.is_object()) throw Error("header: not a JSON object");
    const uint8_t* tensor_data = data + 8 + header_size;
    const size_t data_size = size - 8 - header_size;
    std::vector<SafetensorsTensor> tensors;
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      tensors.push_back(ParseEntry(name, entry, tensor_data, data_size));
    }
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) {
      return a.data != b.data ? a.data < b.data : a.num_bytes < b.num_bytes;
    });
    for (size_t i = 1; i < tensors.size(); ++i) {
      const SafetensorsTensor& previous = tensors[i - 1];
      if (tensors[i].data < previous.data + previous.num_bytes) {
        throw Error(fmt::format("tensors '{}' and '{}' overlap", previous.name, tensors[i].name));
      }
    }
    return tensors;
  } catch (const Error& error) {
    // Names and values come from the file: nothing in them may reach a terminal raw.
    throw Error(EscapeBytes(fmt::format("{}: {}", what, error.what()), kMaxMessageBytes));
  }
}

SafetensorsFile SafetensorsFile::Open(const std::string& path, FileResidence residence) {
  SafetensorsFile file;
  // The header is read from the file's map; a private copy is made once its length is known, so
  // that the copy can start the data on a cache line (as GgufFile::Open does).
  file.file_ = MappedFile::Open(path, FileResidence::kMapped);
  file.tensors_ = ParseSafetensors(file.file_.data(), file.file_.size(), path);
  const auto data_start = static_cast<size_t>(8 + HeaderLength(file.file_.data()));
  if (residence == FileResidence::kPrivateCopy) {
    MappedFile copy = file.file_.PlacedCopy(data_start);
    for (SafetensorsTensor& tensor : file.tensors_) {
      tensor.data = copy.data() + (tensor.data - file.file_.data());
    }
    file.file_ = std::move(copy);
  }
  file.header_ = std::string_view(reinterpret_cast<const char*>(file.file_.data()), data_start);
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  for (const SafetensorsTensor& tensor : tensors_) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

}  // namespace reprise::hf
