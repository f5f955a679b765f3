// An error that reaches an HTTP client as an OpenAI-style body
// `{"error": {"message", "type", "param", "code"}}` with its status.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace reprise::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type, std::string code = "",
           std::string param = "");

  // The common cases.
  static ApiError BadRequest(const std::string& message, const std::string& param = "",
                             const std::string& code = "");  // 400 invalid_request_error
  static ApiError NotFound(const std::string& message, const std::string& code);     // 404
  static ApiError Unauthorized();                                                    // 401
  static ApiError Unavailable(const std::string& message, const std::string& code);  // 503
  static ApiError Internal(const std::string& message);                              // 500

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }
  const std::string& param() const { return param_; }

  // {"error": {...}}; param and code are null when empty.
  nlohmann::json ToJson() const;

 private:
  int status_;
  std::string type_;
  std::string code_;
  std::string param_;
};

}  // namespace reprise::server
