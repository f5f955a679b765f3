// A move-only, 64-byte aligned, zero-initialised array: activations, KV storage, scratch.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace reprise {

template <typename T>
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;
  // From this size on the memory comes from an anonymous mapping: the kernel hands out zeroed
  // pages on first touch, so a large buffer costs no memset and no resident memory until it is
  // used (the KV pool touches its pages at once; see BlockPool).
  static constexpr size_t kMapThreshold = size_t{1} << 20;
  // Mapped buffers start on a huge page (see Resize).
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  static constexpr size_t kPageBytes = 4096;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t count) { Resize(count); }
  ~AlignedBuffer() { Release(); }
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Discards the contents; the new buffer is zeroed.
  void Resize(size_t count) {
    Release();
    if (count == 0) return;
    size_t bytes = (count * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    if (bytes >= kMapThreshold) {
      // Mapped with a huge page's worth of slack, then trimmed to start on a 2 MiB boundary:
      // the kernel backs only whole aligned 2 MiB ranges with huge pages.
      bytes = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
      const size_t reserved = bytes + kHugePageBytes;
      void* address =
          ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (address == MAP_FAILED) throw std::bad_alloc();
      auto* start = static_cast<uint8_t*>(address);
      const size_t head =
          (kHugePageBytes - reinterpret_cast<uintptr_t>(start) % kHugePageBytes) % kHugePageBytes;
      if (head > 0) ::munmap(start, head);
      if (reserved - head > bytes) ::munmap(start + head + bytes, reserved - head - bytes);
      start += head;
#if defined(MADV_HUGEPAGE)
      // Attention walks the KV pool block by block across the whole mapping: with 4 KiB pages
      // nearly every block is a TLB miss; and a scratch panel sized for L2 spreads over L2 sets
      // as its 4 KiB pages' physical addresses fall. Only a hint (kernels with THP off ignore it).
      ::madvise(start, bytes, MADV_HUGEPAGE);
#endif
      data_ = reinterpret_cast<T*>(start);
      mapped_bytes_ = bytes;
    } else {
      data_ = static_cast<T*>(std::aligned_alloc(kAlignment, bytes));
      if (data_ == nullptr) throw std::bad_alloc();
      std::memset(static_cast<void*>(data_), 0, bytes);
    }
    size_ = count;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t index) { return data_[index]; }
  const T& operator[](size_t index) const { return data_[index]; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  void Release() {
    if (mapped_bytes_ > 0) {
      ::munmap(data_, mapped_bytes_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    size_ = 0;
    mapped_bytes_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // > 0 when the memory is an anonymous mapping
};

}  // namespace reprise
