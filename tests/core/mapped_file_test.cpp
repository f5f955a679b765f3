// MappedFile holds a file's bytes either as the file's own map or as a private copy in
// huge-page memory; readers see the same bytes either way.
#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_support.h"

namespace reprise {
namespace {

std::string WriteFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = testing::ScratchPath(name);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return path;
}

constexpr FileResidence kResidences[] = {FileResidence::kMapped, FileResidence::kPrivateCopy};

TEST(MappedFileTest, BothResidencesHoldTheFilesBytes) {
  // Past one 2 MiB page and not a whole number of them: the copy's mapping is rounded up.
  std::vector<uint8_t> bytes((size_t{3} << 20) + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  const std::string path = WriteFile("bytes.bin", bytes);
  for (FileResidence residence : kResidences) {
    MappedFile file = MappedFile::Open(path, residence);
    ASSERT_EQ(file.size(), bytes.size());
    EXPECT_EQ(file.path(), path);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), file.data()));
    // A moved file keeps its bytes; the one moved from holds none.
    MappedFile moved = std::move(file);
    EXPECT_EQ(file.data(), nullptr);
    EXPECT_EQ(moved.size(), bytes.size());
    EXPECT_EQ(moved.data()[bytes.size() - 1], bytes.back());
    MappedFile assigned;
    assigned = std::move(moved);
    EXPECT_EQ(assigned.data()[0], bytes[0]);
  }
}

TEST(MappedFileTest, APrivateCopyStartsTheNamedOffsetOnACacheLine) {
  std::vector<uint8_t> bytes(5000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 3);
  const std::string path = WriteFile("placed.bin", bytes);
  for (size_t line_offset :
       {size_t{0}, size_t{1}, size_t{32}, size_t{63}, size_t{64}, size_t{4131}}) {
    MappedFile file = MappedFile::Open(path, FileResidence::kPrivateCopy, line_offset);
    ASSERT_EQ(file.size(), bytes.size());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(file.data() + line_offset) % 64, 0u) << line_offset;
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), file.data())) << line_offset;
    // Rewrite edits the placed bytes, and only those.
    EXPECT_TRUE(file.Rewrite([&](std::span<uint8_t> edit) {
      ASSERT_EQ(edit.size(), bytes.size());
      EXPECT_EQ(edit.data(), file.data());
      edit[line_offset % edit.size()] ^= 0xFF;
    }));
    EXPECT_EQ(file.data()[line_offset % bytes.size()],
              static_cast<uint8_t>(bytes[line_offset % bytes.size()] ^ 0xFF));
  }
}

TEST(MappedFileTest, AnEmptyFileHoldsNothing) {
  const std::string path = WriteFile("empty.bin", {});
  for (FileResidence residence : kResidences) {
    MappedFile file = MappedFile::Open(path, residence);
    EXPECT_EQ(file.size(), 0u);
    EXPECT_EQ(file.data(), nullptr);
  }
}

TEST(MappedFileTest, MissingFilesAndFoldersAreErrorsNamingThePath) {
  const std::string missing = testing::ScratchPath("no_such_file.bin");
  for (FileResidence residence : kResidences) {
    try {
      MappedFile::Open(missing, residence);
      FAIL() << "a missing file opened";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(missing), std::string::npos) << error.what();
    }
    EXPECT_THROW(MappedFile::Open(testing::ScratchDir().string(), residence), Error);
  }
}

}  // namespace
}  // namespace reprise
