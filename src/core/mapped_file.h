// A read-only view of a whole file's bytes: the file's own memory map (the bytes stay in the
// page cache, shared with other processes), or a private copy in huge-page memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace reprise {

// Where a MappedFile's bytes live.
enum class FileResidence {
  // The file's memory map: nothing is read until used, and processes share the pages.
  kMapped,
  // A copy read in at Open into private memory the kernel is asked to back with 2 MiB pages
  // (transparent huge pages, where enabled). Decode streams every weight once per token: from a
  // file map, every 4 KiB of it is a TLB miss and a page the hardware prefetcher stops at.
  kPrivateCopy,
};

class MappedFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened, mapped or
  // read. A private copy is placed so that the file's byte at `line_offset` starts a 64-byte
  // cache line (a GGUF file's data section: 512-bit loads that cross a line cost a second
  // access, and files align their tensors to 32 bytes only); a file's map starts on a page.
  static MappedFile Open(const std::string& path, FileResidence residence = FileResidence::kMapped,
                         size_t line_offset = 0);

  // A private copy of the same file, placed as Open places one for `line_offset`: for a reader
  // that learns where the data starts by parsing this open (a file's map) first. Throws Error
  // as Open does, and when the file's size has changed since this one was opened.
  MappedFile PlacedCopy(size_t line_offset) const;

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Runs edit on a private copy's bytes, writable while it runs (read-only again after, also
  // when it throws), and returns true. A file's map is shared with the page cache and is never
  // written: returns false without running edit.
  bool Rewrite(const std::function<void(std::span<uint8_t> bytes)>& edit);

 private:
  void Release();

  const uint8_t* data_ = nullptr;
  uint8_t* mapping_ = nullptr;  // where the mapping starts: data_, or a private copy's base
  bool private_copy_ = false;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // of the mapping (a private copy rounds its placement up)
  std::string path_;
};

}  // namespace reprise
