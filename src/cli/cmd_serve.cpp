// `cortiq serve -m FILE [--host H] [--port P] [--parallel N] [-c CTX]
// [--kv-budget MB] [--api-key KEY] [-t N] [--spec lookup|draft ...]`: the OpenAI-compatible HTTP
// server (src/server). SIGINT / SIGTERM stop it cleanly.
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cortiq/cortiq.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "server/http_server.hpp"

namespace cortiq::cli {

namespace {

constexpr int kDefaultParallel = 4;

ArgParser serve_parser() {
  ArgParser parser("serve", "-m FILE [options]",
                   "Serves the model over HTTP with OpenAI's API: /v1/chat/completions,\n"
                   "/v1/completions, /v1/embeddings, /v1/models, plus /health, /metrics\n"
                   "(Prometheus), /tokenize and /detokenize. Requests run together (continuous\n"
                   "batching); prompts that share a prefix with earlier ones reuse its cached\n"
                   "KV blocks. See docs/server.md.");
  add_model_options(parser);
  parser.option("--host", "ADDR", "address to listen on (0.0.0.0: every interface)", "127.0.0.1")
      .option("--port", "P", "port to listen on (0: any free port)", "8080")
      .option("--parallel", "N", "sequences generating at once", std::to_string(kDefaultParallel))
      .option("--kv-budget", "MB",
              "KV memory shared by all sequences (default: --parallel full contexts)")
      .option("--state-snapshots", "N",
              "recurrent-state snapshots kept for prefix reuse by models with state "
              "(default: 2 per --parallel; 0: none)")
      .option("--queue", "N", "requests waiting for a slot before 503 (busy)", "64")
      .option("--api-key", "KEY", "require Authorization: Bearer KEY (not on /health)")
      .option("--alias", "NAME", "the model's name in the API (default: the file name)")
      .option("--max-body", "MB", "largest request body", "8")
      .option("--max-connections", "N", "connections open at once (more get 503)", "512")
      .option("--timeout", "S",
              "seconds a request's head may take to arrive (408 after), and a kept-alive "
              "connection may stay idle",
              "10");
  add_speculative_options(parser);
  return parser;
}

// SIGINT and SIGTERM stop the server from a thread that waits for them (no
// work in a signal handler). They are blocked in every thread, so they must
// be blocked before any other thread starts (the model's thread pool).
class SignalWatcher {
 public:
  SignalWatcher() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    sigaddset(&signals_, SIGUSR1);  // our own wake-up at exit
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
  }
  // The first signal stops the server gracefully; a second one exits at once.
  void watch(server::HttpServer& server) {
    thread_ = std::thread([this, &server] {
      bool stopping = false;
      for (;;) {
        int signal = 0;
        sigwait(&signals_, &signal);
        if (signal == SIGUSR1) return;
        if (stopping) {
          std::fputs("cortiq serve: second signal, exiting now\n", stderr);
          std::_Exit(128 + signal);
        }
        stopping = true;
        LOG_INFO("%s: stopping (a second signal exits at once)",
                 signal == SIGINT ? "SIGINT" : "SIGTERM");
        server.stop();
      }
    });
  }
  // Ends the watching thread; it may be inside server.stop(), so this must
  // run before the server is destroyed.
  void finish() {
    if (!thread_.joinable()) return;
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
  ~SignalWatcher() {
    finish();
    pthread_sigmask(SIG_UNBLOCK, &signals_, nullptr);
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  sigset_t signals_;
  std::thread thread_;
};

int64_t kv_cells_for(const ParsedArgs& args, const Model& model) {
  if (!args.has("kv-budget")) return 0;
  const int64_t mb = args.get_int("kv-budget", 1, int64_t{1} << 24);
  const KvCacheShape one = model.decoder().kv_cache_shape(1, 1, model.options().kv_type, 1);
  // Per position: the KV rows, not the sequence's fixed recurrent state.
  const auto state = one.state_width() * static_cast<int64_t>(sizeof(float));
  const auto per_position = static_cast<int64_t>(KvCache::bytes_needed(one)) - state;
  if (per_position <= 0) return 0;  // no KV rows at all: the default context
  return (mb << 20) / per_position;
}

}  // namespace

int run_serve(std::span<const std::string> argv) {
  const auto parsed = serve_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  // A client that hangs up must not kill the server with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  SignalWatcher watcher;

  server::ServerOptions options;
  options.host = args.get("host");
  options.port = static_cast<int>(args.get_int("port", 0, 65535));
  if (args.has("api-key")) options.api_key = args.get("api-key");
  if (args.has("api-key") && options.api_key.empty()) throw UsageError("--api-key is empty");
  options.max_body_bytes = static_cast<size_t>(args.get_int("max-body", 1, 4096)) << 20;
  options.limits.max_connections = static_cast<size_t>(args.get_int("max-connections", 1, 1 << 20));
  const auto timeout = std::chrono::seconds(args.get_int("timeout", 1, 3600));
  options.limits.head_timeout = timeout;
  options.limits.idle_timeout = timeout;
  options.scheduler.parallel = static_cast<int32_t>(args.get_int("parallel", 1, 256));
  options.scheduler.max_queued = args.get_int("queue", 0, 1 << 20);
  if (args.has("state-snapshots")) {
    options.scheduler.state_snapshots =
        static_cast<int32_t>(args.get_int("state-snapshots", 0, 4096));
  }

  const auto model = load_model_from(args);
  options.model_name = args.has("alias")
                           ? args.get("alias")
                           : std::filesystem::path(args.get("model")).filename().string();
  options.scheduler.kv_cells = kv_cells_for(args, *model);
  const SpeculativeOptions speculative = speculative_from(args, model);
  options.scheduler.drafter = speculative.drafter;
  options.scheduler.draft_max = speculative.draft_max;
  options.scheduler.draft_min = speculative.draft_min;
  options.scheduler.same_draws = speculative.same_draws;

  server::HttpServer server(model, options);
  const int port = server.bind();
  watcher.watch(server);
  LOG_INFO("serving %s: %d parallel sequences, context %lld, listening on http://%s:%d",
           options.model_name.c_str(), options.scheduler.parallel,
           static_cast<long long>(model->context_length()), options.host.c_str(), port);
  const bool served = server.serve();
  watcher.finish();
  if (!served) {
    std::fprintf(stderr, "error: the server stopped unexpectedly\n");
    return 1;
  }
  return 0;
}

}  // namespace cortiq::cli
