// The block keys of a request's prompt, computed as a replica computes them: the same request
// parser, chat template, BOS rule, tokenizer, cache salt and root fingerprint, with only the
// model file's tokenizer and metadata loaded (no weights).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sha256.h"
#include "gguf/gguf_file.h"
#include "server/parsed_request.h"
#include "server/tenants.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace reprise::router {

struct RequestKeys {
  std::vector<Digest> block_keys;  // the prompt's full blocks, first to last
  size_t prompt_tokens = 0;
  std::string affinity;  // prompt_cache_key, when the client sent one
  bool streaming = false;
  int block_size = 0;  // of the keys; 0 when none were computed
};

class RequestKeyer {
 public:
  // Opens the model file (mapped, not loaded) and its tokenizer. Throws Error.
  RequestKeyer(const std::string& model_path, std::string chat_template);

  // The replicas' KV settings and kernels' numerics (from their /v1/cache/stats); keys can be
  // computed once known. Returns false (and keeps the first) when they differ from ones already
  // set.
  bool Configure(const std::string& kv_type, int block_size, const std::string& numerics);
  bool configured() const;
  // The root fingerprint keys are computed under (nullopt until Configure).
  std::optional<Digest> root() const;
  // The replicas' tenants (the same API keys and cache secret): a request's keys then carry its
  // tenant's salt, as on the replica. Without them keys carry the client's cache_salt only,
  // which matches the replicas' keys only when they have no API keys (or share the cache across
  // tenants).
  void SetTenants(std::unique_ptr<server::TenantRegistry> tenants);

  // Parses the body as the replica will (a bad request throws the same server::ApiError the
  // replica would answer with). Without KV settings yet, or with a static task prompt (whose
  // tokens only the replica knows), block_keys stays empty.
  // `authorization`: the request's Authorization header (it names the tenant).
  RequestKeys Compute(server::ApiKind kind, const nlohmann::json& body,
                      std::string_view authorization = {}) const;

 private:
  std::vector<int32_t> PromptTokens(const server::ParsedRequest& parsed) const;

  gguf::GgufFile file_;
  Tokenizer tokenizer_;
  ChatTemplate chat_template_;  // resolved once, as the replica resolves its --chat-template
  Digest weights_fingerprint_{};
  std::unique_ptr<server::TenantRegistry> tenants_;  // null: no tenants
  mutable std::mutex mutex_;
  std::optional<Digest> root_;
  std::string kv_type_;
  int block_size_ = 0;
  std::string numerics_;
};

}  // namespace reprise::router
