// Helpers shared by the test suites: where the fixtures are, and a skip when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace reprise::testing {

// ../shared/fixtures relative to the repository root (configurable with -DREPRISE_FIXTURES_DIR).
inline std::filesystem::path FixturesDir() { return REPRISE_FIXTURES_DIR; }

inline bool HaveFixtures() { return std::filesystem::is_directory(FixturesDir()); }

inline std::string Fixture(const std::string& relative) { return (FixturesDir() / relative).string(); }

}  // namespace reprise::testing

// Skips the current test, naming the folder it looked for, when the fixtures are not there.
#define REPRISE_REQUIRE_FIXTURES()                                                         \
  do {                                                                                     \
    if (!::reprise::testing::HaveFixtures()) {                                             \
      GTEST_SKIP() << "fixtures folder not found at " << ::reprise::testing::FixturesDir() \
                   << " (expected ../shared/fixtures beside the repository)";              \
    }                                                                                      \
  } while (0)
