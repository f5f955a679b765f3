// The `reprise` binary end to end: reference texts of the fixture models, tokenize, make-model,
// and one-line errors for bad files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace reprise {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
};

// Runs the reprise binary with `arguments` (already shell-quoted); stderr goes to a temp file.
CommandResult RunReprise(const std::string& arguments, std::string* err = nullptr) {
  std::string err_path = testing::ScratchPath("cli_stderr.txt");
  std::string command = std::string(REPRISE_BINARY) + " " + arguments + " 2>" + err_path;
  CommandResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t read;
  while ((read = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), read);
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (err != nullptr) {
    std::ifstream in(err_path);
    err->assign(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove(err_path);
  return result;
}

std::string Quote(const std::string& text) { return "'" + text + "'"; }

constexpr const char* kStories260KReference =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    "Lily's mom said";

constexpr const char* kTinyStories656KReference =
    "Once upon a time, a little girl named Lily lived in a small house with her mom, dad, and her "
    "dog, Spot, Spot, loved to play all day. One day, Lily saw a small bird on the ground. She "
    "picked it up and tried to reach the bird and see what it was.\nLily had an idea. She asked "
    "her mom if she could help the bird. Her mom said, \"Okay, let's go inside and see if you "
    "want a new bird.\" ";

// Q8_0 rounding changes the sixth generated token (see
// ModelReferenceTest.Q8_0DepartsFromF32WhereTheF32MarginIsTiny), so the Q8_0 file has its own
// reference, recorded from Reprise.
constexpr const char* kTinyStories656KQ8_0Reference =
    "Once upon a time, a little girl named Lily lived in a small house. She loved to eat yummy "
    "food. One day, she saw a small bird on the ground. The bird was sad because it could not eat "
    "it.\nLily wanted to help the bird. She tried to eat the food and get the food to reach the "
    "bird. The bird tried to eat the food and get the food to reach the bird. The bird was fresh "
    "and flew away.\nLily felt sad for the bird. She felt sad ";

void ExpectGenerates(const std::string& model, const std::string& expected) {
  std::string err;
  CommandResult result = RunReprise(
      "generate -m " + Quote(testing::Fixture(model)) + " -p 'Once upon a time' -n 64", &err);
  ASSERT_EQ(result.exit_code, 0) << err;
  EXPECT_EQ(result.out, expected + "\n") << err;
  EXPECT_NE(err.find("prompt tokens:"), std::string::npos) << err;
}

TEST(CliTest, Stories260KMatchesLlamaCppGreedyOutput) {
  REPRISE_REQUIRE_FIXTURES();
  ExpectGenerates("models/stories260K.gguf", kStories260KReference);
}

TEST(CliTest, TinyStories656KF32MatchesLlamaCppGreedyOutput) {
  REPRISE_REQUIRE_FIXTURES();
  ExpectGenerates("models/TinyStories-656K-f32.gguf", kTinyStories656KReference);
}

TEST(CliTest, TinyStories656KQ8_0MatchesItsRecordedReference) {
  REPRISE_REQUIRE_FIXTURES();
  ExpectGenerates("models/TinyStories-656K-q8_0.gguf", kTinyStories656KQ8_0Reference);
}

// A Hugging Face folder of the same weights: the GGUF's (and llama.cpp's) greedy text.
TEST(CliTest, TinyStories656KFolderMatchesLlamaCppGreedyOutput) {
  REPRISE_REQUIRE_FIXTURES();
  ExpectGenerates("hf/TinyStories-656K", kTinyStories656KReference);
}

TEST(CliTest, EveryModelCommandTakesAFolderAndRefusesABrokenOneInOneLine) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string folder = Quote(testing::Fixture("hf/TinyStories-656K"));
  const std::string gguf = Quote(testing::Fixture("models/TinyStories-656K-f32.gguf"));
  EXPECT_EQ(RunReprise("tokenize -m " + folder + " 'Once upon a time, <|end_story|>'").out,
            RunReprise("tokenize -m " + gguf + " 'Once upon a time, <|end_story|>'").out);

  const std::string broken = testing::ScratchPath("broken_folder");
  std::filesystem::create_directories(broken);
  std::ofstream(broken + "/config.json") << "{\"model_type\": \"llama\"";
  const std::string messages = testing::ScratchPath("messages.json");
  std::ofstream(messages) << R"([{"role": "user", "content": "hi"}])";
  for (const std::string& command : std::vector<std::string>{
           "generate -p hi -m ", "tokenize hi -m ", "template --messages " + messages + " -m ",
           "serve --port 0 -m ", "bench prefill -m "}) {
    std::string err;
    CommandResult result = RunReprise(command + Quote(broken), &err);
    EXPECT_EQ(result.exit_code, 1) << command << err;
    // One error line naming the file (serve and bench log their settings first), nothing served.
    const size_t at = err.find("error: " + broken + "/config.json: bad JSON");
    ASSERT_NE(at, std::string::npos) << command << err;
    EXPECT_EQ(err.find('\n', at), err.size() - 1) << command << err;
    EXPECT_EQ(err.find("listening"), std::string::npos) << command << err;
  }
}

TEST(CliTest, TokenizePrintsIds) {
  REPRISE_REQUIRE_FIXTURES();
  CommandResult result =
      RunReprise("tokenize -m " + Quote(testing::Fixture("models/TinyStories-656K-f32.gguf")) +
                 " 'Once upon a time'");
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.out.rfind("1 ", 0), 0u) << result.out;  // BOS first
}

