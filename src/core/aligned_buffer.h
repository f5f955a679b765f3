// A move-only, 64-byte aligned, zero-initialised array: activations, KV storage, scratch.
#pragma once

#include <sys/mman.h>

#include <cstddef>
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
      void* address =
          ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (address == MAP_FAILED) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
      // Attention walks the KV pool block by block across the whole mapping: with 4 KiB pages
      // nearly every block is a TLB miss. Only a hint (kernels with THP off ignore it).
      ::madvise(address, bytes, MADV_HUGEPAGE);
#endif
      data_ = static_cast<T*>(address);
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
