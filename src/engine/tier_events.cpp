#include "engine/tier_events.h"

#include "core/error.h"

namespace reprise {

void TierEvents::OnTierBlockStored(const char* tier, const TierBlockRef& block) {
  Publish(kvevents::KvEventType::kStored, tier, block);
}

void TierEvents::OnTierBlockRemoved(const char* tier, const TierBlockRef& block) {
  Publish(kvevents::KvEventType::kRemoved, tier, block);
}

void TierEvents::Publish(kvevents::KvEventType type, const char* tier, const TierBlockRef& block) {
  const std::optional<kvevents::KvEventTier> kind = kvevents::EventTierNamed(tier);
  REPRISE_CHECK(kind && *kind != kvevents::KvEventTier::kMemory, "no KV event tier is named {}",
                tier);
  publisher_.Publish({type, *kind, block.key, block.parent_key, block.extras_digest, block.owner});
}

}  // namespace reprise
