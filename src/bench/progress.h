// Progress of a long benchmark on stderr: a one-line bar redrawn in place when stderr is a
// terminal, plain lines otherwise (logs, CI). Safe to call from several client threads.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include "core/clock.h"

namespace reprise::bench {

class BenchProgress {
 public:
  enum class Mode { kAuto, kBar, kLines, kOff };
  // kAuto: kBar when `out` is a terminal, else kLines.
  explicit BenchProgress(std::FILE* out = stderr, Mode mode = Mode::kAuto);

  // Starts a workload of `total_steps` steps (the bar's 100%).
  void Begin(const std::string& workload, int total_steps);
  // Announces the next step ("cold question"); steps past the total widen the total.
  void Step(const std::string& what);
  // Ends the workload's line (the bar is left showing 100% and the elapsed time).
  void End();

  Mode mode() const { return mode_; }

  // "[doc] [#####-----]  5/10  12.3s  warm question 2", fitted into `width` columns.
  static std::string BarLine(const std::string& workload, int done, int total,
                             const std::string& what, double elapsed_seconds, int width);

 private:
  void Draw(const std::string& what);

  std::FILE* out_;
  Mode mode_;
  std::mutex mutex_;
  std::string workload_;
  int total_ = 0;
  int done_ = 0;
  Clock::time_point started_;
};

}  // namespace reprise::bench
