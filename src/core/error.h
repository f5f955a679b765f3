// Errors: `Error` for bad input and I/O (reaches the user as a message), REPRISE_CHECK for
// programmer errors (a broken invariant; throws so a server thread can report it, never aborts).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace reprise {

// Bad input, a bad file, an unavailable resource: the message is meant for the user.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A broken internal invariant: a bug in Reprise, not in the user's input.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void ThrowCheckFailure(const char* condition, const char* file, int line,
                                    const std::string& message);

}  // namespace reprise

#define REPRISE_CHECK(condition, ...)                                                         \
  do {                                                                                        \
    if (!(condition)) [[unlikely]] {                                                          \
      ::reprise::ThrowCheckFailure(#condition, __FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
    }                                                                                         \
  } while (0)
