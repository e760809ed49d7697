#include "cli/generation_args.hpp"

#include <chrono>
#include <cmath>
#include <random>

#include "base/log.hpp"
#include "base/strings.hpp"
#include "base/thread_pool.hpp"
#include "base/timer.hpp"
#include "cli/progress_bar.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "runtime/device_route.hpp"

namespace cortiq::cli {

void add_model_options(ArgParser& parser) {
  parser.option("-m,--model", "FILE", "the .gguf model")
      .option("-t,--threads", "N", "threads (default: one per core)")
      .option("-c,--ctx", "N", "context length (default: the model's, at most 4096)")
      .option("--kv-type", "T", "KV cache storage: f16 or f32", "f16");
  add_device_options(parser);
  parser
      .option("-b,--chunk", "N", "prefill chunk: prompt tokens per forward pass",
              std::to_string(kDefaultChunkSize))
      .flag("-v,--verbose",
            "log loading, memory per sequence and timings (CORTIQ_LOG=info, the default unless it "
            "says otherwise)");
}

void add_device_options(ArgParser& parser) {
  parser
      .option("--device", "D",
              "where passes run: cpu, vulkan (the first Vulkan device) or auto (a device when "
              "there is one; a model it cannot run stays on the CPU)",
              "cpu")
      .option("-ngl,--n-gpu-layers", "N",
              "with --device: the last N layers and the output head on the device, the rest on "
              "the CPU (-1: all)",
              "-1");
}

namespace {

// What one sequence (a session) takes beside the weights: its KV rows at
// the context, per position, and the recurrent state whatever its length.
void log_sequence_memory(const Model& model) {
  KvCacheShape shape =
      model.decoder().kv_cache_shape(model.context_length(), 1, model.options().kv_type);
  shape.n_ubatch = model.options().chunk_size;
  const auto state = static_cast<uint64_t>(shape.state_width()) * sizeof(float);
  const uint64_t kv = KvCache::bytes_needed(shape) - state;
  const uint64_t element = shape.type == KvType::f16 ? 2 : 4;
  uint64_t per_position = 0;
  for (const KvLayerShape& layer : shape.layers) {
    per_position += element * static_cast<uint64_t>(layer.k_width + layer.v_width);
  }
  std::string text = strfmt(
      "memory per sequence: KV cache %s at context %lld (%s bytes per "
      "position, %s)",
      human_bytes(kv).c_str(), static_cast<long long>(model.context_length()),
      with_commas(per_position).c_str(), element == 2 ? "f16" : "f32");
  if (state > 0) {
    text += strfmt(", recurrent state %s (f32, whatever the length)", human_bytes(state).c_str());
  }
  LOG_INFO("%s", text.c_str());
}

}  // namespace

std::shared_ptr<const Model> load_model_from(const ParsedArgs& args, int64_t min_context) {
  if (!args.has("model")) throw UsageError("missing -m FILE");
  if (args.has("verbose") && log_level() > LogLevel::info) set_log_level(LogLevel::info);
  LoadOptions options;
  if (args.has("threads")) options.threads = static_cast<int>(args.get_int("threads", 1, 1024));
  if (args.has("ctx")) options.context = args.get_int("ctx", 1, int64_t{1} << 30);
  options.min_context = min_context;
  options.chunk_size = args.get_int("chunk", 1, 1 << 16);
  const std::string kv = args.get("kv-type");
  if (kv == "f16") {
    options.kv_type = KvType::f16;
  } else if (kv == "f32") {
    options.kv_type = KvType::f32;
  } else {
    throw UsageError("--kv-type must be f16 or f32, got " + kv);
  }
  // Commands without the options (tokenize, inspect ...) run on the CPU.
  if (const std::string device = args.get("device"); !device.empty()) options.device = device;
  if (args.has("n-gpu-layers")) {
    options.gpu_layers = args.get_int("n-gpu-layers", -1, int64_t{1} << 20);
  }
  ProgressBar bar;
  Timer timer;
  const auto path = args.get("model");
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > (uint64_t{256} << 20)) {
    options.progress = [&](double fraction) {
      const auto done = static_cast<uint64_t>(fraction * static_cast<double>(size));
      bar.update(fraction >= 1.0 ? 1 : 0, 1, done, size, timer.seconds());
    };
  }
  auto model = Model::load(path, options);
  bar.finish();
  const auto& hp = model->hparams();
  LOG_INFO("loaded %s (%s, %lld layers, %s) in %.2f s; context %lld, %d threads", path.c_str(),
           hp.arch.c_str(), static_cast<long long>(hp.n_layer),
           human_bytes(model->file().file_size()).c_str(), timer.seconds(),
           static_cast<long long>(model->context_length()), model->pool().size());
  if (log_level() <= LogLevel::info) log_sequence_memory(*model);
  return model;
}

