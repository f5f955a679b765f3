// One HTTP generation request in flight: an engine request per choice, the channel the engine
// thread reports on, and each choice's result so far. Used by one HTTP thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/inference_backend.h"
#include "server/request_channel.h"
#include "server/response_builder.h"

namespace reprise::server {

class CompletionJob {
 public:
  // `choices_per_prompt`: the request's n; choice i belongs to prompt i / n.
  CompletionJob(std::shared_ptr<InferenceBackend> backend, size_t num_choices,
                int choices_per_prompt);
  ~CompletionJob();  // cancels what is still running
  CompletionJob(const CompletionJob&) = delete;
  CompletionJob& operator=(const CompletionJob&) = delete;

  // Submits choice `index`; its events go to the channel. Throws what Submit throws.
  void Submit(size_t index, GenerationRequest request);
  // Cancels every submitted choice that has not finished (idempotent).
  void CancelUnfinished();

  RequestChannel& channel() { return *channel_; }

  // Folds one event into its choice's result; returns the choice index.
  size_t Apply(const ChannelEvent& event);

  bool AllFinished() const { return finished_count_ == choices_.size(); }
  size_t size() const { return choices_.size(); }
  const ChoiceResult& result(size_t index) const { return choices_[index].result; }
  FinishReason finish_reason(size_t index) const { return choices_[index].reason; }
  const std::string& error(size_t index) const { return choices_[index].error; }
  std::vector<ChoiceResult> Results() const;

  // Prompt and cached tokens counted once per prompt (from its first choice), completion
  // tokens over every choice.
  UsageCounts Usage() const;

 private:
  struct Choice {
    uint64_t request_id = 0;
    bool submitted = false;
    bool finished = false;
    bool cancelled = false;
    FinishReason reason = FinishReason::kLength;
    std::string error;
    ChoiceResult result;
  };

  std::shared_ptr<InferenceBackend> backend_;
  std::shared_ptr<RequestChannel> channel_;
  std::vector<Choice> choices_;
  int choices_per_prompt_;
  size_t finished_count_ = 0;
};

}  // namespace reprise::server
