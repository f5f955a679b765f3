#include "server/api_error.h"

#include <fmt/format.h>

#include <utility>

#include "server/http_common.h"

namespace reprise::server {

ApiError::ApiError(int status, std::string message, std::string type, std::string code,
                   std::string param)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      code_(std::move(code)),
      param_(std::move(param)) {}

ApiError ApiError::BadRequest(const std::string& message, const std::string& param,
                              const std::string& code) {
  return ApiError(400, message, "invalid_request_error", code, param);
}

ApiError ApiError::NotFound(const std::string& message, const std::string& code) {
  return ApiError(404, message, "invalid_request_error", code);
}

ApiError ApiError::Unauthorized() {
  return ApiError(401, "invalid or missing API key (send 'Authorization: Bearer <key>')",
                  "authentication_error", "invalid_api_key");
}

ApiError ApiError::Unavailable(const std::string& message, const std::string& code) {
  return ApiError(503, message, "service_unavailable_error", code);
}

ApiError ApiError::Internal(const std::string& message) {
  return ApiError(500, message, "internal_server_error", "internal_error");
}

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", what()}, {"type", type_}};
  error["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
  error["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
  return {{"error", std::move(error)}};
}

ApiError DefaultError(const std::string& method, const std::string& path, int status,
                      size_t max_body_bytes) {
  switch (status) {
    case 404:
      return ApiError(404, fmt::format("Invalid URL ({} {})", method, path),
                      "invalid_request_error", "not_found");
    case 413:
      return ApiError(
          413, fmt::format("the request body is larger than the limit of {} bytes", max_body_bytes),
          "invalid_request_error", "request_too_large");
    case 400:
      return ApiError::BadRequest("malformed HTTP request");
    case 411:
      return ApiError(411, "a request body needs a Content-Length header", "invalid_request_error",
                      "length_required");
    default:
      return ApiError(status, fmt::format("HTTP error {}", status),
                      status >= 500 ? "internal_server_error" : "invalid_request_error");
  }
}

}  // namespace reprise::server
