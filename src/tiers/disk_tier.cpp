#include "tiers/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/log.h"

namespace reprise {
namespace {

namespace fs = std::filesystem;

constexpr const char* kExtension = ".kvb";
constexpr size_t kFingerprintChars = 16;  // of the root fingerprint's hex: the folder name

bool IsHex(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Closes a file descriptor on every path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports the error close found (a delayed write error), 0 when none.
  int Close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Writes all of the buffers; returns 0 or the errno.
int WriteAll(int fd, std::span<const uint8_t> first, std::span<const uint8_t> second) {
  iovec parts[2] = {{const_cast<uint8_t*>(first.data()), first.size()},
                    {const_cast<uint8_t*>(second.data()), second.size()}};
  int index = 0;
  while (index < 2) {
    const ssize_t written = ::writev(fd, parts + index, 2 - index);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    auto left = static_cast<size_t>(written);
    while (index < 2 && left >= parts[index].iov_len) {
      left -= parts[index].iov_len;
      ++index;
    }
    if (index < 2) {
      parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
      parts[index].iov_len -= left;
    }
  }
  return 0;
}

}  // namespace

DiskTier::DiskTier(const TierIdentity& identity, const DiskTierConfig& config)
    : identity_(identity), config_(config), made_dirs_(256, false) {
  stats_.name = name();
  stats_.capacity_bytes = config.capacity_bytes;
  root_ = (fs::path(config.path) / ToHex(identity.root_fingerprint).substr(0, kFingerprintChars))
              .string();
  Clock::time_point start = Clock::now();
  std::error_code error;
  fs::create_directories(root_, error);
  if (error) {
    std::lock_guard lock(mutex_);
    stats_.available = false;
    NoteError(fmt::format("cannot create {}", root_), error.value());
    return;
  }
  readable_ = true;
  writable_ = ::access(root_.c_str(), W_OK | X_OK) == 0;
  if (!writable_) {
    std::lock_guard lock(mutex_);
    NoteError(fmt::format("cannot write to {}; blocks found there are still read", root_), errno);
  }
  Rebuild();
  rebuild_.seconds = SecondsSince(start);
  spdlog::info(
      "disk tier {}: {} blocks ({:.1f} MiB) indexed in {:.3f} s; {} foreign, {} corrupt "
      "files",
      root_, rebuild_.blocks, static_cast<double>(bytes_) / (1 << 20), rebuild_.seconds,
      rebuild_.foreign, rebuild_.corrupt);
}

std::string DiskTier::BlockPath(const Digest& key) const {
  const std::string hex = ToHex(key);
  return root_ + "/" + hex.substr(0, 2) + "/" + hex + kExtension;
}

void DiskTier::Rebuild() {
  struct Found {
    TierBlockRef ref;
    uint64_t bytes;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  std::error_code error;
  // Other fingerprints' folders: another model or KV setting sharing DIR. Counted, left alone.
  for (const auto& entry : fs::directory_iterator(config_.path, error)) {
    const std::string folder = entry.path().filename().string();
    if (entry.path() == fs::path(root_) || folder.size() != kFingerprintChars || !IsHex(folder)) {
      continue;
    }
    std::error_code walk_error;
    for (const auto& file : fs::recursive_directory_iterator(entry.path(), walk_error)) {
      if (file.path().extension() == kExtension) ++rebuild_.foreign;
    }
  }
  stats_.foreign_blocks += static_cast<uint64_t>(rebuild_.foreign);
  const size_t max_header = BlockHeaderBytes(identity_.block_size);
  std::vector<uint8_t> header(max_header);
  for (const auto& prefix : fs::directory_iterator(root_, error)) {
    if (!prefix.is_directory()) continue;
    const std::string prefix_name = prefix.path().filename().string();
    std::error_code list_error;
    for (const auto& file : fs::directory_iterator(prefix.path(), list_error)) {
      const std::string path = file.path().string();
      const std::string filename = file.path().filename().string();
      if (filename.rfind(".tmp-", 0) == 0) {  // a write cut short by a crash
        ::unlink(path.c_str());
        continue;
      }
      Digest key;
      if (file.path().extension() != kExtension ||
          !ParseHexDigest(file.path().stem().string(), key) ||
          ToHex(key).substr(0, 2) != prefix_name) {
        continue;  // not ours: left alone
      }
      Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      struct stat status {};
      if (fd.get() < 0 || ::fstat(fd.get(), &status) != 0) continue;
      const ssize_t got = ::pread(fd.get(), header.data(), header.size(), 0);
      DecodedHeader decoded = DecodeBlockHeader(
          identity_,
          std::span<const uint8_t>(header.data(), got > 0 ? static_cast<size_t>(got) : 0));
      BlockCheck check = decoded.check;
      if (check == BlockCheck::kOk &&
          (decoded.meta.key != key ||
           static_cast<uint64_t>(status.st_size) != decoded.header_bytes + decoded.payload_bytes)) {
        check = decoded.meta.key != key ? BlockCheck::kWrongBlock : BlockCheck::kTruncated;
      }
      if (check != BlockCheck::kOk) {
        (IsForeign(check) ? rebuild_.foreign : rebuild_.corrupt) += 1;
        std::lock_guard lock(mutex_);
        Discard(key, path, check);
        continue;
      }
      found.push_back({RefOf(decoded.meta), static_cast<uint64_t>(status.st_size),
                       int64_t{status.st_mtim.tv_sec} * 1000000000 + status.st_mtim.tv_nsec});
    }
  }
  // Oldest first, so that the most recently written ends up most recently used.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  std::lock_guard lock(mutex_);
  // Not told to the listener: a snapshot of the tier (Blocks) tells what a start found.
  for (const Found& block : found) IndexLocked(block.ref, block.bytes);
  rebuild_.blocks = static_cast<int64_t>(index_.size());
  MakeRoomLocked(0);
}

size_t DiskTier::ProbablyHeld(std::span<const Digest> keys) const {
  std::lock_guard lock(mutex_);
  size_t held = 0;
  while (held < keys.size() && index_.count(keys[held]) != 0) ++held;
  return held;
}

bool DiskTier::ShouldStore(const Digest& key) const {
  std::lock_guard lock(mutex_);
  return writable_ && index_.count(key) == 0;
}

bool DiskTier::Store(const BlockMeta& meta, std::span<const uint8_t> payload) {
  const std::vector<uint8_t> header =
      EncodeBlockHeader(identity_, meta, Crc32c(payload.data(), payload.size()));
  const uint64_t bytes = header.size() + payload.size();
  const std::string path = BlockPath(meta.key);
  const size_t prefix = meta.key[0];
  {
    std::lock_guard lock(mutex_);
    if (!writable_ || index_.count(meta.key) != 0) return false;
    if (config_.capacity_bytes != 0 && bytes > config_.capacity_bytes) return false;
    MakeRoomLocked(bytes);
    if (!made_dirs_[prefix]) {
      std::error_code error;
      fs::create_directories(fs::path(path).parent_path(), error);
      if (error) {
        NoteError(fmt::format("cannot create {}", fs::path(path).parent_path().string()),
                  error.value());
        return false;
      }
      made_dirs_[prefix] = true;
    }
  }
  static std::atomic<uint64_t> serial{0};
  const std::string temporary = fmt::format(
      "{}/.tmp-{}-{}-{}", fs::path(path).parent_path().string(), ToHex(meta.key).substr(0, 16),
      ::getpid(), serial.fetch_add(1, std::memory_order_relaxed));
  int error_number = 0;
  {
    Fd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) {
      error_number = errno;
    } else {
      error_number = WriteAll(fd.get(), header, payload);
      if (error_number == 0 && config_.fsync && ::fdatasync(fd.get()) != 0) error_number = errno;
      const int close_error = fd.Close();
      if (error_number == 0) error_number = close_error;
    }
  }
  if (error_number == 0 && ::rename(temporary.c_str(), path.c_str()) != 0) error_number = errno;
  std::lock_guard lock(mutex_);
  if (error_number != 0) {
    ::unlink(temporary.c_str());
    if (error_number == ENOENT) made_dirs_[prefix] = false;  // someone removed the folder
    NoteError(fmt::format("cannot write {}", path), error_number);
    return false;
  }
  IndexLocked(RefOf(meta), bytes);
  if (config_.listener) config_.listener->OnTierBlockStored(name(), RefOf(meta));
  ++stats_.blocks_written;
  stats_.bytes_written += bytes;
  return true;
}

size_t DiskTier::LoadPrefix(std::span<const BlockMeta> blocks, std::span<uint8_t* const> dests) {
  size_t loaded = 0;
  while (loaded < blocks.size() && LoadOne(blocks[loaded], dests[loaded])) ++loaded;
  return loaded;
}

bool DiskTier::LoadOne(const BlockMeta& expected, uint8_t* dest) {
  {
    std::lock_guard lock(mutex_);
    auto found = index_.find(expected.key);
    if (found == index_.end()) return false;
    lru_.splice(lru_.begin(), lru_, found->second.lru);  // used now
  }
  const std::string path = BlockPath(expected.key);
  const size_t header_bytes = BlockHeaderBytes(expected.tokens.size());
  std::vector<uint8_t> header(header_bytes);
  uint8_t extra = 0;  // a byte beyond the block means the file is not what its header says
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error_number = errno;
    std::lock_guard lock(mutex_);
    ForgetLocked(expected.key);  // deleted behind our back: a miss
    if (error_number != ENOENT) NoteError(fmt::format("cannot open {}", path), error_number);
    return false;
  }
  iovec parts[3] = {{header.data(), header.size()}, {dest, identity_.block_bytes}, {&extra, 1}};
  const size_t wanted = header_bytes + identity_.block_bytes;
  size_t got = 0;
  while (true) {
    const ssize_t read = ::preadv(fd.get(), parts, 3, 0);
    if (read < 0 && errno == EINTR) continue;
    if (read < 0) {
      const int error_number = errno;
      std::lock_guard lock(mutex_);
      NoteError(fmt::format("cannot read {}", path), error_number);
      return false;
    }
    got = static_cast<size_t>(read);
    break;
  }
  // preadv of a regular file returns short only at its end.
  DecodedHeader decoded = DecodeBlockHeader(
      identity_, std::span<const uint8_t>(header.data(), std::min(got, header_bytes)));
  BlockCheck check = decoded.check;
  if (check == BlockCheck::kOk && got != wanted) check = BlockCheck::kTruncated;
  if (check == BlockCheck::kOk) {
    check = VerifyBlock(decoded, expected, std::span<const uint8_t>(dest, identity_.block_bytes));
  }
  std::lock_guard lock(mutex_);
  if (check != BlockCheck::kOk) {
    Discard(expected.key, path, check);
    return false;
  }
  ++stats_.blocks_read;
  stats_.bytes_read += wanted;
  return true;
}

bool DiskTier::Remove(const Digest& key) {
  std::lock_guard lock(mutex_);
  if (index_.count(key) == 0) return false;
  ::unlink(BlockPath(key).c_str());
  ForgetLocked(key);
  return true;
}

size_t DiskTier::Clear() {
  std::lock_guard lock(mutex_);
  const size_t dropped = index_.size();
  while (!lru_.empty()) {
    const Digest key = lru_.back();
    ::unlink(BlockPath(key).c_str());
    ForgetLocked(key);
  }
  return dropped;
}

size_t DiskTier::ClearOwned(const Digest& owner) {
  std::lock_guard lock(mutex_);
  std::vector<Digest> owned;
  for (const auto& [key, entry] : index_) {
    if (entry.ref.owner == owner) owned.push_back(key);
  }
  for (const Digest& key : owned) {
    ::unlink(BlockPath(key).c_str());
    ForgetLocked(key);
  }
  return owned.size();
}

std::vector<TierBlockRef> DiskTier::Blocks() const {
  std::lock_guard lock(mutex_);
  std::vector<TierBlockRef> blocks;
  blocks.reserve(index_.size());
  for (const auto& [key, entry] : index_) blocks.push_back(entry.ref);
  return blocks;
}

TierStats DiskTier::Stats() const {
  std::lock_guard lock(mutex_);
  TierStats stats = stats_;
  stats.blocks = static_cast<int64_t>(index_.size());
  stats.bytes = bytes_;
  return stats;
}

void DiskTier::IndexLocked(const TierBlockRef& ref, uint64_t bytes) {
  const Digest& key = ref.key;
  auto found = index_.find(key);
  if (found != index_.end()) {
    bytes_ -= found->second.bytes;
    found->second.bytes = bytes;
    found->second.ref = ref;
    bytes_ += bytes;
    lru_.splice(lru_.begin(), lru_, found->second.lru);
    return;
  }
  lru_.push_front(key);
  index_.emplace(key, Entry{bytes, ref, lru_.begin()});
  bytes_ += bytes;
}

void DiskTier::ForgetLocked(const Digest& key) {
  auto found = index_.find(key);
  if (found == index_.end()) return;
  if (config_.listener) config_.listener->OnTierBlockRemoved(name(), found->second.ref);
  bytes_ -= found->second.bytes;
  lru_.erase(found->second.lru);
  index_.erase(found);
}

void DiskTier::MakeRoomLocked(uint64_t incoming) {
  if (config_.capacity_bytes == 0) return;
  while (!lru_.empty() && bytes_ + incoming > config_.capacity_bytes) {
    const Digest victim = lru_.back();
    ::unlink(BlockPath(victim).c_str());
    ForgetLocked(victim);
    ++stats_.evictions;
  }
}

void DiskTier::NoteError(const std::string& what, int error_number) {
  ++stats_.errors;
  stats_.last_error = fmt::format("{}: {}", what, std::strerror(error_number));
  if (std::find(logged_errors_.begin(), logged_errors_.end(), error_number) !=
      logged_errors_.end()) {
    return;
  }
  logged_errors_.push_back(error_number);
  spdlog::warn("disk tier: {}; the server goes on without it (logged once per kind of error)",
               stats_.last_error);
}

void DiskTier::Discard(const Digest& key, const std::string& path, BlockCheck check) {
  ++(IsForeign(check) ? stats_.foreign_blocks : stats_.corrupt_blocks);
  if (std::find(logged_checks_.begin(), logged_checks_.end(), check) == logged_checks_.end()) {
    logged_checks_.push_back(check);
    spdlog::warn("disk tier: {} refused ({}), deleted; it is recomputed (logged once per kind)",
                 path, BlockCheckName(check));
  }
  ::unlink(path.c_str());
  ForgetLocked(key);
}

}  // namespace reprise
