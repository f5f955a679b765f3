// The model of `reprise demo` and `reprise serve --demo`: a random-weight model of a real shape
// with the built-in vocabulary, made once and kept in the user's cache folder.
#pragma once

#include <string>

namespace reprise::cli {

// Said wherever the demo model is used: its answers are noise, its timings are real.
inline constexpr const char* kDemoWeightsNotice =
    "The demo model's weights are RANDOM: the text it writes is meaningless. The shape, the "
    "vocabulary and the work per token are real, so the timings and cached-token counts are what "
    "a trained model of this shape would show.";

// $XDG_CACHE_HOME/reprise, else $HOME/.cache/reprise. Throws Error when neither is set.
std::string DemoCacheDir();

// The path of the demo model of `shape` ("135m", or "tiny" for quick runs), made first when it is
// not in the cache folder yet (written under a temporary name and renamed, so an interrupted run
// leaves no half-written model). Says on stderr what it makes.
std::string EnsureDemoModel(const std::string& shape, int threads);

}  // namespace reprise::cli
