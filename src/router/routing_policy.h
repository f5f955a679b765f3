// How `reprise route` picks a replica. "prefix": when some replica holds at least
// min_match_share of the prompt, the lowest cost, where cost = prompt tokens the replica would
// have to compute (its cached prefix subtracted) + load x load_cost_tokens; otherwise (a new
// prefix) the least loaded replica, and of those the one trusted with the fewest cached blocks,
// so that new documents spread over the replicas' memories. A replica whose load passes the
// least loaded one's by more than max_load_gap is never chosen, so one hot prefix cannot pile
// every request onto one replica. "round-robin": in turn, for comparison. Pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace reprise::router {

enum class RoutingPolicy { kPrefix, kRoundRobin };
std::optional<RoutingPolicy> ParseRoutingPolicy(
    const std::string& name);  // "prefix", "round-robin"

struct PolicyConfig {
  double load_cost_tokens =
      512;               // one running or waiting request costs as much as this much prefill
  int max_load_gap = 4;  // requests
  double min_match_share = 0.5;  // below it, a prompt is placed as new
};

struct Candidate {
  int replica = 0;
  size_t cached_tokens = 0;  // of this prompt, on this replica (as far as the router knows)
  int load = 0;              // running + waiting requests
  size_t held_blocks = 0;    // blocks the router believes the replica holds, all prompts
};

// The index into `candidates` (not empty) to send the request to. `turn` breaks ties (and is
// the round-robin position), so equal replicas share the work.
size_t ChooseCandidate(RoutingPolicy policy, const std::vector<Candidate>& candidates,
                       size_t prompt_tokens, const PolicyConfig& config, size_t turn);

}  // namespace reprise::router
