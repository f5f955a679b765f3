// Parses human memory sizes for flags such as --kv-cache-memory: "512MiB", "2GiB", "1.5G", "4096".
#pragma once

#include <cstddef>
#include <string>

namespace reprise::cli {

// Throws Error naming the text when it is not a size.
size_t ParseByteSize(const std::string& text);

}  // namespace reprise::cli
