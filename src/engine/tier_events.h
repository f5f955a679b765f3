// TierEvents: tells the KV event stream of the blocks the tiers beyond memory (disk, remote) gain
// and lose, as the publisher itself tells of memory's. The tiers know nothing of events: they tell
// a TierListener, and the engine hands them this one.
#pragma once

#include "kvevents/kv_event_publisher.h"
#include "tiers/kv_tier.h"

namespace reprise {

class TierEvents : public TierListener {
 public:
  explicit TierEvents(kvevents::KvEventPublisher& publisher) : publisher_(publisher) {}

  void OnTierBlockStored(const char* tier, const TierBlockRef& block) override;
  void OnTierBlockRemoved(const char* tier, const TierBlockRef& block) override;

 private:
  void Publish(kvevents::KvEventType type, const char* tier, const TierBlockRef& block);

  kvevents::KvEventPublisher& publisher_;
};

}  // namespace reprise
