#include "server/http_server.hpp"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "chat/chat_template.hpp"
#include "cortiq/cortiq.hpp"
#include "model/hparams.hpp"
#include "server/api_error.hpp"
#include "server/chat_page.hpp"
#include "server/http_front.hpp"
#include "server/metrics.hpp"
#include "server/openai_protocol.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);
// A waiting response writes something this often, so a client that hung up
// is noticed (the write fails) and its jobs are cancelled.
constexpr auto kProbeEvery = std::chrono::seconds(1);

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_json(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status(), error_body(error.type(), error.code(), error.what()));
  if (error.status() == 503) res.set_header("Retry-After", "1");
}

// Compares without an early exit, so the time taken does not tell how much
// of a guessed key was right.
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  }
  return diff == 0;
}

std::string template_source(const Model& model) {
  std::string source = model.chat_template();
  if (source.empty()) {
    LOG_WARN("the model has no chat template; chat requests use ChatML");
    source = std::string(chatml_template());
  }
  return source;
}

// One generation request in flight: what its HTTP thread has collected of
// the scheduler's events.
struct Generation {
  GenerationRequest request;
  ResponseId id;
  std::shared_ptr<RequestStream> stream;
  std::vector<ChoiceResult> choices;
  std::vector<bool> started;     // streaming: the choice's first chunk is out
  std::vector<size_t> streamed;  // streaming: bytes of the choice's text written
  size_t ended = 0;
  int64_t prompt_tokens = 0;  // of the first prompt, known before any result
  int64_t received = 0;       // token events so far
  std::string failure;        // the first failure reported, if any
  Clock::time_point arrived = Clock::now();
  Clock::time_point last_write = Clock::now();

  bool complete() const { return ended == choices.size(); }
};

// httplib's request handling (parsing, routing, writing the response),
// run by the connection front over connections whose heads it has read.
class RequestRouter : public httplib::Server {
 public:
  using httplib::Server::process_request;

  // httplib ends a streamed response early once its own listening socket
  // is gone (that is how its stop() ends streams); it never listens here,
  // so the socket's slot holds a marker while serving.
  void set_serving(bool serving) { svr_sock_ = serving ? kServingMarker : INVALID_SOCKET; }

 private:
  static constexpr socket_t kServingMarker = 0;  // never used as a socket
};