void add_sampling_options(ArgParser& parser) {
  const SamplingParams d;
  parser.option("--temp", "T", "temperature; 0 = greedy", strfmt("%g", d.temperature))
      .option("--top-k", "K", "keep the K most likely tokens; 0 = off", std::to_string(d.top_k))
      .option("--top-p", "P", "nucleus sampling in (0, 1]; 1 = off", strfmt("%g", d.top_p))
      .option("--min-p", "P", "drop tokens below P x the best probability; 0 = off",
              strfmt("%g", d.min_p))
      .option("--typical", "P", "locally typical sampling in (0, 1]; 1 = off",
              strfmt("%g", d.typical_p))
      .option("--repeat-penalty", "F", "penalise repeated tokens; 1 = off",
              strfmt("%g", d.repeat_penalty))
      .option("--repeat-last-n", "N", "tokens the penalties look back over (-1 = all)",
              std::to_string(d.penalty_last_n))
      .option("--presence-penalty", "F", "subtracted once from every seen token", "0")
      .option("--frequency-penalty", "F", "subtracted per occurrence", "0")
      .option("--logit-bias", "ID=B", "add B to token ID's logit (repeatable; -inf bans)")
      .option("--suppress", "ID", "never sample token ID (repeatable)")
      .option("--seed", "S", "random seed (default: random)");
}

void add_speculative_options(ArgParser& parser) {
  const SpeculativeOptions d;
  parser
      .option("--spec", "KIND",
              "speculative decoding: lookup (draft from n-grams of the prompt and the output), "
              "draft (a draft model) or mtp (the model's own multi-token-prediction layer: "
              "GLM-4.5); greedy output is that of plain decoding, token for "
              "token, and sampled output is distributed as plain sampling's")
      .option("--draft-model", "FILE",
              "the draft model for --spec draft (implies it): a smaller model of the same "
              "vocabulary")
      .option("--draft-max", "N", "drafted tokens per forward pass at most",
              std::to_string(d.draft_max))
      .option("--draft-min", "N", "draft nothing when fewer than N are proposed",
              std::to_string(d.draft_min))
      .flag("--spec-same-draws",
            "sampling with a draft model: draft greedily and keep the draws plain sampling makes "
            "with the same seed (fewer drafts kept than speculative sampling's min(1, p/q))")
      .option("--lookup-ngram-min", "N", "prompt lookup: shortest n-gram matched", "1")
      .option("--lookup-ngram-max", "N", "prompt lookup: longest n-gram matched", "4");
}

SpeculativeOptions speculative_from(const ParsedArgs& args,
                                    const std::shared_ptr<const Model>& model) {
  const Model& target = *model;
  SpeculativeOptions o;
  o.draft_max = args.get_int("draft-max", 1, 256);
  o.draft_min = args.get_int("draft-min", 0, 256);
  o.same_draws = args.has("spec-same-draws");
  const std::string kind = args.has("spec")          ? args.get("spec")
                           : args.has("draft-model") ? "draft"
                                                     : "";
  if (kind.empty()) return o;
  if (kind == "draft") {
    if (!args.has("draft-model")) throw UsageError("--spec draft needs --draft-model FILE");
    LoadOptions load = target.options();
    load.pool = target.shared_pool();  // the two take turns on the same threads
    load.context = target.context_length();
    load.progress = nullptr;
    // Beside its target: on the device, all its layers (-ngl counts the
    // target's), or on the CPU.
    load.device = target.device_route() != nullptr ? load.device : "cpu";
    load.gpu_layers = kAllLayers;
    Timer timer;
    const std::string path = args.get("draft-model");
    auto draft = Model::load(path, load);
    LOG_INFO("loaded the draft model %s (%s, %lld layers) in %.2f s", path.c_str(),
             draft->hparams().arch.c_str(), static_cast<long long>(draft->hparams().n_layer),
             timer.seconds());
    o.drafter = std::make_shared<DraftModelDrafter>(std::move(draft), target);
    return o;
  }
  if (args.has("draft-model")) throw UsageError("--draft-model goes with --spec draft");
  if (kind == "mtp") {
    o.drafter = std::make_shared<MtpDrafter>(model);
    return o;
  }
  if (kind != "lookup") {
    throw UsageError("--spec: '" + kind + "' is not a drafter Cortiq has (lookup, draft, mtp)");
  }
  const int64_t lo = args.get_int("lookup-ngram-min", 1, 64);
  const int64_t hi = args.get_int("lookup-ngram-max", 1, 64);
  if (lo > hi) throw UsageError("--lookup-ngram-min must not exceed --lookup-ngram-max");
  o.drafter = std::make_shared<PromptLookupDrafter>(lo, hi);
  return o;
}

