// A fixed set of worker threads for kernels. Work is split only over independent outputs (rows,
// columns, heads), never along a reduction, so results do not depend on the thread count.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace reprise {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread; 0 means every hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Runs task(begin, end) over a partition of [0, count) into at most num_threads() contiguous
  // ranges, each a multiple of `grain` (except the last); returns when all are done.
  // The first exception a task throws (on any thread) is rethrown here once every range has
  // finished. Not reentrant: call it from one thread at a time, never from inside a task.
  //
  // The task is referenced, not copied: a std::function holding a lambda with many captures
  // allocated on every call, and a decode step makes about 150 of them.
  class RangeTask {
   public:
    template <typename F>
    requires std::is_invocable_v<F&, size_t, size_t> &&
        (!std::is_same_v<std::remove_cvref_t<F>, RangeTask>)
            RangeTask(F&& task)  // NOLINT(google-explicit-constructor): takes lambdas in place
        : object_(const_cast<void*>(static_cast<const void*>(std::addressof(task)))),
          call_([](void* object, size_t begin, size_t end) {
            (*static_cast<std::remove_reference_t<F>*>(object))(begin, end);
          }) {}
    void operator()(size_t begin, size_t end) const { call_(object_, begin, end); }

   private:
    void* object_;
    void (*call_)(void* object, size_t begin, size_t end);
  };
  void ParallelFor(size_t count, RangeTask task, size_t grain = 1);

 private:
  void WorkerLoop(int worker_index);
  void RunShare(int share_index);

  int num_threads_;
  std::vector<std::thread> workers_;

  // The current job, published by bumping generation_.
  const RangeTask* task_ = nullptr;
  size_t count_ = 0;
  size_t grain_ = 1;
  int shares_ = 0;

  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
  // The first exception a share threw in the current job, rethrown by ParallelFor.
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace reprise
