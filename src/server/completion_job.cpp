#include "server/completion_job.h"

#include <utility>

#include "core/error.h"

namespace reprise::server {

CompletionJob::CompletionJob(std::shared_ptr<InferenceBackend> backend, size_t num_choices,
                             int choices_per_prompt)
    : backend_(std::move(backend)),
      channel_(std::make_shared<RequestChannel>()),
      choices_(num_choices),
      choices_per_prompt_(choices_per_prompt < 1 ? 1 : choices_per_prompt) {
  for (size_t i = 0; i < choices_.size(); ++i) choices_[i].result.index = i;
}

CompletionJob::~CompletionJob() {
  try {
    CancelUnfinished();
  } catch (...) {
    // Cancel does not throw by contract; never let a destructor throw regardless.
  }
}

void CompletionJob::Submit(size_t index, GenerationRequest request) {
  REPRISE_CHECK(index < choices_.size(), "choice {} of {}", index, choices_.size());
  // The callbacks run on the engine thread: they only append to the channel, which they keep
  // alive themselves, so a job that is gone never leaves them dangling.
  std::shared_ptr<RequestChannel> channel = channel_;
  StreamCallbacks callbacks;
  callbacks.on_token = [channel, index](const TokenEvent& event) { channel->Push({index, event}); };
  callbacks.on_finish = [channel, index](const GenerationOutput& output) {
    channel->Push({index, output});
  };
  bool wants_logprobs = request.sampling.logprobs.has_value();
  choices_[index].request_id = backend_->Submit(std::move(request), std::move(callbacks));
  if (wants_logprobs) choices_[index].result.logprobs.emplace();
  choices_[index].submitted = true;
}

void CompletionJob::CancelUnfinished() {
  for (Choice& choice : choices_) {
    if (choice.submitted && !choice.finished && !choice.cancelled) {
      choice.cancelled = true;
      backend_->Cancel(choice.request_id);
    }
  }
}

size_t CompletionJob::Apply(const ChannelEvent& event) {
  REPRISE_CHECK(event.choice < choices_.size(), "event for choice {} of {}", event.choice,
                choices_.size());
  Choice& choice = choices_[event.choice];
  if (choice.finished) return event.choice;
  if (const TokenEvent* token = std::get_if<TokenEvent>(&event.payload)) {
    choice.result.text += token->text;
    choice.result.completion_tokens += 1;
    choice.result.prompt_tokens = token->prompt_tokens;
    choice.result.cached_tokens = token->cached_tokens;
    if (choice.result.logprobs) {
      choice.result.logprobs->insert(choice.result.logprobs->end(), token->logprobs.begin(),
                                     token->logprobs.end());
    }
    choice.result.cache_sources = token->cache_sources;
  } else {
    const GenerationOutput& output = std::get<GenerationOutput>(event.payload);
    choice.finished = true;
    ++finished_count_;
    choice.reason = output.finish_reason;
    choice.error = output.error;
    choice.result.text = output.text;
    choice.result.finish_reason = FinishReasonText(output.finish_reason);
    choice.result.completion_tokens = output.token_ids.size();
    choice.result.prompt_tokens = output.prompt_tokens;
    choice.result.cached_tokens = output.cached_tokens;
    choice.result.cache_sources = output.cache_sources;
    choice.result.ttft_seconds = output.ttft_seconds;
    choice.result.total_seconds = output.total_seconds;
    if (choice.result.logprobs) choice.result.logprobs = output.logprobs;
  }
  return event.choice;
}

std::vector<ChoiceResult> CompletionJob::Results() const {
  std::vector<ChoiceResult> results;
  results.reserve(choices_.size());
  for (const Choice& choice : choices_) results.push_back(choice.result);
  return results;
}

UsageCounts CompletionJob::Usage() const {
  UsageCounts usage;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const ChoiceResult& result = choices_[i].result;
    usage.completion_tokens += result.completion_tokens;
    if (i % static_cast<size_t>(choices_per_prompt_) == 0) {
      usage.prompt_tokens += result.prompt_tokens;
      usage.cached_tokens += result.cached_tokens;
      usage.cache_sources.memory += result.cache_sources.memory;
      usage.cache_sources.disk += result.cache_sources.disk;
      usage.cache_sources.remote += result.cache_sources.remote;
    }
  }
  return usage;
}

}  // namespace reprise::server