TEST(CliTest, TemplatePrintsTheRenderedPrompt) {
  REPRISE_REQUIRE_FIXTURES();
  std::string messages = testing::ScratchPath("messages.json");
  std::ofstream(messages) << R"([{"role": "user", "content": "Hi"}])";
  const std::string llama3 = "template -m " +
                             Quote(testing::Fixture("vocab/ggml-vocab-llama-bpe.gguf")) +
                             " --messages " + Quote(messages);
  CommandResult with_prompt = RunReprise(llama3);
  ASSERT_EQ(with_prompt.exit_code, 0);
  EXPECT_EQ(with_prompt.out,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // (This model's own template always ends with the assistant header; the built-in one obeys.)
  CommandResult without_prompt =
      RunReprise(llama3 + " --chat-template llama3 --no-generation-prompt");
  EXPECT_EQ(without_prompt.out,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");

  // A model without a template: chatml, with the warning on stderr.
  std::string err;
  const std::string tiny = "template -m " +
                           Quote(testing::Fixture("models/TinyStories-656K-f32.gguf")) +
                           " --messages " + Quote(messages);
  CommandResult fallback = RunReprise(tiny, &err);
  EXPECT_EQ(fallback.out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_NE(err.find("--chat-template"), std::string::npos) << err;

  // --chat-template as text, and a template refusing the conversation.
  CommandResult text =
      RunReprise(tiny + " --chat-template '{% for m in messages %}[{{ m.content }}]{% endfor %}'");
  EXPECT_EQ(text.out, "[Hi]");
  std::ofstream(messages)
      << R"({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]})";
  CommandResult refused = RunReprise(tiny + " --chat-template llama2", &err);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(err.find("roles must alternate"), std::string::npos) << err;
  std::filesystem::remove(messages);
}

TEST(CliTest, MissingAndMalformedModelsGiveAOneLineErrorAndExitCode1) {
  std::string err;
  CommandResult missing = RunReprise("generate -m /nonexistent/model.gguf -p hi", &err);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(err.find("/nonexistent/model.gguf"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;

  std::string bad_path = testing::ScratchPath("bad.gguf");
  {
    std::ofstream out(bad_path, std::ios::binary);
    out << "GGUF\x03\x00\x00\x00garbage";
  }
  CommandResult malformed = RunReprise("generate -m " + Quote(bad_path) + " -p hi", &err);
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  std::filesystem::remove(bad_path);
}

TEST(CliTest, MakeModelRoundTripsAndGeneratesDeterministically) {
  REPRISE_REQUIRE_FIXTURES();
  std::string path = testing::ScratchPath("made.gguf");
  std::string err;
  CommandResult made = RunReprise("make-model --shape tiny --vocab-from " +
                                      Quote(testing::Fixture("vocab/ggml-vocab-llama-spm.gguf")) +
                                      " --type q8_0 -o " + Quote(path),
                                  &err);
  ASSERT_EQ(made.exit_code, 0) << err;
  std::string generate = "generate -m " + Quote(path) + " -p 'Hello there' -n 12 --ignore-eos";
  CommandResult first = RunReprise(generate, &err);
  ASSERT_EQ(first.exit_code, 0) << err;
  CommandResult second = RunReprise(generate);
  EXPECT_EQ(first.out, second.out);
  EXPECT_GT(first.out.size(), std::string("Hello there\n").size());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace reprise
