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

namespace {

constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kLineBytes = 64;

// The file's bytes read into fresh private memory (rounded up to whole huge pages) from `shift`
// bytes past its start, then made read-only. Returns the mapping's start. Throws Error with the
// OS reason.
uint8_t* CopyIntoHugePages(int fd, const std::string& path, size_t size, size_t shift,
                           size_t& mapped_bytes) {
  mapped_bytes = (shift + size + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* address =
      ::mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (address == MAP_FAILED) {
    throw Error(fmt::format("cannot allocate {} bytes to hold '{}': {}", mapped_bytes, path,
                            std::strerror(errno)));
  }
#if defined(MADV_HUGEPAGE)
  ::madvise(address, mapped_bytes, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
#endif
#if defined(MADV_POPULATE_WRITE)
  // Faulting the pages in first, in one call, took 0.04 s for 126 MiB; faulted one by one by the
  // read below, 0.04 to 0.3 s. Only a speed-up: the read faults in whatever this leaves out.
  ::madvise(address, mapped_bytes, MADV_POPULATE_WRITE);
#endif
  auto* bytes = static_cast<uint8_t*>(address) + shift;
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string reason = n < 0 ? std::strerror(errno) : "the file shrank while read";
      ::munmap(address, mapped_bytes);
      throw Error(fmt::format("cannot read '{}': {}", path, reason));
    }
    done += static_cast<size_t>(n);
  }
  ::mprotect(address, mapped_bytes, PROT_READ);  // the same contract as a read-only map
  return static_cast<uint8_t*>(address);
}

}  // namespace

MappedFile MappedFile::Open(const std::string& path, FileResidence residence, size_t line_offset) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  struct stat info {};
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
  if (file.size_ > 0 && residence == FileResidence::kPrivateCopy) {
    try {
      const size_t shift = (kLineBytes - line_offset % kLineBytes) % kLineBytes;
      file.mapping_ = CopyIntoHugePages(fd, path, file.size_, shift, file.mapped_bytes_);
      file.data_ = file.mapping_ + shift;
      file.private_copy_ = true;
    } catch (...) {
      ::close(fd);
      throw;
    }
  } else if (file.size_ > 0) {
    void* address = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      throw Error(fmt::format("cannot map '{}': {}", path, std::strerror(saved)));
    }
    file.mapping_ = static_cast<uint8_t*>(address);
    file.data_ = file.mapping_;
    file.mapped_bytes_ = file.size_;
  }
  ::close(fd);
  return file;
}

MappedFile MappedFile::PlacedCopy(size_t line_offset) const {
  MappedFile copy = Open(path_, FileResidence::kPrivateCopy, line_offset);
  if (copy.size_ != size_) {
    throw Error(
        fmt::format("'{}' changed size while read ({} -> {} bytes)", path_, size_, copy.size_));
  }
  return copy;
}

void MappedFile::Release() {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
  mapping_ = nullptr;
  data_ = nullptr;
}

MappedFile::~MappedFile() { Release(); }

bool MappedFile::Rewrite(const std::function<void(std::span<uint8_t> bytes)>& edit) {
  if (!private_copy_ || data_ == nullptr) return false;
  // Our own anonymous mapping, made read-only at Open.
  if (::mprotect(mapping_, mapped_bytes_, PROT_READ | PROT_WRITE) != 0) {
    throw Error(
        fmt::format("cannot make the copy of '{}' writable: {}", path_, std::strerror(errno)));
  }
  struct ReadOnlyAgain {
    uint8_t* bytes;
    size_t n;
    ~ReadOnlyAgain() { ::mprotect(bytes, n, PROT_READ); }
  } again{mapping_, mapped_bytes_};
  edit(std::span<uint8_t>(const_cast<uint8_t*>(data_), size_));
  return true;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      private_copy_(std::exchange(other.private_copy_, false)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    mapping_ = std::exchange(other.mapping_, nullptr);
    private_copy_ = std::exchange(other.private_copy_, false);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

}  // namespace reprise
