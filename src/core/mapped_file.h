// A read-only memory map of a whole file (model weights stay in the page cache, not copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace reprise {

class MappedFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened or mapped.
  static MappedFile Open(const std::string& path);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace reprise
