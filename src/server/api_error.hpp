// The errors the HTTP API answers with: an HTTP status and OpenAI's error
// object, {"error": {"message", "type", "code"}}. Request parsing and
// validation throw ApiError; the HTTP layer turns it into the response.
#pragma once

#include <stdexcept>
#include <string>

namespace cortiq::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string code, const std::string& message)
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_;
  std::string code_;
};

// 400: the request is malformed or asks for something invalid.
inline ApiError invalid_request(const std::string& message, std::string code = "invalid_request") {
  return ApiError(400, "invalid_request_error", std::move(code), message);
}

// 400: the prompt (plus what must be generated) does not fit the context.
inline ApiError context_overflow(const std::string& message) {
  return ApiError(400, "invalid_request_error", "context_length_exceeded", message);
}

// 503: the wait queue is full or the server is shutting down.
inline ApiError unavailable(const std::string& message) {
  return ApiError(503, "server_error", "unavailable", message);
}

}  // namespace cortiq::server
