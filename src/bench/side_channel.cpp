// `reprise bench side-channel`: a victim tenant sends secret prompts; an attacker tenant sends
// each secret once ("hit" probes: the victim sent it) and as many prompts nobody sent ("miss"
// probes), in a shuffled order, one at a time, and the bench measures how well the attacker's TTFT
// and usage.cached_tokens tell the two apart (ROC AUC). With tenant isolation both AUCs stay near
// 0.5; with --share-cache-across-tenants a hit probe is served from the victim's blocks.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/options.h"
#include "bench/security.h"
#include "bench/security_http.h"
#include "bench/stats.h"
#include "bench/texts.h"
#include "core/error.h"

namespace reprise::bench {
namespace {

nlohmann::json ProbeBody(const std::string& model, const std::string& prompt) {
  nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  if (!model.empty()) body["model"] = model;
  return body;
}

void CheckKey(httplib::Client& client, const std::string& key, const char* who) {
  CallResult models = GetTimed(client, "/v1/models", key);
  if (models.status != 200) {
    throw Error(fmt::format("the server answered GET /v1/models with {} for the {} key",
                            models.status, who));
  }
}

// The larger of an AUC and its mirror: an attacker may use either direction of a score.
double Distinguishability(double auc) { return std::max(auc, 1.0 - auc); }

}  // namespace

int RunSideChannelBench(const SideChannelOptions& options) {
  if (options.probes < 2) throw Error("--probes must be at least 2");
  if (options.victim_key.empty() || options.attacker_key.empty()) {
    throw Error("side-channel needs --victim-key and --attacker-key");
  }
  if (options.victim_key == options.attacker_key) {
    throw Error("--victim-key and --attacker-key must differ (two tenants)");
  }
  HostPort server = ParseHttpUrl(options.url);
  httplib::Client client = MakeBenchClient(server);
  CheckKey(client, options.victim_key, "victim");
  CheckKey(client, options.attacker_key, "attacker");

  const size_t words = static_cast<size_t>(std::max(8, options.prompt_words));
  const uint64_t base = options.seed * 1000003u + 977;
  // Each pair of texts is drawn alike and a coin picks which one is the secret, so that nothing
  // in how the texts are made differs between hit and miss probes (only the victim's request).
  std::mt19937_64 random(options.seed + 17);
  std::vector<bool> flipped;
  for (int i = 0; i < options.probes; ++i) flipped.push_back(random() % 2 == 1);
  auto text = [&](int i, bool second) {
    return Prose(base + 2 * static_cast<uint64_t>(i) + (second ? 1 : 0), words);
  };
  auto secret = [&](int i) { return text(i, flipped[static_cast<size_t>(i)]); };
  auto unsent = [&](int i) { return text(i, !flipped[static_cast<size_t>(i)]); };

  // The victim's secrets, each computed (and cached in the victim's tenant).
  for (int i = 0; i < options.probes; ++i) {
    CallResult sent = PostJsonTimed(client, "/v1/completions",
                                    ProbeBody(options.served_model, secret(i)), options.victim_key);
    if (sent.status != 200) throw Error(fmt::format("a victim request got {}", sent.status));
  }
  // The attacker's first requests pay one-time costs; they are not probes.
  for (int i = 0; i < 2; ++i) {
    PostJsonTimed(client, "/v1/completions",
                  ProbeBody(options.served_model, Prose(base + 999999 + i, words)),
                  options.attacker_key);
  }

  std::vector<std::pair<int, bool>> order;  // (index, is a hit probe)
  for (int i = 0; i < options.probes; ++i) {
    order.emplace_back(i, true);
    order.emplace_back(i, false);
  }
  std::shuffle(order.begin(), order.end(), random);

  std::vector<double> hit_speed, miss_speed, hit_cached, miss_cached, hit_ms, miss_ms;
  for (const auto& [index, hit] : order) {
    CallResult probe = PostJsonTimed(
        client, "/v1/completions",
        ProbeBody(options.served_model, hit ? secret(index) : unsent(index)), options.attacker_key);
    if (probe.status != 200) throw Error(fmt::format("an attacker probe got {}", probe.status));
    double cached = static_cast<double>(CachedTokensOf(probe.body));
    // Faster is the sign of a hit: the score is the negated time.
    (hit ? hit_speed : miss_speed).push_back(-probe.milliseconds);
    (hit ? hit_ms : miss_ms).push_back(probe.milliseconds);
    (hit ? hit_cached : miss_cached).push_back(cached);
  }

  SideChannelResult result;
  result.ttft_auc = RocAuc(hit_speed, miss_speed);
  result.cached_auc = RocAuc(hit_cached, miss_cached);
  result.hit_ttft_ms = Median(hit_ms);
  result.miss_ttft_ms = Median(miss_ms);
  result.hit_cached = Mean(hit_cached);
  result.miss_cached = Mean(miss_cached);

  std::printf("side-channel: %d hit and %d miss probes of ~%zu words against %s\n", options.probes,
              options.probes, words, options.url.c_str());
  std::printf("  %-22s %12s %12s %10s\n", "signal", "hit probes", "miss probes", "ROC AUC");
  std::printf("  %-22s %12.1f %12.1f %10.3f\n", "TTFT ms (median)", result.hit_ttft_ms,
              result.miss_ttft_ms, result.ttft_auc);
  std::printf("  %-22s %12.1f %12.1f %10.3f\n", "cached_tokens (mean)", result.hit_cached,
              result.miss_cached, result.cached_auc);
  double worst =
      std::max(Distinguishability(result.ttft_auc), Distinguishability(result.cached_auc));
  std::printf("  distinguishability max(AUC, 1-AUC) over both signals: %.3f (0.5: none)\n", worst);
  std::fflush(stdout);
  if (options.max_auc > 0 && worst > options.max_auc) {
    std::printf("  FAIL: above --max-auc %.3f\n", options.max_auc);
    return 1;
  }
  return 0;
}

}  // namespace reprise::bench
