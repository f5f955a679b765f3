// Decides what each engine step computes: continuous batching under a token budget, decode
// tokens first, then prefill chunks that start after each request's cached prefix, the requests
// with the least left to compute first. Knows the prefix cache but not the model, so it is
// tested without one.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/sequence.h"
#include "kvcache/prefix_cache.h"

namespace reprise {

// The order in which running requests get prefill chunks.
enum class PrefillOrder {
  // Arrival order: a request whose prompt is mostly cached still waits behind every older
  // request's uncached prompt.
  kArrival,
  // Least uncached prompt left first (after matching the cache), so requests that reuse a
  // cached prefix get their first token at once instead of queueing behind long cold prompts:
  // shortest-remaining-first, which minimises mean TTFT. Waiting ages a request: every
  // `prefill_aging_steps` steps since admission count as one step's budget off what it has
  // left, so a long prompt overtakes newer short ones after about that many times its own
  // prefill, and is never starved. When more requests wait than there are free running slots,
  // they are admitted in the same order (the first kWaitingExamined of them, aged from arrival).
  kCacheAware,
};

struct SchedulerConfig {
  int block_size = 16;
  int max_batch_tokens = 512;
  int max_running = 64;
  bool enable_reuse = true;
  PrefillOrder prefill_order = PrefillOrder::kCacheAware;
  int prefill_aging_steps = 8;
};

// Waiting requests the cache-aware order looks at when choosing whom to admit: each costs a
// walk of its cached blocks, and beyond this many the older ones age to the front anyway.
inline constexpr size_t kWaitingExamined = 64;

// One sequence's share of a step: positions [start, start + count).
struct StepEntry {
  Sequence* sequence = nullptr;
  size_t start = 0;
  size_t count = 0;
  bool wants_logits = false;  // the chunk reaches the end of the sequence's tokens
};

struct StepPlan {
  std::vector<StepEntry> entries;
  std::vector<std::unique_ptr<Sequence>> failed;  // can never fit: finish them with an error
  size_t num_tokens = 0;
};

// Where blocks that memory misses may still be found (the tiers beyond memory). The engine
// implements it; the scheduler decides when to ask.
class BlockLoader {
 public:
  virtual ~BlockLoader() = default;
  // How many leading `keys` the tiers probably hold (non-blocking).
  virtual size_t ProbablyHeld(std::span<const Digest> keys) = 0;
  // Starts filling blocks [first_block, sequence.blocks.size()) of the sequence from the tiers;
  // the engine hands the result to Scheduler::FinishLoad.
  virtual void StartLoad(Sequence& sequence, size_t first_block) = 0;
};

struct SchedulerStats {
  uint64_t preemptions = 0;
  uint64_t prompt_tokens_queried = 0;  // prompt tokens looked up at first admission
  uint64_t prompt_tokens_hit = 0;      // of which found in cache (memory and tiers)
  uint64_t loads_started = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, PrefixCache& cache);

  void Add(std::unique_ptr<Sequence> sequence);
  // Admits waiting sequences, then packs the step. Sequences stay owned by the scheduler.
  StepPlan Schedule();
  // Called after the forward pass: advances each entry's computed positions and commits the
  // blocks that became full, so other requests can reuse them at once.
  void Complete(const StepPlan& plan);
  // Removes a sequence (finished or cancelled): commits its computed tail, releases its blocks.
  // `pin` keeps its blocks forever (static task prompts).
  std::unique_ptr<Sequence> Finish(Sequence* sequence, bool pin = false);
  // Removes a sequence by id from waiting or running; nullptr when unknown, or when it is loading:
  // then it is marked (cancel_requested, and `failure` when it failed) and its owner removes it
  // once the load is taken, so no I/O thread writes into blocks that went back.
  std::unique_ptr<Sequence> Remove(uint64_t id, const std::string& failure = "");
  // Removes every sequence (shutting down), releasing their blocks.
  std::vector<std::unique_ptr<Sequence>> RemoveAll();

  // Sets (or with nullptr removes) where missed blocks are looked for; must outlive its use.
  void SetLoader(BlockLoader* loader) { loader_ = loader; }
  // A load started for `sequence` is done: its first `loaded` blocks hold verified KV. Commits
  // them, releases the blocks set aside beyond them and makes the sequence schedulable again.
  // Returns the prompt tokens that count as reused (0 unless the load began at its first
  // admission).
  size_t FinishLoad(Sequence& sequence, size_t loaded);
  // The ids of every sequence, running and waiting.
  std::vector<uint64_t> Ids() const;

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  // Whether Schedule can do anything now: false while every running sequence is loading and
  // nothing more can be admitted (the engine then waits for a load instead of spinning).
  bool HasRunnableWork() const;
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  const SchedulerStats& stats() const { return stats_; }

 private:
  void Admit(Sequence& sequence);
  // After a match that ended on a block boundary: asks the loader for the blocks that follow and
  // sets blocks aside for them; the sequence then waits in the loading state.
  void TryLoad(Sequence& sequence);
  void TryExtendMatch(Sequence& sequence);
  void AdoptMatch(Sequence& sequence, PrefixMatch match);
  void CommitFullBlocks(Sequence& sequence);
  uint64_t PrefixHash(Sequence& sequence, size_t block);
  // Makes sure blocks exist for positions [0, end); may preempt newer sequences not in the plan.
  // Returns the end actually covered (>= sequence.num_computed).
  size_t EnsureBlocks(Sequence& sequence, size_t end, const std::unordered_set<Sequence*>& planned);
  // Preemption moves sequences from running_ to waiting_ while a step is planned.
  bool IsRunning(const Sequence* sequence) const;
  // The running sequences that want prefill, in the order they get chunks this step.
  std::vector<Sequence*> PrefillCandidates(const std::vector<Sequence*>& snapshot);
  // Cache-aware admission: puts the waiting requests with the least uncached prompt (aged from
  // arrival) first, when there are more of them than free running slots.
  void OrderWaiting();
  // Tokens per step of waiting that aging takes off what a request has left.
  double AgingPerStep() const;
  bool PreemptNewest(const Sequence& keep, const std::unordered_set<Sequence*>& planned);
  void Preempt(Sequence& sequence);
  void ReleaseBlocks(Sequence& sequence);

  SchedulerConfig config_;
  PrefixCache& cache_;
  BlockLoader* loader_ = nullptr;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // admission order: oldest first
  SchedulerStats stats_;
  uint64_t steps_ = 0;  // Schedule calls so far: the clock of prefill aging
};

}  // namespace reprise
