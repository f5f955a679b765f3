#include "core/thread_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <utility>

namespace reprise {

namespace {
// Workers spin this many rounds before sleeping: a step of the engine issues kernels back to
// back, and a futex wake-up per kernel would cost more than the smaller kernels themselves.
constexpr int kSpinRounds = 20000;
// Spinning yields the core every so often, so that an oversubscribed machine (more runnable
// threads than cores) still lets the thread being waited for run.
constexpr int kRoundsPerYield = 64;

inline void Relax(int round) {
  if (round % kRoundsPerYield == kRoundsPerYield - 1) {
    std::this_thread::yield();
  } else {
    _mm_pause();
  }
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunShare(int share_index) {
  size_t units = (count_ + grain_ - 1) / grain_;
  size_t per_share = units / shares_;
  size_t extra = units % shares_;
  size_t first = share_index * per_share + std::min<size_t>(share_index, extra);
  size_t last = first + per_share + (static_cast<size_t>(share_index) < extra ? 1 : 0);
  size_t begin = std::min(first * grain_, count_);
  size_t end = std::min(last * grain_, count_);
  if (begin >= end) return;
  try {
    (*task_)(begin, end);
  } catch (...) {
    // A task's exception goes to ParallelFor's caller (the engine's fault boundary), never
    // out of a worker thread, where it would end the process.
    std::lock_guard lock(error_mutex_);
    if (error_ == nullptr) error_ = std::current_exception();
  }
}

void ThreadPool::ParallelFor(size_t count, RangeTask task, size_t grain) {
  if (count == 0) return;
  grain = std::max<size_t>(grain, 1);
  size_t units = (count + grain - 1) / grain;
  int shares = static_cast<int>(std::min<size_t>(units, num_threads_));
  if (shares <= 1) {
    task(0, count);
    return;
  }
  task_ = &task;
  count_ = count;
  grain_ = grain;
  shares_ = shares;
  // Every worker acknowledges every job, so none can lag behind into the next one.
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  if (sleepers_.load() > 0) wake_.notify_all();
  RunShare(0);
  for (int round = 0; pending_.load(std::memory_order_acquire) > 0; ++round) Relax(round);
  if (error_ != nullptr) {  // every share has finished: nobody else touches it now
    std::exception_ptr error = std::exchange(error_, nullptr);
    std::rethrow_exception(error);
  }
}

void ThreadPool::WorkerLoop(int worker_index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int round = 0; current == seen && round < kSpinRounds; ++round) {
      Relax(round);
      current = generation_.load(std::memory_order_acquire);
    }
    if (current == seen) {
      std::unique_lock lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      current = generation_.load();
    }
    seen = current;
    if (stopping_.load()) return;
    if (worker_index < shares_) RunShare(worker_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace reprise
