// Model::load: the file, its tokenizer, the bound weights and the threads.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "base/thread_pool.hpp"
#include "cortiq/cortiq.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "grammar/gbnf_parser.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/token_mask.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "runtime/device_route.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

namespace {

// Physical memory in bytes from /proc/meminfo (0 when unknown).
uint64_t total_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemTotal:") return kib * 1024;
  }
  return 0;
}

// Reads one byte of every page of the weights so that the first tokens do
// not pay for page faults, reporting progress as it goes. Tensors with a
// packed copy are skipped: the kernels read the copy, and touching the
// file's pages would bring back what packing gave up.
void touch_weights(const gguf::GgufFile& file, const kernels::PackedWeightStore& packed,
                   const std::function<void(double)>& progress) {
  uint64_t total = 0;
  for (const auto& t : file.tensors()) total += t.data.size();
  if (total == 0) return;
  constexpr size_t kPage = 4096;
  constexpr uint64_t kReportEvery = uint64_t{64} << 20;
  uint64_t done = 0, next_report = kReportEvery;
  volatile unsigned char sink = 0;
  for (const auto& t : file.tensors()) {
    for (size_t off = 0; !packed.holds(t.data.data()) && off < t.data.size(); off += kPage) {
      sink = sink + static_cast<unsigned char>(t.data[off]);
    }
    done += t.data.size();
    if (done >= next_report) {
      progress(static_cast<double>(done) / static_cast<double>(total));
      next_report = done + kReportEvery;
    }
  }
  progress(1.0);
}

void check_memory(const gguf::GgufFile& file, uint64_t kv_bytes) {
  const uint64_t available = total_memory();
  const uint64_t needed = file.file_size() + kv_bytes;
  if (available != 0 && needed > available) {
    throw Error(strfmt(
        "%s does not fit in memory: it needs %s (weights %s + KV cache %s), this "
        "machine has %s",
        file.path().c_str(), human_bytes(needed).c_str(), human_bytes(file.file_size()).c_str(),
        human_bytes(kv_bytes).c_str(), human_bytes(available).c_str()));
  }
}

}  // namespace

Model::~Model() = default;

const grammar::TokenMask& Model::grammar_mask() const {
  std::call_once(grammar_mask_once_, [this] {
    // Each id's bytes as generation writes them; control tokens have none,
    // ids past the tokenizer's vocabulary (padded output rows) neither.
    const Vocab& vocab = tokenizer_->vocab();
    const auto n = static_cast<size_t>(n_vocab());
    std::vector<std::string> pieces(n);
    std::vector<TokenId> ends;
    for (size_t id = 0; id < n && id < vocab.tokens.size(); ++id) {
      const auto token = static_cast<TokenId>(id);
      pieces[id] = tokenizer_->token_to_piece(token);
      if (vocab.is_end_of_generation(token)) ends.push_back(token);
    }
    grammar_mask_ = std::make_unique<grammar::TokenMask>(pieces, std::move(ends));
  });
  return *grammar_mask_;
}

std::shared_ptr<const grammar::CompiledGrammar> compile_grammar(std::string_view gbnf) {
  return std::make_shared<const grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf));
}

std::shared_ptr<const grammar::CompiledGrammar> compile_json_schema(std::string_view schema) {
  const std::string gbnf = grammar::json_schema_to_gbnf(schema);
  try {
    return compile_grammar(gbnf);
  } catch (const Error& e) {
    // A rule the converter wrote that the matcher refuses (too ambiguous).
    throw Error(std::string("JSON schema: ") + e.what());
  }
}

const ModelHParams& Model::hparams() const {
  return decoder_->hparams();
}
int64_t Model::n_vocab() const {
  return decoder_->hparams().n_vocab;
}

std::string Model::chat_template() const {
  return file_->get_string("tokenizer.chat_template").value_or("");
}

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path,
                                         const LoadOptions& options) {
  if (options.threads < 0) throw Error("threads must be >= 0");
  if (options.context < 0) throw Error("context must be >= 0");
  if (options.chunk_size <= 0) throw Error("chunk size must be positive");
  std::shared_ptr<Model> model(new Model());
  model->options_ = options;
  model->file_ = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(path));
  const auto& file = *model->file_;
  model->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  ModelHParams file_hp = read_decoder_hparams(file);
  model->context_ =
      options.context > 0
          ? options.context
          : std::max(std::min(file_hp.n_ctx_train, kDefaultContextCap), options.min_context);
  // The model knows its context (Phi-3 chooses its LongRoPE factors by it).
  file_hp.n_ctx_seq = model->context_;
  model->decoder_ = load_decoder_model(file, std::move(file_hp));
  const auto& hp = model->decoder_->hparams();
  if (model->context_ > hp.n_ctx_train) {
    LOG_WARN("context %lld is longer than the model was trained for (%lld)",
             static_cast<long long>(model->context_), static_cast<long long>(hp.n_ctx_train));
  }
  if (const gguf::Value* t = file.find(kCalibrationTemperatureKey)) {
    const std::optional<double> value = t->as_double();
    if (!value || !(*value > 0.0) || !std::isfinite(*value)) {
      throw Error(strfmt("%s: %s must be a positive number", path.c_str(),
                         std::string(kCalibrationTemperatureKey).c_str()));
    }
    model->calibration_temperature_ = *value;
  }
  KvCacheShape kv = model->decoder_->kv_cache_shape(model->context_, 1, options.kv_type);
  kv.n_ubatch = options.chunk_size;  // as a Session sizes it
  check_memory(file, KvCache::bytes_needed(kv));
  if (options.progress) touch_weights(file, model->decoder_->packed_weights(), options.progress);
  model->pool_ = options.pool ? options.pool : std::make_shared<ThreadPool>(options.threads);
  model->device_route_ =
      DeviceRoute::open(options.device, options.gpu_layers, *model->decoder_, *model->pool_);
  return model;
}

KvType Model::kv_type_for(const KvCacheShape& shape) const {
  if (device_route_ == nullptr || shape.type != KvType::f16) return shape.type;
  // The device packs f16 rows two halves to a word: a layer whose rows are
  // an odd number of halves wide keeps f32 rows instead (no real model has
  // one).
  const bool odd = std::ranges::any_of(shape.layers, [](const KvLayerShape& layer) {
    return layer.k_width % 2 != 0 || layer.v_width % 2 != 0;
  });
  return odd ? KvType::f32 : KvType::f16;
}

std::unique_ptr<KvCache> Model::make_kv_cache(KvCacheShape shape) const {
  if (device_route_ == nullptr) return std::make_unique<KvCache>(shape);
  if (const KvType type = kv_type_for(shape); type != shape.type) {
    LOG_INFO("the device keeps f32 KV rows: a layer's rows are an odd number of halves wide");
    shape.type = type;
  }
  return std::make_unique<KvCache>(shape, device_route_->kv_parts());
}

void Model::run_pass(ForwardBuffers& buffers,
                     const std::function<void(ForwardContext&)>& fn) const {
  if (device_route_ != nullptr) return device_route_->pass(buffers, fn);
  CpuBackend cpu(*pool_, buffers.cpu);
  ForwardContext ctx{cpu, buffers};
  fn(ctx);
}

}  // namespace cortiq
