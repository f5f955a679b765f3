// Helpers shared by the test suites: where the fixtures are, and a skip when they are absent.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace reprise::testing {

// A test's HTTP client may write to a socket the server has already closed (an early 4xx, a
// refused connection): the write must fail with EPIPE, not kill the test binary.
inline const bool kSigpipeIgnored = [] {
  std::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// ../shared/fixtures relative to the repository root (configurable with -DREPRISE_FIXTURES_DIR).
inline std::filesystem::path FixturesDir() { return REPRISE_FIXTURES_DIR; }

inline bool HaveFixtures() { return std::filesystem::is_directory(FixturesDir()); }

inline std::string Fixture(const std::string& relative) {
  return (FixturesDir() / relative).string();
}

// A folder for this test process's files (models it writes, logs of servers it starts), removed
// with everything in it when the process exits, so that test runs leave nothing in /tmp
// (kept when REPRISE_KEEP_TEST_FILES is set, to read a failed run's server logs).
inline const std::filesystem::path& ScratchDir() {
  struct Folder {
    std::filesystem::path path;
    Folder()
        : path(std::filesystem::temp_directory_path() /
               ("reprise_test_" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Folder() {
      if (std::getenv("REPRISE_KEEP_TEST_FILES") != nullptr) return;
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

// ScratchDir() / name, as a string.
inline std::string ScratchPath(const std::string& name) { return (ScratchDir() / name).string(); }

}  // namespace reprise::testing

// Skips the current test, naming the folder it looked for, when the fixtures are not there.
#define REPRISE_REQUIRE_FIXTURES()                                                         \
  do {                                                                                     \
    if (!::reprise::testing::HaveFixtures()) {                                             \
      GTEST_SKIP() << "fixtures folder not found at " << ::reprise::testing::FixturesDir() \
                   << " (expected ../shared/fixtures beside the repository)";              \
    }                                                                                      \
  } while (0)
