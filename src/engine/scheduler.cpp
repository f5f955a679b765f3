#include "engine/scheduler.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/error.h"

namespace reprise {

namespace {

uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash * 0xff51afd7ed558ccdull;
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, PrefixCache& cache)
    : config_(config), cache_(cache) {
  REPRISE_CHECK(config_.block_size > 0 && config_.max_batch_tokens > 0 && config_.max_running > 0 &&
                    config_.prefill_aging_steps > 0,
                "bad scheduler config");
}

void Scheduler::Add(std::unique_ptr<Sequence> sequence) {
  sequence->arrival_step = steps_;
  sequence->key_chain = BlockKeyChain(cache_.root_fingerprint(), sequence->extras);
  waiting_.push_back(std::move(sequence));
}

uint64_t Scheduler::PrefixHash(Sequence& sequence, size_t block) {
  const auto block_size = static_cast<size_t>(config_.block_size);
  while (sequence.prefix_hashes.size() <= block) {
    size_t index = sequence.prefix_hashes.size();
    uint64_t hash = index == 0 ? Mix(std::hash<std::string>{}(sequence.extras.cache_salt),
                                     std::hash<std::string>{}(sequence.extras.extra))
                               : sequence.prefix_hashes.back();
    for (size_t p = index * block_size; p < (index + 1) * block_size; ++p) {
      hash = Mix(hash, static_cast<uint32_t>(sequence.tokens[p]));
    }
    sequence.prefix_hashes.push_back(hash);
  }
  return sequence.prefix_hashes[block];
}

void Scheduler::AdoptMatch(Sequence& sequence, PrefixMatch match) {
  ReleaseBlocks(sequence);
  sequence.blocks = std::move(match.blocks);
  sequence.num_computed = match.cached_tokens;
  sequence.committed_blocks = match.cached_tokens / static_cast<size_t>(config_.block_size);
  sequence.last_committed_key = match.last_full_key;
}

void Scheduler::Admit(Sequence& sequence) {
  // One token is always left to compute: its logits give the next token.
  size_t max_match = sequence.tokens.size() - 1;
  // Only a first admission reports reuse: a preempted request matches its own blocks again.
  sequence.load_counts_as_reuse = !sequence.admitted_once;
  if (config_.enable_reuse) {
    sequence.key_chain.Extend(sequence.tokens, static_cast<size_t>(config_.block_size));
  }
  PrefixMatch match =
      cache_.MatchChain(sequence.tokens, max_match, sequence.key_chain, sequence.retention);
  if (!sequence.admitted_once) {
    sequence.admitted_once = true;
    sequence.admitted_step = steps_;
    sequence.cached_tokens = std::min(match.cached_tokens, sequence.prompt_len);
    sequence.cache_sources.memory = sequence.cached_tokens;
    stats_.prompt_tokens_queried += sequence.prompt_len;
    stats_.prompt_tokens_hit += sequence.cached_tokens;
  }
  AdoptMatch(sequence, std::move(match));
  TryLoad(sequence);
}

void Scheduler::TryLoad(Sequence& sequence) {
  const auto block_size = static_cast<size_t>(config_.block_size);
  if (loader_ == nullptr || !config_.enable_reuse) return;
  // Full blocks only, and one token always left to compute (as in Admit).
  const size_t first = sequence.num_computed / block_size;
  const size_t end = (sequence.tokens.size() - 1) / block_size;
  if (first >= end) return;
  const size_t wanted =
      loader_->ProbablyHeld(sequence.key_chain.keys().subspan(first, end - first));
  if (wanted == 0) return;
  if (sequence.num_computed % block_size != 0) {
    // The match ended inside a block copied from a partial match: the tiers hold that whole
    // block, and more. Give the copy back and load from the block's start.
    const size_t partial = sequence.num_computed - first * block_size;
    cache_.Release(std::span<const BlockId>(&sequence.blocks.back(), 1));
    sequence.blocks.pop_back();
    sequence.num_computed = first * block_size;
    if (sequence.load_counts_as_reuse) {
      sequence.cached_tokens -= partial;
      sequence.cache_sources.memory -= partial;
      stats_.prompt_tokens_hit -= partial;
    }
  }
  for (size_t i = 0; i < wanted; ++i) {
    std::optional<BlockId> block = cache_.Allocate();
    if (!block) break;
    sequence.blocks.push_back(*block);
  }
  if (sequence.blocks.size() == first) return;
  sequence.loading = true;
  ++stats_.loads_started;
  loader_->StartLoad(sequence, first);
}

size_t Scheduler::FinishLoad(Sequence& sequence, size_t loaded) {
  REPRISE_CHECK(sequence.loading, "a load finished for a sequence that was not loading");
  const auto block_size = static_cast<size_t>(config_.block_size);
  const size_t first = sequence.num_computed / block_size;
  REPRISE_CHECK(first == sequence.committed_blocks && first + loaded <= sequence.blocks.size(),
                "a load of {} blocks does not fit the sequence's table", loaded);
  sequence.loading = false;
  // Blocks set aside for what the tiers did not have go back (last first).
  std::vector<BlockId> unused(sequence.blocks.begin() + static_cast<ptrdiff_t>(first + loaded),
                              sequence.blocks.end());
  sequence.blocks.resize(first + loaded);
  if (!unused.empty()) cache_.Release(unused);
  // The loaded blocks are as good as computed ones: commit them for every request to share.
  sequence.num_computed = (first + loaded) * block_size;
  CommitFullBlocks(sequence);
  size_t reused = 0;
  if (sequence.load_counts_as_reuse) {
    reused = std::min(sequence.num_computed, sequence.prompt_len) -
             std::min(first * block_size, sequence.prompt_len);
    sequence.cached_tokens += reused;
    stats_.prompt_tokens_hit += reused;
  }
  return reused;
}

bool Scheduler::HasRunnableWork() const {
  if (!waiting_.empty() && running_.size() < static_cast<size_t>(config_.max_running)) return true;
  return std::any_of(running_.begin(), running_.end(),
                     [](const auto& sequence) { return !sequence->loading; });
}

void Scheduler::TryExtendMatch(Sequence& sequence) {
  // Only between steps' worth of blocks: a sequence holding blocks allocated ahead of its
  // computed positions is mid-plan. A start inside a block (after a partial match) is fine: the
  // new match replaces that private block too.
  const auto block_size = static_cast<size_t>(config_.block_size);
  if (!config_.enable_reuse ||
      sequence.blocks.size() != (sequence.num_computed + block_size - 1) / block_size) {
    return;
  }
  sequence.key_chain.Extend(sequence.tokens, block_size);
  PrefixMatch match =
      cache_.MatchChain(sequence.tokens, sequence.tokens.size() - 1, sequence.key_chain,
                        sequence.retention, sequence.num_computed);
  if (match.cached_tokens <= sequence.num_computed) {
    cache_.Release(match.blocks);
    return;
  }
  if (sequence.generated == 0) {
    // Only what lies beyond the positions it computed itself came from cache.
    size_t gained = std::min(match.cached_tokens, sequence.prompt_len) -
                    std::min(sequence.num_computed, sequence.prompt_len);
    sequence.cached_tokens += gained;
    sequence.cache_sources.memory += gained;
    stats_.prompt_tokens_hit += gained;
  }
  AdoptMatch(sequence, std::move(match));
}

void Scheduler::CommitFullBlocks(Sequence& sequence) {
  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t full = sequence.num_computed / block_size;
  while (sequence.committed_blocks < full) {
    size_t index = sequence.committed_blocks;
    std::span<const int32_t> block_tokens(sequence.tokens.data() + index * block_size, block_size);
    sequence.last_committed_key = cache_.Commit(sequence.blocks[index], sequence.last_committed_key,
                                                block_tokens, sequence.extras, sequence.retention);
    ++sequence.committed_blocks;
  }
}

void Scheduler::ReleaseBlocks(Sequence& sequence) {
  if (!sequence.blocks.empty()) cache_.Release(sequence.blocks);
  sequence.blocks.clear();
  sequence.committed_blocks = 0;
  sequence.last_committed_key.reset();
  sequence.num_computed = 0;
}

void Scheduler::Preempt(Sequence& sequence) {
  // Its computed full blocks stay in the index as cache: on re-admission it resumes mostly
  // from there. Generated tokens are kept; they are recomputed, never re-sampled.
  ++stats_.preemptions;
  ReleaseBlocks(sequence);
}

bool Scheduler::PreemptNewest(const Sequence& keep, const std::unordered_set<Sequence*>& planned) {
  for (size_t i = running_.size(); i-- > 0;) {
    Sequence* victim = running_[i].get();
    // A loading sequence's blocks are being written by an I/O thread: never taken from it.
    if (victim == &keep || victim->loading || planned.count(victim) != 0) continue;
    Preempt(*victim);
    waiting_.push_front(std::move(running_[i]));
    running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
    return true;
  }
  return false;
}

size_t Scheduler::EnsureBlocks(Sequence& sequence, size_t end,
                               const std::unordered_set<Sequence*>& planned) {
  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t needed = (end + block_size - 1) / block_size;
  while (sequence.blocks.size() < needed) {
    std::optional<BlockId> block = cache_.Allocate();
    if (!block && PreemptNewest(sequence, planned)) continue;
    if (!block) break;
    sequence.blocks.push_back(*block);
  }
  return std::min(end, sequence.blocks.size() * block_size);
}

bool Scheduler::IsRunning(const Sequence* sequence) const {
  return std::any_of(running_.begin(), running_.end(),
                     [&](const auto& owned) { return owned.get() == sequence; });
}

std::vector<Sequence*> Scheduler::PrefillCandidates(const std::vector<Sequence*>& snapshot) {
  std::vector<Sequence*> candidates;
  for (Sequence* sequence : snapshot) {
    if (sequence->Remaining() <= 1 || sequence->loading || !IsRunning(sequence)) continue;
    // Match before ordering: what is left to compute is what the cache does not hold, and
    // blocks another request committed since the last step count.
    TryExtendMatch(*sequence);
    candidates.push_back(sequence);
  }
  if (config_.prefill_order == PrefillOrder::kCacheAware) {
    const double aging = AgingPerStep();
    auto key = [&](const Sequence* sequence) {
      return static_cast<double>(sequence->Remaining()) -
             aging * static_cast<double>(steps_ - sequence->admitted_step);
    };
    // Stable: equal keys stay in arrival order.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](const Sequence* a, const Sequence* b) { return key(a) < key(b); });
  }
  return candidates;
}

double Scheduler::AgingPerStep() const {
  return static_cast<double>(config_.max_batch_tokens) /
         static_cast<double>(config_.prefill_aging_steps);
}

void Scheduler::OrderWaiting() {
  const size_t free_slots = static_cast<size_t>(config_.max_running) - running_.size();
  if (config_.prefill_order != PrefillOrder::kCacheAware || !config_.enable_reuse ||
      free_slots == 0 || waiting_.size() <= free_slots) {
    return;
  }
  const size_t examined = std::min(waiting_.size(), kWaitingExamined);
  const double aging = AgingPerStep();
  std::vector<std::pair<double, size_t>> order;  // (key, position in waiting_)
  order.reserve(examined);
  for (size_t i = 0; i < examined; ++i) {
    Sequence& sequence = *waiting_[i];
    // A preempted request's own blocks stay cached: it ranks by what it still lacks, too.
    sequence.key_chain.Extend(sequence.tokens, static_cast<size_t>(config_.block_size));
    const size_t cached = cache_.CachedChainLength(sequence.key_chain, sequence.tokens.size() - 1);
    const double left = static_cast<double>(sequence.tokens.size() - cached);
    order.emplace_back(left - aging * static_cast<double>(steps_ - sequence.arrival_step), i);
  }
  // Stable: equal keys stay in arrival order.
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::unique_ptr<Sequence>> reordered;
  reordered.reserve(examined);
  for (const auto& entry : order) reordered.push_back(std::move(waiting_[entry.second]));
  for (size_t i = 0; i < examined; ++i) waiting_[i] = std::move(reordered[i]);
}

StepPlan Scheduler::Schedule() {
  ++steps_;
  StepPlan plan;
  OrderWaiting();
  while (static_cast<int>(running_.size()) < config_.max_running && !waiting_.empty()) {
    std::unique_ptr<Sequence> sequence = std::move(waiting_.front());
    waiting_.pop_front();
    Admit(*sequence);
    running_.push_back(std::move(sequence));
  }

  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t budget = static_cast<size_t>(config_.max_batch_tokens);
  std::unordered_set<Sequence*> planned;
  std::unordered_set<uint64_t> in_flight;  // prefix hashes of blocks computed in this step

  auto schedule = [&](Sequence& sequence, size_t count) {
    size_t start = sequence.num_computed;
    size_t end = EnsureBlocks(sequence, start + count, planned);
    if (end <= start) return false;
    planned.insert(&sequence);
    plan.entries.push_back({&sequence, start, end - start, end == sequence.tokens.size()});
    plan.num_tokens += end - start;
    budget -= end - start;
    for (size_t block = start / block_size;
         (block + 1) * block_size <= sequence.tokens.size() && block * block_size < end; ++block) {
      in_flight.insert(PrefixHash(sequence, block));
    }
    return true;
  };

  // Preemption removes sequences from running_ while we plan: walk a snapshot, and skip the
  // ones that are no longer running.
  std::vector<Sequence*> snapshot;
  for (auto& sequence : running_) snapshot.push_back(sequence.get());

  // Decode tokens first: they are one position each and hold a client waiting on every token.
  for (Sequence* sequence : snapshot) {
    if (budget == 0) break;
    if (sequence->Remaining() == 1 && !sequence->loading && IsRunning(sequence)) {
      schedule(*sequence, 1);
    }
  }
  // Then prefill chunks. A chunk starts after the cached prefix.
  std::vector<Sequence*> candidates = PrefillCandidates(snapshot);
  for (Sequence* candidate : candidates) {
    if (budget == 0) break;
    Sequence& sequence = *candidate;
    if (planned.count(&sequence) != 0 || !IsRunning(candidate)) continue;
    // The block this chunk would start in (or complete, after a partial match). When another
    // request computes that very block in this step, wait and reuse it next step instead.
    size_t next_block = sequence.num_computed / block_size;
    if ((next_block + 1) * block_size <= sequence.tokens.size() &&
        in_flight.count(PrefixHash(sequence, next_block)) != 0) {
      continue;
    }
    schedule(sequence, std::min(sequence.Remaining(), budget));
  }

  // A lone request that cannot get a single block can never run: the cache is too small.
  if (plan.entries.empty() && !running_.empty()) {
    for (size_t i = running_.size(); i-- > 0;) {
      if (!running_[i]->loading &&
          running_[i]->blocks.size() * block_size < running_[i]->tokens.size() &&
          cache_.NumAllocatable() == 0) {
        ReleaseBlocks(*running_[i]);
        plan.failed.push_back(std::move(running_[i]));
        running_.erase(running_.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
    }
  }
  return plan;
}

void Scheduler::Complete(const StepPlan& plan) {
  for (const StepEntry& entry : plan.entries) {
    Sequence& sequence = *entry.sequence;
    sequence.num_computed = entry.start + entry.count;
    CommitFullBlocks(sequence);
  }
}

std::unique_ptr<Sequence> Scheduler::Remove(uint64_t id, const std::string& failure) {
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      std::unique_ptr<Sequence> sequence = std::move(*it);
      waiting_.erase(it);
      ReleaseBlocks(*sequence);
      return sequence;
    }
  }
  for (auto& sequence : running_) {
    if (sequence->id != id) continue;
    if (sequence->loading) {
      sequence->cancel_requested = true;  // its blocks are being written: finished after the load
      if (sequence->failure.empty()) sequence->failure = failure;
      return nullptr;
    }
    return Finish(sequence.get());
  }
  return nullptr;
}

std::vector<uint64_t> Scheduler::Ids() const {
  std::vector<uint64_t> ids;
  for (const auto& sequence : running_) ids.push_back(sequence->id);
  for (const auto& sequence : waiting_) ids.push_back(sequence->id);
  return ids;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::RemoveAll() {
  std::vector<std::unique_ptr<Sequence>> removed;
  for (const auto& sequence : running_) {
    REPRISE_CHECK(!sequence->loading, "removing sequence {} while a load fills it", sequence->id);
  }
  while (!running_.empty()) removed.push_back(Finish(running_.back().get()));
  for (auto& sequence : waiting_) {
    ReleaseBlocks(*sequence);
    removed.push_back(std::move(sequence));
  }
  waiting_.clear();
  return removed;
}

std::unique_ptr<Sequence> Scheduler::Finish(Sequence* sequence, bool pin) {
  auto it = std::find_if(running_.begin(), running_.end(),
                         [&](const auto& owned) { return owned.get() == sequence; });
  REPRISE_CHECK(it != running_.end(), "finishing a sequence that is not running");
  std::unique_ptr<Sequence> owned = std::move(*it);
  running_.erase(it);

  // Keep the partly filled last block too, so the next turn of a chat reuses every computed
  // token, the answer included.
  const auto block_size = static_cast<size_t>(config_.block_size);
  size_t full = owned->num_computed / block_size;
  if (owned->num_computed % block_size != 0 && owned->committed_blocks == full &&
      full < owned->blocks.size()) {
    std::span<const int32_t> tail(owned->tokens.data() + full * block_size,
                                  owned->num_computed - full * block_size);
    cache_.Commit(owned->blocks[full], owned->last_committed_key, tail, owned->extras,
                  owned->retention);
  }
  if (pin) {
    size_t used = (owned->num_computed + block_size - 1) / block_size;
    cache_.Pin(std::span<const BlockId>(owned->blocks.data(), used));
  }
  ReleaseBlocks(*owned);
  return owned;
}

}  // namespace reprise
