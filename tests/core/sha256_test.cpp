#include "core/sha256.h"

#include <gtest/gtest.h>

namespace reprise {
namespace {

TEST(Sha256Test, MatchesKnownVector) {
  Sha256 hasher;
  hasher.Update("abc");
  EXPECT_EQ(ToHex(hasher.Finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace reprise
