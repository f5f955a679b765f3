// `reprise bench` end to end on a tiny random-weight model: exit codes, messages for bad
// arguments, and the shape of the JSON and SVG it writes. Checks structure, never timings.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "test_support.h"

namespace reprise {
namespace {

struct BenchRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

BenchRun RunBench(const std::string& arguments) {
  const std::filesystem::path err_path = testing::ScratchDir() / "bench_stderr.txt";
  std::string command = std::string(REPRISE_BINARY) + " --log-level warn bench " + arguments +
                        " 2>" + err_path.string();
  BenchRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.out.append(buffer, read);
  int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  run.err.assign(std::istreambuf_iterator<char>(in), {});
  std::filesystem::remove(err_path);
  return run;
}

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(BenchCommandTest, BadArgumentsFailWithOneLine) {
  BenchRun run = RunBench("doc");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("needs a model"), std::string::npos) << run.err;
  run = RunBench("speed -m x.gguf");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("unknown workload 'speed'"), std::string::npos) << run.err;
  run = RunBench("kernels --url http://127.0.0.1:9");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("in process only"), std::string::npos) << run.err;
  run = RunBench("doc -m /nonexistent/model.gguf --quick");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("reprise: error:"), std::string::npos) << run.err;
}

TEST(BenchCommandTest, UnreachableUrlIsAnError) {
  BenchRun run = RunBench("prefill --url http://127.0.0.1:9 --quick");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("cannot reach http://127.0.0.1:9"), std::string::npos) << run.err;
}

// Every engine workload on the tiny model with --quick: tables on stdout, and JSON and SVG whose
// shape the lead's scripts can rely on.
TEST(BenchCommandTest, EngineWorkloadsWriteTablesJsonAndSvg) {
  REPRISE_REQUIRE_FIXTURES();
  const auto dir = testing::ScratchDir() / "bench";
  std::filesystem::create_directories(dir);
  const std::string vocab = testing::Fixture("vocab/ggml-vocab-llama-bpe.gguf");
  const std::set<std::string> workloads = {"prefill",  "decode", "doc",        "chat",
                                           "multidoc", "unique", "concurrent", "sched"};
  for (const auto& workload : workloads) {
    const auto json_path = dir / (workload + ".json");
    const auto svg_path = dir / (workload + ".svg");
    BenchRun run = RunBench(workload + " --make-model tiny --type q8_0 --vocab-from '" + vocab +
                            "' --quick --repeat 1 -t 2 --json '" + json_path.string() +
                            "' --chart '" + svg_path.string() + "'");
    ASSERT_EQ(run.exit_code, 0) << workload << ": " << run.err;
    EXPECT_NE(run.out.find("[" + workload + "]"), std::string::npos) << run.out;
    EXPECT_NE(run.err.find("[bench] " + workload + " done"), std::string::npos) << run.err;

    nlohmann::json report = nlohmann::json::parse(Slurp(json_path));
    EXPECT_EQ(report["tool"], "reprise bench");
    EXPECT_EQ(report["settings"]["workload"], workload);
    EXPECT_EQ(report["settings"]["quick"], true);
    EXPECT_TRUE(report["machine"].contains("cpu"));
    ASSERT_EQ(report["workloads"].size(), 1u);
    const auto& result = report["workloads"][0];
    EXPECT_EQ(result["name"], workload);
    ASSERT_FALSE(result["tables"].empty()) << workload;
    for (const auto& table : result["tables"]) {
      ASSERT_FALSE(table["rows"].empty()) << workload << " " << table["title"];
      for (const auto& row : table["rows"]) EXPECT_EQ(row.size(), table["columns"].size());
    }
    ASSERT_FALSE(result["figures"].empty()) << workload;
    for (const auto& [name, figure] : result["figures"].items()) {
      EXPECT_TRUE(figure.contains("value")) << name;
      EXPECT_TRUE(figure.contains("unit")) << name;
    }
    const std::string svg = Slurp(svg_path);
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << workload;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << workload;
  }
  // Figures each workload must report.
  auto figures = [&](const std::string& workload) {
    return nlohmann::json::parse(Slurp(dir / (workload + ".json")))["workloads"][0]["figures"];
  };
  EXPECT_TRUE(figures("decode").contains("decode_64_tok_s"));
  EXPECT_GT(figures("decode")["decode_64_read_share"]["value"].get<double>(), 0);
  EXPECT_TRUE(figures("doc").contains("warm_over_question_alone"));
  EXPECT_TRUE(figures("unique").contains("cache_cost_percent"));
  EXPECT_TRUE(figures("unique").contains("cache_cost_ci_high_percent"));
  EXPECT_TRUE(figures("unique").contains("cache_bookkeeping_us"));
  EXPECT_TRUE(figures("concurrent").contains("ttft_p99_ms"));
  EXPECT_TRUE(figures("sched").contains("sched_share_percent"));
  EXPECT_TRUE(figures("multidoc").contains("ttft_vs_memory_warm_4_docs"));
  // The doc's warm questions reuse the document.
  auto doc = nlohmann::json::parse(Slurp(dir / "doc.json"))["workloads"][0]["tables"][0]["rows"];
  EXPECT_GT(doc[1][2].get<double>(), 0.8 * doc[1][1].get<double>());
  std::filesystem::remove_all(dir);
}

