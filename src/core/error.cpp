#include "core/error.h"

namespace reprise {

void ThrowCheckFailure(const char* condition, const char* file, int line,
                       const std::string& message) {
  throw InternalError(fmt::format("{}:{}: check failed: {}: {}", file, line, condition, message));
}

}  // namespace reprise
