// docs/configuration.md is what `reprise configuration-doc` prints from the code's option table:
// a flag or environment variable added without regenerating the page fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "e2e/server_process.h"
#include "test_support.h"

namespace reprise::testing {
namespace {

TEST(ConfigurationDocTest, CommittedPageIsCurrent) {
  ProcessResult printed =
      RunToExit({REPRISE_BINARY, "configuration-doc"}, {}, std::chrono::seconds(30));
  ASSERT_EQ(printed.exit_code, 0) << printed.output;
  std::ifstream file(std::string(REPRISE_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(file) << "docs/configuration.md is missing: run scripts/update_docs.sh";
  std::stringstream committed;
  committed << file.rdbuf();
  EXPECT_TRUE(committed.str() == printed.output)
      << "docs/configuration.md is stale: run scripts/update_docs.sh and commit the result";
}

TEST(ConfigurationDocTest, ListsEveryCommandAndVariable) {
  ProcessResult printed =
      RunToExit({REPRISE_BINARY, "configuration-doc"}, {}, std::chrono::seconds(30));
  for (const char* expected :
       {"## `reprise serve`", "## `reprise demo`", "## `reprise bench`", "`--port`", "`8000`",
        "`-t,--threads`", "`--log-level`", "`SEQ_SIZE_PER_BLOCK`", "`NIM_ENABLE_KV_CACHE_REUSE`",
        "`XDG_CACHE_HOME`", "`REPRISE_CPU_TARGET`"}) {
    EXPECT_NE(printed.output.find(expected), std::string::npos) << expected;
  }
  // The hidden command documents the others, not itself.
  EXPECT_EQ(printed.output.find("reprise configuration-doc`\n"), std::string::npos);
}

}  // namespace
}  // namespace reprise::testing
