#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace reprise {

MappedFile MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat info{};
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    throw Error(fmt::format("cannot stat '{}': {}", path, std::strerror(saved)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("'{}' is not a regular file", path));
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(info.st_size);
  if (file.size_ > 0) {
    void* address = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      throw Error(fmt::format("cannot map '{}': {}", path, std::strerror(saved)));
    }
    file.data_ = static_cast<const uint8_t*>(address);
  }
  ::close(fd);
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

}  // namespace reprise
