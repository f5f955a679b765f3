// Argument checks of `reprise bench` and the --url parser.
#include "bench/options.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace reprise::bench {
namespace {

BenchOptions WithModel(const std::string& workload) {
  BenchOptions options;
  options.workload = workload;
  options.model = "model.gguf";
  return options;
}

void ExpectRejected(const BenchOptions& options, const std::string& fragment) {
  try {
    ValidateBenchOptions(options);
    ADD_FAILURE() << "accepted; expected an error naming '" << fragment << "'";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(BenchOptionsTest, AcceptsEveryWorkloadWithAModel) {
  for (const auto& name : BenchWorkloadNames()) {
    if (name == "side-channel" || name == "soak") continue;  // server benchmarks: below
    EXPECT_NO_THROW(ValidateBenchOptions(WithModel(name)));
  }
}

TEST(BenchOptionsTest, SecurityBenchmarksNeedAServer) {
  for (const char* name : {"side-channel", "soak"}) {
    EXPECT_THROW(ValidateBenchOptions(WithModel(name)), Error) << name;
    BenchOptions options;
    options.workload = name;
    options.url = "http://127.0.0.1:8080";
    EXPECT_NO_THROW(ValidateBenchOptions(options)) << name;
  }
}

TEST(BenchOptionsTest, KernelsNeedNoModel) {
  BenchOptions options;
  options.workload = "kernels";
  EXPECT_NO_THROW(ValidateBenchOptions(options));
  EXPECT_FALSE(WorkloadNeedsEngine("kernels"));
  EXPECT_TRUE(WorkloadNeedsEngine("doc"));
}

TEST(BenchOptionsTest, RejectsBadArguments) {
  ExpectRejected(WithModel("speed"), "unknown workload 'speed'");
  BenchOptions options = WithModel("doc");
  options.model.clear();
  ExpectRejected(options, "needs a model");
  options = WithModel("doc");
  options.make_model_shape = "135m";
  ExpectRejected(options, "not both");
  options = WithModel("doc");
  options.url = "http://127.0.0.1:8080";
  options.mmap_weights = true;
  ExpectRejected(options, "--mmap configures the in-process engine");
  options = WithModel("doc");
  options.repeat = 0;
  ExpectRejected(options, "--repeat");
  options = WithModel("doc");
  options.threads = -1;
  ExpectRejected(options, "--threads");
  options = WithModel("doc");
  options.max_batch_tokens = 0;
  ExpectRejected(options, "--max-batch-tokens");
  options = WithModel("concurrent");
  options.max_running_requests = 0;
  ExpectRejected(options, "--max-running-requests");
  options = WithModel("concurrent");
  options.schedule_policy = "priority";
  ExpectRejected(options, "--schedule-policy 'priority'");
  options = WithModel("multidoc");
  options.eviction_policy = "mru";
  ExpectRejected(options, "--eviction-policy 'mru'");
  options = WithModel("kernels");
  options.cpu_target = "neon";
  ExpectRejected(options, "--cpu-target");
}

TEST(BenchOptionsTest, UrlModeNeedsNoModelButNotKernels) {
  BenchOptions options;
  options.workload = "doc";
  options.url = "http://127.0.0.1:8080";
  EXPECT_NO_THROW(ValidateBenchOptions(options));
  options.workload = "all";
  EXPECT_NO_THROW(ValidateBenchOptions(options));
  options.workload = "kernels";
  ExpectRejected(options, "in process only");
  options.workload = "sched";
  ExpectRejected(options, "in process only");
  options.workload = "doc";
  options.url = "https://127.0.0.1:8080";
  ExpectRejected(options, "http://");
}

TEST(BenchOptionsTest, ParsesHttpUrls) {
  HostPort parsed = ParseHttpUrl("http://127.0.0.1:8080");
  EXPECT_EQ(parsed.host, "127.0.0.1");
  EXPECT_EQ(parsed.port, 8080);
  parsed = ParseHttpUrl("http://localhost/");
  EXPECT_EQ(parsed.host, "localhost");
  EXPECT_EQ(parsed.port, 80);
  EXPECT_THROW(ParseHttpUrl("http://localhost:80/v1"), Error);
  EXPECT_THROW(ParseHttpUrl("http://localhost:0"), Error);
  EXPECT_THROW(ParseHttpUrl("http://localhost:99999"), Error);
  EXPECT_THROW(ParseHttpUrl("http://localhost:80x"), Error);
  EXPECT_THROW(ParseHttpUrl("http://:80"), Error);
  EXPECT_THROW(ParseHttpUrl("127.0.0.1:80"), Error);
}

}  // namespace
}  // namespace reprise::bench
