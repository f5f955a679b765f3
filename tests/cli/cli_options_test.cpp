// The `reprise` command line itself: --log-level on either side of the subcommand, defaults in
// --help, `serve -t`, and `serve` refusing a bad model file before it says it is listening.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "e2e/server_process.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

ProcessResult Reprise(std::vector<std::string> args) {
  args.insert(args.begin(), REPRISE_BINARY);
  return RunToExit(std::move(args), CleanServeEnvironment({}), std::chrono::seconds(60));
}

TEST(CliOptionsTest, LogLevelIsAcceptedBeforeAndAfterTheSubcommand) {
  for (auto args : {std::vector<std::string>{"--log-level", "bogus", "tokenize", "-m", "x", "t"},
                    std::vector<std::string>{"tokenize", "-m", "x", "t", "--log-level", "bogus"}}) {
    ProcessResult result = Reprise(args);
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find("unknown log level 'bogus'"), std::string::npos) << result.output;
  }
  // A valid level after the subcommand is parsed, not refused: the run goes on to the (missing)
  // model file.
  ProcessResult after =
      Reprise({"tokenize", "-m", "/nonexistent/x.gguf", "t", "--log-level", "off"});
  EXPECT_EQ(after.exit_code, 1) << after.output;
  EXPECT_NE(after.output.find("/nonexistent/x.gguf"), std::string::npos) << after.output;
}

TEST(CliOptionsTest, HelpShowsDefaults) {
  ProcessResult serve = Reprise({"serve", "--help"});
  EXPECT_EQ(serve.exit_code, 0) << serve.output;
  for (const char* shown :
       {"--port INT=8000", "--host TEXT=127.0.0.1", "--block-size INT=16", "-t,--threads INT=0",
        "--eviction-policy TEXT=scan-resistant", "--max-body-size TEXT=16MiB"}) {
    EXPECT_NE(serve.output.find(shown), std::string::npos) << shown << "\n" << serve.output;
  }
  ProcessResult generate = Reprise({"generate", "--help"});
  EXPECT_NE(generate.output.find("--block-size INT=16"), std::string::npos) << generate.output;
  ProcessResult top = Reprise({"--help"});
  EXPECT_NE(top.output.find("--log-level TEXT=info"), std::string::npos) << top.output;
}

TEST(CliOptionsTest, ServeChecksTheModelBeforeListening) {
  std::filesystem::path garbage = ScratchDir() / "garbage.gguf";
  std::ofstream(garbage) << "this is not a GGUF file";
  for (std::string model : {std::string("/nonexistent/model.gguf"), garbage.string()}) {
    ProcessResult result = Reprise({"serve", "--port", "0", "-t", "1", "-m", model});
    EXPECT_EQ(result.exit_code, 1) << result.output;
    EXPECT_NE(result.output.find(model), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("listening"), std::string::npos) << result.output;
  }
  std::filesystem::remove(garbage);
}

}  // namespace
}  // namespace reprise::testing
