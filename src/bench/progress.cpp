#include "bench/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace reprise::bench {

namespace {

int TerminalWidth(std::FILE* out) {
  winsize size{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 20) return size.ws_col;
  return 100;
}

}  // namespace

BenchProgress::BenchProgress(std::FILE* out, Mode mode) : out_(out), mode_(mode) {
  if (mode_ == Mode::kAuto) mode_ = ::isatty(::fileno(out)) ? Mode::kBar : Mode::kLines;
}

std::string BenchProgress::BarLine(const std::string& workload, int done, int total,
                                   const std::string& what, double elapsed_seconds, int width) {
  total = std::max(total, 1);
  done = std::clamp(done, 0, total);
  constexpr int kBarCells = 20;
  int filled = done * kBarCells / total;
  std::string line =
      fmt::format("[{}] [{}{}] {:>3}/{:<3} {:6.1f}s  {}", workload, std::string(filled, '#'),
                  std::string(kBarCells - filled, '-'), done, total, elapsed_seconds, what);
  if (width > 0 && static_cast<int>(line.size()) > width) line.resize(width);
  return line;
}

void BenchProgress::Begin(const std::string& workload, int total_steps) {
  std::lock_guard lock(mutex_);
  workload_ = workload;
  total_ = std::max(total_steps, 1);
  done_ = 0;
  started_ = Clock::now();
  if (mode_ == Mode::kLines) std::fprintf(out_, "[bench] %s: %d steps\n", workload.c_str(), total_);
  if (mode_ == Mode::kBar) Draw("starting");
}

void BenchProgress::Step(const std::string& what) {
  std::lock_guard lock(mutex_);
  ++done_;
  total_ = std::max(total_, done_);
  if (mode_ == Mode::kLines) {
    std::fprintf(out_, "[bench] %s %d/%d (%.1fs): %s\n", workload_.c_str(), done_, total_,
                 SecondsSince(started_), what.c_str());
    std::fflush(out_);
  } else if (mode_ == Mode::kBar) {
    // The bar shows the steps finished; the step now running is named.
    Draw(what);
  }
}

void BenchProgress::End() {
  std::lock_guard lock(mutex_);
  if (mode_ == Mode::kLines) {
    std::fprintf(out_, "[bench] %s done in %.1fs\n", workload_.c_str(), SecondsSince(started_));
  } else if (mode_ == Mode::kBar) {
    done_ = total_ + 1;
    Draw("done");
    std::fputc('\n', out_);
  }
  std::fflush(out_);
}

void BenchProgress::Draw(const std::string& what) {
  std::string line =
      BarLine(workload_, done_ - 1, total_, what, SecondsSince(started_), TerminalWidth(out_) - 1);
  std::fprintf(out_, "\r\033[K%s", line.c_str());
  std::fflush(out_);
}

}  // namespace reprise::bench
