// Logging goes through spdlog's default logger: the one piece of global mutable state we allow.
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

namespace reprise {

// Sets the level by name ("trace", "debug", "info", "warn", "error", "off"); unknown names are an
// Error. Logs go to stderr so that stdout stays for program output.
void ConfigureLogging(std::string_view level);

}  // namespace reprise
