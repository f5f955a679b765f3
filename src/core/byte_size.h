// Memory sizes as people write them in flags and environment variables, and back for logs.
#pragma once

#include <cstddef>
#include <string>

namespace reprise {

// "2GiB", "512MiB", "64KiB", "1.5G" (binary units; K/M/G/T alone also binary), "1GB"/"500MB"
// (decimal), or a plain byte count. Throws reprise::Error naming the text.
size_t ParseByteSize(const std::string& text);
// "2.00 GiB" and the like.
std::string FormatByteSize(size_t bytes);

}  // namespace reprise
