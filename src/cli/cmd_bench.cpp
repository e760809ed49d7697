// `cortiq bench -m FILE [-p 512] [-n 128] [-d 0] [-t N] [-r REPS] [-o md|json|csv]`:
// prompt processing and generation speed with llama-bench's definitions, so
// the two tables can be pasted side by side:
//   ppN  prefill of N tokens into an empty cache (logits of the last only), tokens/s
//   tgN  N single-token decode steps from an empty cache, tokens/s
//   "ppN @ dD", "tgN @ dD": the same after D tokens already in the cache
//        (prefilled once, untimed; each run starts again from them)
// Each test runs once to warm up, then REPS times; mean ± standard deviation.
// For tg it also reports the bytes each step reads (the weights, and the
// cache rows attention reads) times tokens/s, against the machine's read
// bandwidth measured on the spot: how far decode is from the memory limit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "base/json_writer.hpp"
#include "base/log.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"
#include "base/thread_pool.hpp"
#include "base/timer.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/generation_args.hpp"
#include "cli/inspect_report.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/read_bandwidth.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "quant/quant_recipe.hpp"
#include "runtime/device_route.hpp"

namespace cortiq::cli {

namespace {

ArgParser bench_parser() {
  ArgParser parser(
      "bench", "-m FILE [-p N] [-n N] [-d N] [-t N] [-r REPS] [-o md|json|csv]",
      "Measures prompt processing (ppN: N tokens prefilled into an empty cache) and\n"
      "text generation (tgN: N single-token decode steps) in tokens/s, as llama-bench\n"
      "defines them; with -d D, after D tokens already in the cache (\"tg128 @ d4096\").\n"
      "Random token ids; one warm-up run, then REPS timed runs. For tg it reports the\n"
      "bytes read per token (weights and cache rows) times tokens/s against the\n"
      "machine's read bandwidth, measured on the spot.");
  parser.option("-m,--model", "FILE", "the .gguf model")
      .option("-p,--n-prompt", "N", "prompt tokens (0: skip)", "512")
      .option("-n,--n-gen", "N", "generated tokens (0: skip)", "128")
      .option("-d,--n-depth", "N", "tokens in the cache before each test", "0")
      .option("-t,--threads", "N", "threads (default: one per core)")
      .option("-r,--repetitions", "N", "timed runs per test", "5")
      .option("-b,--chunk", "N", "prefill chunk (rows per forward pass)",
              std::to_string(kDefaultChunkSize))
      .option("--kv-type", "T", "KV cache storage: f16 or f32", "f16")
      .option("-o,--output", "FMT", "md, json or csv", "md");
  add_device_options(parser);
  return parser;
}

struct TestResult {
  std::string name;  // "pp512", "tg128", "tg128 @ d4096"
  int64_t n_tokens = 0;
  int64_t depth = 0;
  std::vector<double> tokens_per_second;
  double bytes_per_token = 0;  // tg: weights and cache rows read per step
  double mean() const {
    return std::accumulate(tokens_per_second.begin(), tokens_per_second.end(), 0.0) /
           static_cast<double>(tokens_per_second.size());
  }
  double stddev() const {
    if (tokens_per_second.size() < 2) return 0.0;
    const double m = mean();
    double sum = 0;
    for (const double v : tokens_per_second) sum += (v - m) * (v - m);
    return std::sqrt(sum / static_cast<double>(tokens_per_second.size() - 1));
  }
};

std::vector<TokenId> random_ids(int64_t n, int64_t n_vocab, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<TokenId> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = static_cast<TokenId>(rng.next() % static_cast<uint64_t>(n_vocab));
  return ids;
}

// Seconds for one run of the test after the first `depth` tokens of the
// session's history (which holds at least those).
double run_once(Session& session, size_t depth, const std::vector<TokenId>& ids, bool one_by_one) {
  session.truncate(depth);
  Timer timer;
  if (one_by_one) {
    for (const TokenId id : ids) session.append(std::span<const TokenId>(&id, 1));
  } else {
    session.append(ids);
  }
  return timer.seconds();
}

TestResult run_test(Session& session, const std::string& name, int64_t n, int64_t depth,
                    bool one_by_one, int reps) {
  TestResult r;
  r.name = depth > 0 ? strfmt("%s @ d%lld", name.c_str(), static_cast<long long>(depth)) : name;
  r.n_tokens = n;
  r.depth = depth;
  const auto ids = random_ids(n, session.model().n_vocab(), 42);
  const auto d = static_cast<size_t>(depth);
  run_once(session, d, ids, one_by_one);  // warm-up: page faults, buffer growth
  for (int i = 0; i < reps; ++i) {
    r.tokens_per_second.push_back(static_cast<double>(n) / run_once(session, d, ids, one_by_one));
  }
  return r;
}

// The bytes of the matrices a decode step reads: every tensor but the
// lookup tables (token embeddings, unless they double as the output
// matrix, and position embeddings), of which a step reads one row; of a
// mixture of experts' stacks (ffn_*_exps), the share of the experts a
// token uses.
uint64_t bytes_read_per_step(const Model& model) {
  const auto& tensors = model.file().tensors();
  const ModelHParams& hp = model.decoder().hparams();
  const bool tied = std::none_of(tensors.begin(), tensors.end(),
                                 [](const auto& t) { return t.name == "output.weight"; });
  uint64_t n = 0;
  for (const auto& t : tensors) {
    if ((t.name == "token_embd.weight" && !tied) || t.name == "position_embd.weight") continue;
    const bool experts = hp.n_expert > 0 && t.name.find("_exps.") != std::string::npos;
    n += experts ? t.n_bytes * static_cast<uint64_t>(hp.n_expert_used) /
                       static_cast<uint64_t>(hp.n_expert)
                 : t.n_bytes;
  }
  return n;
}

// The mean bytes of cache rows attention reads per step of n decode steps
// after `depth` positions: each layer reads the keys and values of every
// position its window reaches.
double cache_bytes_per_step(const Model& model, int64_t depth, int64_t n) {
  const KvCacheShape shape = model.decoder().kv_cache_shape(1, 1, model.options().kv_type, 1);
  const bool f16 = model.kv_type_for(shape) == KvType::f16;  // as the cache keeps them
  const double element = f16 ? 2.0 : 4.0;
  double total = 0;
  for (int64_t p = depth; p < depth + n; ++p) {
    for (const KvLayerShape& layer : shape.layers) {
      const int64_t seen = layer.window > 0 ? std::min(p + 1, layer.window) : p + 1;
      total += static_cast<double>(seen * (layer.k_width + layer.v_width)) * element;
    }
  }
  return n > 0 ? total / static_cast<double>(n) : 0.0;
}

// "llama 1B Q4_0": the architecture, a size class from the parameter count,
// and the file type, as llama-bench names a model.
std::string model_label(const Model& model, uint64_t n_params) {
  const double billions = static_cast<double>(n_params) / 1e9;
  const std::string size = billions >= 1.0 ? strfmt("%.0fB", std::round(billions))
                                           : strfmt("%.0fM", std::round(billions * 1000));
  std::string type = "?";
  if (const auto ft = model.file().get_uint("general.file_type")) {
    for (const auto& recipe : quant_recipes()) {
      if (recipe.file_type == *ft) type = std::string(recipe.name);
    }
    if (*ft == 0) type = "all F32";
  }
  return model.hparams().arch + " " + size + " " + type;
}

// The bytes of the weights (llama-bench's "size": tensors, not the file).
uint64_t weight_bytes(const Model& model) {
  uint64_t n = 0;
  for (const auto& t : model.file().tensors()) n += t.n_bytes;
  return n;
}

std::string mib_or_gib(uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return mib >= 1024.0 ? strfmt("%.2f GiB", mib / 1024.0) : strfmt("%.2f MiB", mib);
}

// Achieved read rate of a tg test in bytes/s.
double achieved_bandwidth(const TestResult& r) {
  return r.bytes_per_token * r.mean();
}

// What every format reports beside the results.
struct BenchRun {
  std::string label;  // "llama 1B Q4_0"
  uint64_t bytes = 0;
  uint64_t params = 0;
  int threads = 0;
  // "CPU", "Vulkan" or "CPU+Vulkan" (-ngl), as llama-bench's backend
  // column, and the device's description ("" on the CPU).
  std::string backend = "CPU";
  std::string device;
  // The host's read bandwidth, measured on the spot (0: not measured: no
  // tg test, or the passes run on a device, whose peak is not measured).
  double bandwidth = 0;
};

void print_markdown(const BenchRun& run, const std::vector<TestResult>& results) {
  std::printf("| %-30s | %10s | %10s | %-10s | %7s | %15s | %20s |\n", "model", "size", "params",
              "backend", "threads", "test", "t/s");
  std::printf(
      "| ------------------------------ | ---------: | ---------: | ---------- | ------: | "
      "--------------: | -------------------: |\n");
  const std::string params_text = run.params >= 1000000000
                                      ? strfmt("%.2f B", static_cast<double>(run.params) / 1e9)
                                      : strfmt("%.2f M", static_cast<double>(run.params) / 1e6);
  for (const auto& r : results) {
    std::printf("| %-30s | %10s | %10s | %-10s | %7d | %15s | %20s |\n", run.label.c_str(),
                mib_or_gib(run.bytes).c_str(), params_text.c_str(), run.backend.c_str(),
                run.threads, r.name.c_str(), strfmt("%.2f ± %.2f", r.mean(), r.stddev()).c_str());
  }
  if (!run.device.empty()) std::printf("\ndevice: %s\n", run.device.c_str());
  for (const auto& r : results) {
    if (r.bytes_per_token <= 0) continue;
    const std::string rate = strfmt("%s: %s read per token x %.2f t/s = %.1f GB/s", r.name.c_str(),
                                    mib_or_gib(static_cast<uint64_t>(r.bytes_per_token)).c_str(),
                                    r.mean(), achieved_bandwidth(r) / 1e9);
    if (run.bandwidth > 0) {
      std::printf(
          "\n%s, %.0f %% of the machine's read bandwidth (%.1f GB/s measured with %d threads)\n",
          rate.c_str(), 100.0 * achieved_bandwidth(r) / run.bandwidth, run.bandwidth / 1e9,
          run.threads);
    } else {
      std::printf("\n%s (on %s)\n", rate.c_str(), run.backend.c_str());
    }
  }
}

void print_json(const BenchRun& run, const std::vector<TestResult>& results) {
  JsonWriter json(2);
  json.begin_array();
  for (const auto& r : results) {
    json.begin_object();
    json.key("model")
        .value(run.label)
        .key("model_size")
        .value(run.bytes)
        .key("model_n_params")
        .value(run.params);
    json.key("backends").value(run.backend);
    if (!run.device.empty()) json.key("device").value(run.device);
    json.key("n_threads").value(static_cast<int64_t>(run.threads)).key("test").value(r.name);
    json.key("n_tokens").value(r.n_tokens).key("n_depth").value(r.depth);
    json.key("avg_ts").value(r.mean()).key("stddev_ts").value(r.stddev());
    json.key("samples_ts").begin_array();
    for (const double v : r.tokens_per_second) json.value(v);
    json.end_array();
    if (r.bytes_per_token > 0) {
      json.key("bytes_per_token").value(r.bytes_per_token);
      json.key("read_bytes_per_second").value(achieved_bandwidth(r));
      if (run.bandwidth > 0) json.key("machine_read_bytes_per_second").value(run.bandwidth);
    }
    json.end_object();
  }
  json.end_array();
  std::printf("%s\n", json.text().c_str());
}

void print_csv(const BenchRun& run, const std::vector<TestResult>& results) {
  std::printf(
      "model,model_size,model_n_params,backends,n_threads,test,n_depth,avg_ts,stddev_ts,"
      "bytes_per_token,read_bytes_per_second,machine_read_bytes_per_second\n");
  for (const auto& r : results) {
    std::printf("\"%s\",%llu,%llu,%s,%d,%s,%lld,%.6f,%.6f", run.label.c_str(),
                static_cast<unsigned long long>(run.bytes),
                static_cast<unsigned long long>(run.params), run.backend.c_str(), run.threads,
                r.name.c_str(), static_cast<long long>(r.depth), r.mean(), r.stddev());
    if (r.bytes_per_token > 0) {
      std::printf(",%.0f,%.0f,", r.bytes_per_token, achieved_bandwidth(r));
      if (run.bandwidth > 0) std::printf("%.0f", run.bandwidth);
      std::printf("\n");
    } else {
      std::printf(",,,\n");
    }
  }
}

}  // namespace

int run_bench(std::span<const std::string> argv) {
  const auto parsed = bench_parser().parse(argv);
  if (!parsed) return 0;
  const ParsedArgs& args = *parsed;
  const int64_t n_prompt = args.get_int("n-prompt", 0, 1 << 20);
  const int64_t n_gen = args.get_int("n-gen", 0, 1 << 20);
  const int64_t depth = args.get_int("n-depth", 0, 1 << 24);
  const int reps = static_cast<int>(args.get_int("repetitions", 1, 1000));
  const std::string format = args.get("output");
  if (format != "md" && format != "json" && format != "csv") {
    throw UsageError("-o must be md, json or csv, got " + format);
  }
  const auto model = load_model_from(args, depth + std::max(n_prompt, n_gen));
  Session session(model);
  if (depth > 0) {
    LOG_INFO("bench: prefilling %lld tokens of depth", static_cast<long long>(depth));
    session.append(random_ids(depth, model->n_vocab(), 7));
  }
  std::vector<TestResult> results;
  if (n_prompt > 0)
    results.push_back(run_test(session, strfmt("pp%lld", static_cast<long long>(n_prompt)),
                               n_prompt, depth, false, reps));
  if (n_gen > 0) {
    results.push_back(run_test(session, strfmt("tg%lld", static_cast<long long>(n_gen)), n_gen,
                               depth, true, reps));
    results.back().bytes_per_token = static_cast<double>(bytes_read_per_step(*model)) +
                                     cache_bytes_per_step(*model, depth, n_gen);
  }
  BenchRun run;
  run.params = parameter_count(model->file());
  run.label = model_label(*model, run.params);
  run.bytes = weight_bytes(*model);
  run.threads = model->pool().size();
  if (const DeviceRoute* route = model->device_route()) {
    run.backend = route->first_device_layer() > 0 ? "CPU+Vulkan" : "Vulkan";
    run.device = route->description();
  } else if (n_gen > 0) {
    run.bandwidth = kernels::measure_read_bandwidth(model->pool());
  }
  if (format == "md") {
    print_markdown(run, results);
  } else if (format == "json") {
    print_json(run, results);
  } else {
    print_csv(run, results);
  }
  return 0;
}

}  // namespace cortiq::cli
