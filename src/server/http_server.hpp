// `cortiq serve`'s HTTP front: OpenAI-compatible endpoints over
// cpp-httplib, in front of the continuous-batching Scheduler.
//
//   POST /v1/chat/completions  POST /v1/completions  POST /v1/embeddings
//   GET  /v1/models  GET /health  GET /metrics  POST /tokenize  POST /detokenize
//
// Each request is served on an HTTP thread that parses and checks it, hands
// its jobs to the scheduler and writes the results as they come (server-sent
// events when streaming). A client that hangs up cancels its jobs: streams
// notice at the next token they write, waiting non-streaming requests at the
// next probe (a space, harmless before a JSON body, every second).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "server/http_front.hpp"
#include "server/scheduler.hpp"

namespace cortiq {
class Model;
}

namespace cortiq::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;         // 0: any free port (bind() says which)
  std::string api_key;     // non-empty: every endpoint but /health needs it
  std::string model_name;  // what /v1/models and responses call the model
  size_t max_body_bytes = size_t{8} << 20;
  HttpLimits limits;  // connections, heads, timeouts (http_front.hpp)
  SchedulerOptions scheduler;
};

class HttpServer {
 public:
  // Starts the scheduler; throws cortiq::Error when the KV memory or the
  // options do not work.
  HttpServer(std::shared_ptr<const Model> model, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket and returns its port; throws cortiq::Error
  // when the address cannot be bound.
  int bind();
  // Serves until stop(); returns false when the server could not listen.
  bool serve();
  // Ends serve(): running requests end with an error, new ones get 503.
  // Safe from any thread.
  void stop();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cortiq::server