// Each conversation's later turns are each followed by their new tokens alone, so that a turn's
// ratio is the median of pairs measured back to back (one pair per turn read as noise).
TEST(BenchCommandTest, ChatPairsEveryConversationsTurnsWithTheirNewTokensAlone) {
  REPRISE_REQUIRE_FIXTURES();
  const auto json_path = testing::ScratchDir() / "chat-pairs.json";
  const std::string vocab = testing::Fixture("vocab/ggml-vocab-llama-bpe.gguf");
  BenchRun run = RunBench("chat --make-model tiny --type q8_0 --vocab-from '" + vocab +
                          "' --quick --repeat 2 -t 2 --json '" + json_path.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Warm-up, 2 x 8 turns, 2 x 7 turns alone, 8 turns with reuse off.
  EXPECT_NE(run.err.find("[bench] chat: 39 steps"), std::string::npos) << run.err;
  size_t pairs = 0;
  for (size_t at = run.err.find("turn 2: its new tokens alone"); at != std::string::npos;
       at = run.err.find("turn 2: its new tokens alone", at + 1)) {
    ++pairs;
  }
  EXPECT_EQ(pairs, 2u) << run.err;
  const auto result = nlohmann::json::parse(Slurp(json_path))["workloads"][0];
  const auto& rows = result["tables"][0]["rows"];
  ASSERT_EQ(rows.size(), 8u);
  for (size_t turn = 1; turn < rows.size(); ++turn) {
    EXPECT_GT(rows[turn][7].get<double>(), 0) << "turn " << turn + 1;  // new tokens alone (ms)
    EXPECT_GT(rows[turn][8].get<double>(), 0) << "turn " << turn + 1;  // TTFT / new alone
  }
  EXPECT_TRUE(result["figures"].contains("later_turns_over_new_tokens_alone"));
  std::filesystem::remove(json_path);
}

// multidoc takes the budget it is given and a disk tier, which it clears before each row, so that
// round 1 is cold even on a folder an earlier run filled.
TEST(BenchCommandTest, MultidocHonoursTheMemoryBudgetAndTheDiskTier) {
  REPRISE_REQUIRE_FIXTURES();
  const auto dir = testing::ScratchDir() / "multidoc-disk";
  std::filesystem::remove_all(dir);
  const auto json_path = testing::ScratchDir() / "multidoc-disk.json";
  const std::string vocab = testing::Fixture("vocab/ggml-vocab-llama-bpe.gguf");
  for (int run_index = 0; run_index < 2; ++run_index) {
    BenchRun run = RunBench("multidoc --make-model tiny --type q8_0 --vocab-from '" + vocab +
                            "' --quick -t 2 --kv-cache-memory 3MiB --kv-disk-path '" +
                            dir.string() + "' --json '" + json_path.string() + "'");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.out.find("KV budget 3.0 MiB"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("disk tier " + dir.string()), std::string::npos) << run.out;
    auto rows = nlohmann::json::parse(Slurp(json_path))["workloads"][0]["tables"][0]["rows"];
    for (const auto& row : rows) {
      EXPECT_LT(row[2].get<double>(), 10.0) << "round 1 is cold, run " << run_index;
      EXPECT_GT(row[3].get<double>(), 30.0) << "later rounds reuse, run " << run_index;
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(json_path);
}

// The small real models have 512-token contexts: the document shrinks to fit, and a workload
// that cannot fit at all says so.
TEST(BenchCommandTest, DocFitsASmallContext) {
  REPRISE_REQUIRE_FIXTURES();
  const auto json_path = testing::ScratchDir() / "doc512.json";
  BenchRun run = RunBench("doc -m '" + testing::Fixture("models/TinyStories-656K-f32.gguf") +
                          "' --quick --repeat 1 -t 2 --json '" + json_path.string() + "'");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("to fit the model's context of 512 tokens"), std::string::npos) << run.err;
  auto rows = nlohmann::json::parse(Slurp(json_path))["workloads"][0]["tables"][0]["rows"];
  for (const auto& row : rows) EXPECT_LT(row[1].get<double>(), 512);
  std::filesystem::remove(json_path);
}

}  // namespace
}  // namespace reprise
