#include "server/server_state.h"

#include <fmt/format.h>

#include <random>
#include <utility>

#include "server/api_error.h"

namespace reprise::server {

ServerState::ServerState(HttpServerOptions options)
    : options_(std::move(options)),
      tenants_(options_.api_keys,
               options_.cache_secret.empty() && !options_.api_keys.empty() ? GenerateCacheSecret()
                                                                           : options_.cache_secret,
               options_.share_cache_across_tenants) {
  std::random_device random;
  nonce_ = fmt::format("{:08x}", random());
}

void ServerState::SetBackend(std::shared_ptr<InferenceBackend> backend) {
  auto ready = std::make_shared<ReadyBackend>();
  ready->info = backend->Info();
  ready->backend = std::move(backend);
  std::lock_guard<std::mutex> lock(mutex_);
  ready_ = std::move(ready);
}

std::shared_ptr<const ReadyBackend> ServerState::Ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ready_;
}

std::shared_ptr<const ReadyBackend> ServerState::RequireReady() const {
  std::shared_ptr<const ReadyBackend> ready = Ready();
  if (!ready) throw ApiError::Unavailable("the model is still loading; retry shortly", "loading");
  return ready;
}

const Tenant& ServerState::Caller(const std::string& authorization) const {
  const Tenant* tenant = tenants_.Authenticate(authorization);
  if (!tenant) throw ApiError::Unauthorized();
  return *tenant;
}

std::string ServerState::NextId(const char* prefix) {
  return fmt::format("{}-{}{:x}", prefix, nonce_, next_id_.fetch_add(1));
}

}  // namespace reprise::server