std::string speculative_text(const SpeculativeStats& stats) {
  return strfmt("drafted %lld, accepted %lld (%.1f %%) in %lld passes (%.2f kept per pass)",
                static_cast<long long>(stats.drafted), static_cast<long long>(stats.accepted),
                100.0 * stats.acceptance_rate(), static_cast<long long>(stats.passes),
                stats.mean_accepted_length());
}

std::vector<TokenId> parse_ids(const std::string& text, const std::string& option) {
  std::vector<TokenId> ids;
  std::string current;
  const auto flush = [&] {
    if (current.empty()) return;
    int64_t v = 0;
    if (!parse_int64(current, v) || v < 0 || v > INT32_MAX) {
      throw UsageError(option + ": '" + current + "' is not a token id");
    }
    ids.push_back(static_cast<TokenId>(v));
    current.clear();
  };
  for (const char c : text) {
    if (c == ' ' || c == ',' || c == '\t' || c == '\n') {
      flush();
    } else {
      current += c;
    }
  }
  flush();
  return ids;
}

SamplingParams sampling_from(const ParsedArgs& args, int64_t n_vocab) {
  SamplingParams p;
  p.temperature = static_cast<float>(args.get_double("temp"));
  p.top_k = static_cast<int32_t>(args.get_int("top-k", 0, INT32_MAX));
  p.top_p = static_cast<float>(args.get_double("top-p"));
  p.min_p = static_cast<float>(args.get_double("min-p"));
  p.typical_p = static_cast<float>(args.get_double("typical"));
  p.repeat_penalty = static_cast<float>(args.get_double("repeat-penalty"));
  p.penalty_last_n = static_cast<int32_t>(args.get_int("repeat-last-n", -1, INT32_MAX));
  p.presence_penalty = static_cast<float>(args.get_double("presence-penalty"));
  p.frequency_penalty = static_cast<float>(args.get_double("frequency-penalty"));
  for (const auto& bias : args.get_all("logit-bias")) {
    const auto eq = bias.find('=');
    int64_t id = 0;
    double value = 0;
    const std::string v = eq == std::string::npos ? "" : bias.substr(eq + 1);
    const bool is_inf = v == "-inf" || v == "-INF";
    if (eq == std::string::npos || !parse_int64(bias.substr(0, eq), id) ||
        (!is_inf && !parse_double(v, value))) {
      throw UsageError("--logit-bias expects ID=BIAS, got " + bias);
    }
    if (id < 0 || id > INT32_MAX) throw UsageError("--logit-bias: bad token id in " + bias);
    p.logit_bias.emplace_back(static_cast<TokenId>(id),
                              is_inf ? -INFINITY : static_cast<float>(value));
  }
  for (const auto& s : args.get_all("suppress")) {
    for (const TokenId id : parse_ids(s, "--suppress")) p.suppressed.push_back(id);
  }
  if (args.has("seed")) {
    int64_t seed = 0;
    if (!parse_int64(args.get("seed"), seed)) throw UsageError("--seed expects an integer");
    p.seed = static_cast<uint64_t>(seed);
  } else {
    p.seed = std::random_device{}() ^
             static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  try {
    p.validate(n_vocab);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  return p;
}

void add_grammar_options(ArgParser& parser) {
  parser
      .option("--grammar", "FILE",
              "constrain the output to the GBNF grammar in FILE (llama.cpp's notation)")
      .option("--json-schema", "FILE|JSON",
              "constrain the output to JSON that the schema accepts (a file, or the schema\n"
              "itself when it starts with '{')");
}

std::shared_ptr<const grammar::CompiledGrammar> grammar_from(const ParsedArgs& args) {
  if (args.has("grammar") && args.has("json-schema")) {
    throw UsageError("--grammar and --json-schema cannot be used together");
  }
  if (args.has("json-schema")) {
    const std::string value = args.get("json-schema");
    const bool inline_schema = value.find_first_not_of(" \t\r\n") != std::string::npos &&
                               value[value.find_first_not_of(" \t\r\n")] == '{';
    if (inline_schema) return compile_json_schema(value);
    const std::string text = read_text_file(value);
    try {
      return compile_json_schema(text);
    } catch (const Error& e) {
      throw Error(value + ": " + e.what());
    }
  }
  if (!args.has("grammar")) return nullptr;
  const std::string path = args.get("grammar");
  const std::string text = read_text_file(path);
  try {
    return compile_grammar(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace cortiq::cli
