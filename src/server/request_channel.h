// A thread-safe queue between the engine thread (StreamCallbacks push, never block for long) and
// the HTTP thread serving one request (waits for and drains events).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <variant>
#include <vector>

#include "reprise/engine.h"

namespace reprise::server {

// One report about choice `choice` of a request: a token, or its end.
struct ChannelEvent {
  size_t choice = 0;
  std::variant<TokenEvent, GenerationOutput> payload;

  bool finished() const { return std::holds_alternative<GenerationOutput>(payload); }
};

class RequestChannel {
 public:
  // Called on the engine thread: takes the lock only to append.
  void Push(ChannelEvent event) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // Waits up to `timeout` for events; returns all pending ones (none on time-out).
  std::vector<ChannelEvent> PopAll(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait_for(lock, timeout, [this] { return !events_.empty(); });
    std::vector<ChannelEvent> result(std::make_move_iterator(events_.begin()),
                                     std::make_move_iterator(events_.end()));
    events_.clear();
    return result;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<ChannelEvent> events_;
};

}  // namespace reprise::server
