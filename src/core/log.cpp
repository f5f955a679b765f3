#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace reprise {

void ConfigureLogging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    throw Error(fmt::format("unknown log level '{}'", level));
  }
  auto logger = spdlog::stderr_color_mt("reprise");
  spdlog::set_default_logger(logger);
  spdlog::set_level(parsed);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
}

}  // namespace reprise
