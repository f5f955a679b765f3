// The workloads of `reprise bench`; each measures one thing, prints nothing itself (progress
// goes through the context) and returns tables, headline figures and charts.
#pragma once

#include "bench/context.h"
#include "bench/report.h"

namespace reprise::bench {

// GFLOP/s of prefill matmuls and GB/s of decode matmuls per weight type, next to the machine's
// measured FMA and streaming-read peaks.
WorkloadResult RunKernelsWorkload(const BenchContext& context);
// Prefill tok/s for 512- and 2048-token prompts with reuse off (decode = false), or those prompts
// with 128 generated tokens: prefill and decode tok/s (decode = true).
WorkloadResult RunSpeedWorkload(const BenchContext& context, bool decode);
// A ~6,000-token document then 5 questions: cold and warm TTFT against the question alone.
WorkloadResult RunDocWorkload(const BenchContext& context);
// An 8-turn chat over a long system prompt: TTFT per turn, reuse on and off.
WorkloadResult RunChatWorkload(const BenchContext& context);
// Documents visited round robin under a KV budget that holds only some: hit rate and TTFT.
WorkloadResult RunMultidocWorkload(const BenchContext& context);
// Prompts that share nothing, reuse on against off: the cost of the cache.
WorkloadResult RunUniqueWorkload(const BenchContext& context);
// The doc workload through the tiers: cold, warm from memory, warm from disk with memory cleared,
// and warm after a restart of the engine on the same disk folder; TTFT and loading GB/s.
WorkloadResult RunTiersWorkload(const BenchContext& context);
// 16 clients on groups of prompts sharing a system prompt: throughput, TTFT p50/p99.
WorkloadResult RunConcurrentWorkload(const BenchContext& context);
// The scheduler's time per engine step with a full running set (--max-running-requests, 64 by
// default) and 1,000 long prompts (8,000 tokens, or what fits the context) queued behind it.
WorkloadResult RunSchedWorkload(const BenchContext& context);

}  // namespace reprise::bench
