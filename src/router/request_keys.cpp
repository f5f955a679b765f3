#include "router/request_keys.h"

#include <fmt/format.h>

#include <span>

#include "core/error.h"
#include "engine/prompt_keys.h"
#include "hf/model_source.h"
#include "kvcache/block_key.h"
#include "model/kv_layout.h"
#include "model/model.h"
#include "server/api_error.h"

namespace reprise::router {

RequestKeyer::RequestKeyer(const std::string& model_path, std::string chat_template)
    : file_(OpenModelFile(model_path)),
      tokenizer_(Tokenizer::FromGguf(file_)),
      chat_template_(ChatTemplate::Resolve(chat_template, tokenizer_)),
      weights_fingerprint_(WeightsFingerprint(file_)) {}

bool RequestKeyer::Configure(const std::string& kv_type, int block_size,
                             const std::string& numerics) {
  std::lock_guard lock(mutex_);
  if (root_) return kv_type == kv_type_ && block_size == block_size_ && numerics == numerics_;
  kv_type_ = kv_type;
  block_size_ = block_size;
  numerics_ = numerics;
  root_ = KvRootFingerprint(weights_fingerprint_, ParseKvType(kv_type), block_size, numerics);
  return true;
}

bool RequestKeyer::configured() const {
  std::lock_guard lock(mutex_);
  return root_.has_value();
}

std::optional<Digest> RequestKeyer::root() const {
  std::lock_guard lock(mutex_);
  return root_;
}

void RequestKeyer::SetTenants(std::unique_ptr<server::TenantRegistry> tenants) {
  tenants_ = std::move(tenants);
}

std::vector<int32_t> RequestKeyer::PromptTokens(const server::ParsedRequest& parsed) const {
  if (parsed.kind == server::ApiKind::kChat) {
    std::vector<ChatMessage> messages;
    for (const auto& message : parsed.messages) messages.push_back({message.role, message.content});
    std::string text;
    try {
      text = chat_template_.Render(messages, /*add_generation_prompt=*/true);
    } catch (const std::exception& error) {
      throw server::ApiError::BadRequest(
          fmt::format("{}: {}", chat_template_.description(), error.what()), "messages",
          "chat_template_error");
    }
    return EncodeChatPrompt(tokenizer_, text);  // the replica's BOS rule
  }
  const server::PromptInput& input = parsed.prompts.front();  // routed by the first prompt
  if (input.is_tokens) return input.tokens;
  return tokenizer_.EncodePrompt(input.text, /*add_bos=*/true);
}

RequestKeys RequestKeyer::Compute(server::ApiKind kind, const nlohmann::json& body,
                                  std::string_view authorization) const {
  server::ParsedRequest parsed = kind == server::ApiKind::kChat ? server::ParseChatRequest(body)
                                 : kind == server::ApiKind::kCompletion
                                     ? server::ParseCompletionRequest(body)
                                     : server::ParseGenerateRequest(body);
  RequestKeys keys;
  keys.streaming = parsed.stream;
  if (auto it = body.find("prompt_cache_key"); it != body.end() && it->is_string()) {
    keys.affinity = it->get<std::string>();
  }
  std::optional<Digest> root;
  int block_size = 0;
  {
    std::lock_guard lock(mutex_);
    root = root_;
    block_size = block_size_;
  }
  std::vector<int32_t> tokens = PromptTokens(parsed);
  keys.prompt_tokens = tokens.size();
  if (!root || !parsed.cache.task_id.empty()) return keys;
  keys.block_size = block_size;
  std::string salt = parsed.cache.cache_salt;
  if (tenants_ && tenants_->auth_required()) {
    // The replica mixes the caller's tenant salt in; a request it will refuse routes as is.
    if (const server::Tenant* tenant = tenants_->Authenticate(authorization)) {
      salt = tenants_->EngineSalt(*tenant, salt);
    }
  }
  Digest extras = ExtrasDigest(CacheKeyExtras{salt, ""});
  Digest parent = *root;
  const auto size = static_cast<size_t>(block_size);
  for (size_t start = 0; start + size <= tokens.size(); start += size) {
    parent = BlockKey(parent, extras, std::span<const int32_t>(tokens).subspan(start, size), true);
    keys.block_keys.push_back(parent);
  }
  return keys;
}

}  // namespace reprise::router
