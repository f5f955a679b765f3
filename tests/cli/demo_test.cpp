// `reprise demo` and `make-model` with nothing but the binary: run from an empty folder with a
// fresh HOME (no fixtures, no vocabulary file), the demo makes its model once, says its weights
// are random, and prints the three scenarios with warm requests reusing cached tokens.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "e2e/server_process.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

// Runs `reprise ARGS` from an empty folder with HOME set to a fresh folder beside it.
class BareMachine {
 public:
  BareMachine() : root_(ScratchDir() / "bare") {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "home");
    std::filesystem::create_directories(root_ / "work");
  }
  ProcessResult Run(const std::string& args) const {
    std::string command =
        "cd '" + (root_ / "work").string() + "' && exec '" + REPRISE_BINARY + "' " + args;
    return RunToExit({"/bin/sh", "-c", command},
                     {{"HOME", (root_ / "home").string()}, {"XDG_CACHE_HOME", ""}},
                     std::chrono::seconds(300));
  }
  std::filesystem::path home() const { return root_ / "home"; }
  std::filesystem::path work() const { return root_ / "work"; }

 private:
  std::filesystem::path root_;
};

TEST(DemoTest, RunsTheThreeScenariosOnABareMachine) {
  BareMachine machine;
  ProcessResult first = machine.Run("demo --quick -t 1 --chart demo.svg");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string& out = first.output;
  EXPECT_NE(out.find("Making the demo model once"), std::string::npos) << out;
  EXPECT_NE(out.find("weights are RANDOM"), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(machine.home() / ".cache" / "reprise")) << out;
  // Each scenario: one cold row, then warm rows whose cached tokens are most of their prompt.
  for (const char* scenario : {"long document", "multi-turn chat", "task prompt"}) {
    std::regex row(std::string(scenario) +
                   R"(\s+[^|\n]*?\s+(\d+)\s+(\d+)\s+[0-9.]+\s+([0-9.]+|-))");
    int warm = 0;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), row); it != std::sregex_iterator();
         ++it) {
      long prompt = std::stol((*it)[1]);
      long cached = std::stol((*it)[2]);
      if ((*it)[3] == "-") {
        EXPECT_EQ(cached, 0) << scenario << " cold row: " << it->str();
      } else {
        ++warm;
        EXPECT_GT(cached, prompt / 2) << scenario << " warm row: " << it->str();
      }
    }
    EXPECT_GE(warm, 2) << scenario << "\n" << out;
  }
  EXPECT_TRUE(std::filesystem::file_size(machine.work() / "demo.svg") > 0);

  // The second run finds the model in the cache.
  ProcessResult second = machine.Run("demo --quick -t 1");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(second.output.find("Making the demo model once"), std::string::npos) << second.output;
}

TEST(DemoTest, MakeModelNeedsNoVocabularyFile) {
  BareMachine machine;
  ProcessResult made = machine.Run("make-model --shape tiny -o tiny.gguf");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ProcessResult ids = machine.Run("tokenize -m tiny.gguf --pieces 'Here is a table'");
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  EXPECT_NE(ids.output.find("' table'"), std::string::npos) << ids.output;
}

}  // namespace
}  // namespace reprise::testing