// Every streaming or waiting request holds a request thread: room for all
// that run and (up to a point) all that may wait, plus some for quick
// endpoints. Idle and slow connections hold none (http_front.hpp).
size_t request_threads(const ServerOptions& options) {
  return static_cast<size_t>(options.scheduler.parallel) +
         static_cast<size_t>(std::min<int64_t>(options.scheduler.max_queued, 256)) + 16;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(std::shared_ptr<const Model> model, ServerOptions options)
      : model_(std::move(model)),
        options_(std::move(options)),
        chat_template_(template_source(*model_)),
        scheduler_(model_, options_.scheduler, metrics_),
        api_{*model_,
             chat_template_,
             options_.model_name,
             scheduler_.context(),
             detect_tool_call_syntax(model_->chat_template()),
             template_wants_object_arguments(chat_template_)} {
    if (api_.tool_syntax != ToolCallSyntax::none) {
      LOG_INFO("tool calls: the chat template writes them in the %s syntax",
               std::string(tool_call_syntax_name(api_.tool_syntax)).c_str());
    }
    configure();
    routes();
    http_.set_serving(true);
  }

  int bind() { return front_.bind(options_.host, options_.port); }

  bool serve() {
    const bool ok = front_.serve();
    http_.set_serving(false);
    return ok;
  }

  void stop() {
    stopping_.store(true);
    scheduler_.stop();  // running requests get their failure events now
    // Let the responses in flight write those errors and end properly.
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    while (in_flight_.load() > 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    http_.set_serving(false);
    front_.stop();
  }

 private:
  void configure() {
    http_.set_payload_max_length(options_.max_body_bytes);
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return authorize(req, res) ? httplib::Server::HandlerResponse::Unhandled
                                 : httplib::Server::HandlerResponse::Handled;
    });
    http_.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      send_json(
          res, res.status,
          error_body(error_type(res.status), error_code(res.status), error_message(res.status)));
    });
    http_.set_exception_handler(
        [](const httplib::Request& req, httplib::Response& res, std::exception_ptr error) {
          std::string message = "internal error";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            message = e.what();
          } catch (...) {
          }
          LOG_ERROR("%s %s: %s", req.method.c_str(), req.path.c_str(), message.c_str());
          send_json(res, 500, error_body("server_error", "internal_error", message));
        });
    http_.set_logger([this](const httplib::Request&, const httplib::Response& res) {
      metrics_.count_response(res.status);
    });
  }

  // The body of a refusal the connection front answers itself.
  std::string refusal_body(int status) {
    metrics_.count_response(status);
    return dump(error_body(error_type(status), error_code(status), error_message(status)));
  }

  std::string error_message(int status) const {
    switch (status) {
      case 400:
        return "malformed HTTP request";
      case 404:
        return "no such endpoint";
      case 405:
        return "method not allowed on this endpoint";
      case 413:
        return strfmt("the request body is larger than %zu bytes", options_.max_body_bytes);
      case 408:
        return strfmt("the request's head did not come whole within %lld ms",
                      static_cast<long long>(options_.limits.head_timeout.count()));
      case 414:
        return strfmt("the request line is longer than %zu bytes",
                      options_.limits.max_request_line);
      case 431:
        return strfmt("the request's headers are more than %zu lines or %zu bytes",
                      options_.limits.max_headers, options_.limits.max_head_bytes);
      case 503:
        return strfmt("the server has %zu connections open; retry later",
                      options_.limits.max_connections);
      default:
        return "HTTP error " + std::to_string(status);
    }
  }

  static std::string error_code(int status) {
    switch (status) {
      case 404:
        return "not_found";
      case 405:
        return "method_not_allowed";
      case 413:
        return "request_too_large";
      case 408:
        return "request_timeout";
      case 414:
        return "uri_too_long";
      case 431:
        return "headers_too_large";
      case 503:
        return "too_many_connections";
      default:
        return std::to_string(status);
    }
  }

  static std::string error_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    return status >= 500 ? "server_error" : "invalid_request_error";
  }

  bool authorize(const httplib::Request& req, httplib::Response& res) const {
    // The page holds nothing secret; it asks for the key itself.
    if (options_.api_key.empty() || req.path == "/health" || req.path == "/") return true;
    if (same_secret(req.get_header_value("Authorization"), "Bearer " + options_.api_key)) {
      return true;
    }
    send_error(res, ApiError(401, "authentication_error", "invalid_api_key",
                             "missing or wrong API key (Authorization: Bearer KEY)"));
    res.set_header("Connection", "close");  // its body, if any, is never read
    return false;
  }

  // Runs an endpoint, answering ApiError and cortiq::Error as JSON errors.
  template <class Endpoint>
  void run_guarded(httplib::Response& res, Endpoint&& endpoint) {
    try {
      endpoint();
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const Error& e) {
      send_error(res, invalid_request(e.what()));
    }
  }

  // Reads the body through httplib's content reader, so the size limit
  // holds for chunked uploads too (httplib's own limit sees only a
  // Content-Length, and then refuses before reading). Returns false, with
  // the error answered, when the body is too big or could not be read.
  bool read_body(const httplib::ContentReader& reader, std::string& body,
                 httplib::Response& res) const {
    bool too_large = false;
    const bool read = reader([&](const char* data, size_t length) {
      if (body.size() + length > options_.max_body_bytes) {
        too_large = true;
        return false;
      }
      body.append(data, length);
      return true;
    });
    if (read) return true;
    res.set_header("Connection", "close");  // the rest of the body is never read
    if (too_large || res.status == 413) {
      res.status = 413;
    } else {
      send_error(res, invalid_request("the request body could not be read"));
    }
    return false;
  }

  void routes() {
    using BodyEndpoint = void (Impl::*)(const std::string&, httplib::Response&);
    using PlainEndpoint = void (Impl::*)(httplib::Response&);
    const auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
      res.status = 405;
    };
    const auto post = [&](const char* path, BodyEndpoint endpoint) {
      known_paths_.insert(path);
      http_.Post(path, [this, endpoint](const httplib::Request&, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
        std::string body;
        if (!read_body(reader, body, res)) return;
        run_guarded(res, [&] { (this->*endpoint)(body, res); });
      });
      http_.Get(path, not_allowed);
    };
    const auto get = [&](const char* path, PlainEndpoint endpoint) {
      known_paths_.insert(path);
      http_.Get(path, [this, endpoint](const httplib::Request&, httplib::Response& res) {
        run_guarded(res, [&] { (this->*endpoint)(res); });
      });
    };
    post("/v1/chat/completions", &Impl::chat_completions);
    post("/chat/completions", &Impl::chat_completions);
    post("/v1/completions", &Impl::completions);
    post("/completions", &Impl::completions);
    post("/v1/embeddings", &Impl::embeddings);
    post("/embeddings", &Impl::embeddings);
    post("/tokenize", &Impl::tokenize);
    post("/detokenize", &Impl::detokenize);
    get("/v1/models", &Impl::models);
    get("/models", &Impl::models);
    get("/health", &Impl::health);
    get("/", &Impl::page);
    get("/metrics", &Impl::metrics);
    // Every other request with a body is answered without reading it (an
    // unknown route must not make the server buffer an unbounded upload).
    const auto refuse = [this](const httplib::Request& req, httplib::Response& res,
                               const httplib::ContentReader&) {
      res.status = known_paths_.count(req.path) ? 405 : 404;
      res.set_header("Connection", "close");
    };
    http_.Post(".*", refuse);
    http_.Put(".*", refuse);
    http_.Patch(".*", refuse);
    http_.Delete(".*", refuse);
    http_.Delete(".*", [this](const httplib::Request& req, httplib::Response& res) {
      res.status = known_paths_.count(req.path) ? 405 : 404;  // a DELETE without a body
    });
  }

  // --- endpoints ----------------------------------------------------------

  void health(httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); }

  // The chat page: it talks to this server's API only (its script and
  // style are inline, nothing else is loaded).
  void page(httplib::Response& res) {
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                   "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::string(chat_page()), "text/html; charset=utf-8");
  }

  void metrics(httplib::Response& res) {
    res.set_content(metrics_.prometheus_text(), "text/plain; version=0.0.4");
  }

  void models(httplib::Response& res) { send_json(res, 200, models_response(api_, started_)); }

  void tokenize(const std::string& body, httplib::Response& res) {
    const auto request = parse_tokenize_request(parse_body(body), api_);
    send_json(res, 200, tokenize_response(request, api_));
  }

  void detokenize(const std::string& body, httplib::Response& res) {
    const auto ids = parse_detokenize_request(parse_body(body), api_);
    send_json(res, 200, {{"content", model_->tokenizer().decode(ids)}});
  }

  void embeddings(const std::string& body, httplib::Response& res) {
    const auto request = parse_embedding_request(parse_body(body), api_);
    const auto n = request.jobs.size();
    auto stream = std::make_shared<RequestStream>();
    scheduler_.submit(request.jobs, stream);
    std::vector<std::vector<float>> vectors(n);
    int64_t tokens = 0;
    size_t done = 0;
    std::string failure;
    std::vector<StreamEvent> events;
    while (done < n) {
      events.clear();
      stream->wait(events, kPoll);
      for (auto& event : events) {
        ++done;
        if (event.kind == StreamEvent::Kind::embedding) {
          tokens += event.embedding_tokens;
          vectors[static_cast<size_t>(event.choice)] = std::move(event.embedding);
        } else if (event.kind == StreamEvent::Kind::failed && failure.empty()) {
          failure = event.error;
        }
      }
    }
    if (!failure.empty()) throw ApiError(500, "server_error", "embedding_failed", failure);
    send_json(res, 200, embedding_response(request, api_, vectors, tokens));
  }

  void chat_completions(const std::string& body, httplib::Response& res) {
    generate(Endpoint::chat, body, res);
  }

  void completions(const std::string& body, httplib::Response& res) {
    generate(Endpoint::completion, body, res);
  }

  void generate(Endpoint endpoint, const std::string& body, httplib::Response& res) {
    if (model_->hparams().encoder) {
      throw invalid_request(model_->hparams().arch +
                            " is a text encoder: it gives embeddings (POST /v1/embeddings), "
                            "not completions");
    }
    auto gen = std::make_shared<Generation>();
    gen->request = parse_generation_request(endpoint, parse_body(body), api_, body);
    const size_t n = gen->request.jobs.size();
    gen->id.id = strfmt("%s-%llx%06llx", endpoint == Endpoint::chat ? "chatcmpl" : "cmpl",
                        static_cast<unsigned long long>(unix_seconds()),
                        static_cast<unsigned long long>(++request_counter_));
    gen->id.created = unix_seconds();
    gen->choices.resize(n);
    gen->prompt_tokens = static_cast<int64_t>(gen->request.jobs.front().prompt.size());
    gen->started.assign(n, false);
    gen->streamed.assign(n, 0);
    gen->stream = std::make_shared<RequestStream>();
    scheduler_.submit(std::move(gen->request.jobs), gen->stream);
    gen->request.jobs.clear();
    ++in_flight_;

    const auto release = [this, gen](bool) {
      // The response ended: a client that left early cancels what still runs.
      if (!gen->complete()) gen->stream->cancel();
      log_request(*gen);
      --in_flight_;
    };
    if (gen->request.stream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");  // proxies: pass each event on at once
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, gen](size_t, httplib::DataSink& sink) {
            return guarded_write(*gen, [&] { return stream_events(*gen, sink); });
          },
          release);
      return;
    }
    // Not streaming: a quick result gets a plain response (with a proper
    // status on failure); a long one becomes a chunked response that probes
    // the client while it waits.
    const auto deadline = Clock::now() + kProbeEvery;
    while (!gen->complete() && Clock::now() < deadline) collect(*gen, kPoll);
    if (gen->complete()) {
      release(true);
      if (!gen->failure.empty()) {
        throw ApiError(500, "server_error", "generation_failed", gen->failure);
      }
      send_json(res, 200, generation_response(gen->request, gen->id, api_, gen->choices));
      return;
    }
    res.set_chunked_content_provider(
        "application/json",
        [this, gen](size_t, httplib::DataSink& sink) {
          return guarded_write(*gen, [&] { return wait_whole(*gen, sink); });
        },
        release);
  }

  // httplib runs content providers outside its exception handling: an
  // exception there would end the process. Log it and end the response.
  template <class Write>
  bool guarded_write(Generation& gen, Write&& write) {
    try {
      return write();
    } catch (const std::exception& e) {
      LOG_ERROR("%s: writing the response failed: %s", gen.id.id.c_str(), e.what());
      gen.stream->cancel();
      return false;
    }
  }

  // Applies the events that arrived within `timeout`; returns them for a
  // stream to write.
  std::vector<StreamEvent> collect(Generation& gen, std::chrono::milliseconds timeout) {
    std::vector<StreamEvent> events;
    gen.stream->wait(events, timeout);
    for (auto& event : events) {
      auto& choice = gen.choices[static_cast<size_t>(event.choice)];
      switch (event.kind) {
        case StreamEvent::Kind::token:
          ++gen.received;
          choice.text += event.text;
          // Tool calls are read from the tokens (with special tokens' text).
          if (gen.request.tool_syntax != ToolCallSyntax::none) choice.tokens.push_back(event.token);
          if (event.has_logprob) choice.logprobs.push_back(event.logprob);
          break;
        case StreamEvent::Kind::finished:
          choice.text += event.text;
          choice.end = event.end;
          choice.stats = event.stats;
          ++gen.ended;
          break;
        case StreamEvent::Kind::failed:
          if (gen.failure.empty()) gen.failure = event.error;
          choice.end = ChoiceEnd::cancelled;
          ++gen.ended;
          break;
        case StreamEvent::Kind::embedding:
          break;
      }
    }
    return events;
  }

  bool write(Generation& gen, httplib::DataSink& sink, const std::string& data) {
    gen.last_write = Clock::now();
    if (!fault::due(fault::Site::client_write) && sink.write(data.data(), data.size())) return true;
    gen.stream->cancel();
    return false;
  }

  bool write_event(Generation& gen, httplib::DataSink& sink, const Json& json) {
    return write(gen, sink, "data: " + dump(json) + "\n\n");
  }

  // Server-sent events: one chunk per token with text (or logprobs), a
  // final chunk per choice, usage when asked, then [DONE].
  bool stream_events(Generation& gen, httplib::DataSink& sink) {
    const auto events = collect(gen, kPoll);
    if (events.empty() && Clock::now() - gen.last_write >= kProbeEvery) {
      return write(gen, sink, ": waiting\n\n");  // an SSE comment: clients skip it
    }
    for (const auto& event : events) {
      const auto c = static_cast<size_t>(event.choice);
      if (gen.request.tool_syntax != ToolCallSyntax::none &&
          event.kind != StreamEvent::Kind::failed) {
        // A reply with tools is sent whole at its end, its calls parsed out.
        if (event.kind != StreamEvent::Kind::finished || event.end == ChoiceEnd::cancelled)
          continue;
        for (const Json& chunk : tool_reply_chunks(gen.request, gen.id, api_, event.choice,
                                                   gen.choices[c], !gen.started[c])) {
          if (!write_event(gen, sink, chunk)) return false;
        }
        gen.started[c] = true;
        continue;
      }
      // A chunk for new text, and one that opens each choice (the role).
      const bool has_text = !event.text.empty() || event.has_logprob;
      const bool opens =
          event.kind == StreamEvent::Kind::token ||
          (event.kind == StreamEvent::Kind::finished && event.end != ChoiceEnd::cancelled);
      if (opens && (has_text || !gen.started[c])) {
        std::vector<TokenLogprob> logprobs;
        if (event.has_logprob) logprobs.push_back(event.logprob);
        const Json chunk = text_chunk(gen.request, gen.id, api_, event.choice, event.text, logprobs,
                                      gen.streamed[c], !gen.started[c]);
        gen.started[c] = true;
        gen.streamed[c] += event.text.size();
        if (!write_event(gen, sink, chunk)) return false;
      }
      if (event.kind == StreamEvent::Kind::finished && event.end != ChoiceEnd::cancelled) {
        if (!write_event(gen, sink,
                         final_chunk(gen.request, gen.id, api_, event.choice, event.end))) {
          return false;
        }
      } else if (event.kind == StreamEvent::Kind::failed) {
        if (!write_event(gen, sink, error_body("server_error", "generation_failed", event.error))) {
          return false;
        }
      }
    }
    if (!gen.complete()) return true;
    if (gen.request.include_usage &&
        !write_event(gen, sink, usage_chunk(gen.request, gen.id, api_, gen.choices))) {
      return false;
    }
    if (!write(gen, sink, "data: [DONE]\n\n")) return false;
    sink.done();
    return true;
  }

  // A long non-streaming request: JSON ignores leading whitespace, so a
  // space now and then tells whether the client is still there.
  bool wait_whole(Generation& gen, httplib::DataSink& sink) {
    collect(gen, kPoll);
    if (!gen.complete()) {
      return Clock::now() - gen.last_write < kProbeEvery || write(gen, sink, " ");
    }
    const Json body = gen.failure.empty()
                          ? generation_response(gen.request, gen.id, api_, gen.choices)
                          : error_body("server_error", "generation_failed", gen.failure);
    if (!write(gen, sink, dump(body))) return false;
    sink.done();
    return true;
  }

  // One line per request: what it cost and how fast it went.
  void log_request(const Generation& gen) {
    if (gen.choices.empty()) return;
    const double seconds = std::chrono::duration<double>(Clock::now() - gen.arrived).count();
    if (!gen.complete()) {
      LOG_INFO(
          "%s: prompt %lld tokens, ended early (client gone or server stopping) after %lld "
          "tokens, %.2f s",
          gen.id.id.c_str(), static_cast<long long>(gen.prompt_tokens),
          static_cast<long long>(gen.received), seconds);
      return;
    }
    if (!gen.failure.empty()) {
      LOG_INFO("%s: prompt %lld tokens, failed after %lld tokens, %.2f s: %s", gen.id.id.c_str(),
               static_cast<long long>(gen.prompt_tokens), static_cast<long long>(gen.received),
               seconds, gen.failure.c_str());
      return;
    }
    int64_t generated = 0;
    for (const auto& c : gen.choices) generated += c.stats.generated_tokens;
    const auto& s = gen.choices.front().stats;
    const double decode_rate = s.decode_ms > 0 && s.generated_tokens > 1
                                   ? (s.generated_tokens - 1) * 1e3 / s.decode_ms
                                   : 0;
    const std::string end(finish_reason(gen.choices.front().end));
    LOG_INFO(
        "%s: prompt %lld tokens (%lld cached), generated %lld, ttft %.1f ms, %.1f tokens/s, "
        "%.2f s, finish %s",
        gen.id.id.c_str(), static_cast<long long>(s.prompt_tokens),
        static_cast<long long>(s.cached_tokens), static_cast<long long>(generated), s.ttft_ms,
        decode_rate, seconds, end.c_str());
  }

  std::shared_ptr<const Model> model_;
  ServerOptions options_;
  ChatTemplate chat_template_;
  Metrics metrics_;
  Scheduler scheduler_;
  ApiContext api_;
  RequestRouter http_;
  HttpFront front_{options_.limits, request_threads(options_),
                   [this](httplib::Stream& stream, bool close_connection, bool& closed) {
                     return http_.process_request(stream, close_connection, closed, nullptr);
                   },
                   [this](int status) { return refusal_body(status); }};
  int64_t started_ = unix_seconds();
  std::atomic<uint64_t> request_counter_{0};
  std::atomic<int64_t> in_flight_{0};  // generation responses not yet released
  std::atomic<bool> stopping_{false};
  std::set<std::string> known_paths_;  // written before serving, then only read
};

HttpServer::HttpServer(std::shared_ptr<const Model> model, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  return impl_->bind();
}

bool HttpServer::serve() {
  return impl_->serve();
}

void HttpServer::stop() {
  impl_->stop();
}

}  // namespace cortiq::server
