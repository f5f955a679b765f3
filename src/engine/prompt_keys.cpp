#include "engine/prompt_keys.h"

namespace reprise {

Digest KvRootFingerprint(const Digest& weights_fingerprint, kernels::KvType kv_type, int block_size,
                         std::string_view numerics) {
  Sha256 fingerprint;
  fingerprint.Update("reprise-kv-v1");
  fingerprint.Update(weights_fingerprint.data(), weights_fingerprint.size());
  fingerprint.UpdateValue(static_cast<uint32_t>(kv_type));
  fingerprint.UpdateValue(static_cast<uint32_t>(block_size));
  fingerprint.UpdateValue(static_cast<uint32_t>(numerics.size()));
  fingerprint.Update(numerics);
  return fingerprint.Finish();
}

}  // namespace reprise
