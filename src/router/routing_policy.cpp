#include "router/routing_policy.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace reprise::router {

std::optional<RoutingPolicy> ParseRoutingPolicy(const std::string& name) {
  if (name == "prefix") return RoutingPolicy::kPrefix;
  if (name == "round-robin") return RoutingPolicy::kRoundRobin;
  return std::nullopt;
}

size_t ChooseCandidate(RoutingPolicy policy, const std::vector<Candidate>& candidates,
                       size_t prompt_tokens, const PolicyConfig& config, size_t turn) {
  REPRISE_CHECK(!candidates.empty(), "no candidate replica");
  const size_t n = candidates.size();
  if (policy == RoutingPolicy::kRoundRobin) return turn % n;
  int min_load = std::numeric_limits<int>::max();
  size_t best_match = 0;
  for (const Candidate& c : candidates) min_load = std::min(min_load, c.load);
  for (const Candidate& c : candidates) {
    if (c.load <= min_load + config.max_load_gap)
      best_match = std::max(best_match, c.cached_tokens);
  }
  size_t best = n;
  if (prompt_tokens == 0 || static_cast<double>(best_match) <
                                config.min_match_share * static_cast<double>(prompt_tokens)) {
    for (size_t k = 0; k < n; ++k) {
      size_t i = (turn + k) % n;
      const Candidate& c = candidates[i];
      if (best == n || c.load < candidates[best].load ||
          (c.load == candidates[best].load && c.held_blocks < candidates[best].held_blocks)) {
        best = i;
      }
    }
    return best;
  }
  double best_cost = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < n; ++k) {
    size_t i = (turn + k) % n;  // ties go to the first in turn order
    const Candidate& c = candidates[i];
    if (c.load > min_load + config.max_load_gap) continue;
    size_t uncached = prompt_tokens - std::min(prompt_tokens, c.cached_tokens);
    double cost = static_cast<double>(uncached) + config.load_cost_tokens * c.load;
    if (cost < best_cost) {
      best_cost = cost;
      best = i;
    }
  }
  return best;
}

}  // namespace reprise::router
