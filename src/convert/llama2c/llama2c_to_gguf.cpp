#include "convert/llama2c/llama2c_to_gguf.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "base/thread_pool.hpp"
#include "base/timer.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "model/arch/arch.hpp"
#include "quant/quantize.hpp"
#include "quant/quantize_model.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::llama2c {

namespace {

struct LayerTensor {
  std::string_view suffix;  // after "blk.N."
  Weight weight;
};

constexpr LayerTensor kLayerTensors[] = {
    {"attn_norm.weight", Weight::rms_att}, {"attn_q.weight", Weight::wq},
    {"attn_k.weight", Weight::wk},         {"attn_v.weight", Weight::wv},
    {"attn_output.weight", Weight::wo},    {"ffn_norm.weight", Weight::rms_ffn},
    {"ffn_gate.weight", Weight::w1},       {"ffn_down.weight", Weight::w2},
    {"ffn_up.weight", Weight::w3},
};

// "<0x0A>" and the like: SentencePiece's byte-fallback pieces.
bool is_byte_piece(std::string_view piece) {
  const auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  return piece.size() == 6 && piece.starts_with("<0x") && piece[5] == '>' && hex(piece[3]) &&
         hex(piece[4]);
}

std::string replace_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (const char c : piece) {
    if (c == ' ') {
      out += "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
    } else {
      out += c;
    }
  }
  return out;
}

uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

std::vector<gguf::KeyValue> ids_only_tokenizer() {
  // The peer and Vocab::from_gguf take the size from llama.vocab_size (in the
  // architecture keys) and, for no_vocab, no special ids; the ids are still
  // written so that the file states run.c's convention.
  return {
      {"tokenizer.ggml.model", gguf::Value(std::string("no_vocab"))},
      {"tokenizer.ggml.bos_token_id", gguf::Value(kBosId)},
      {"tokenizer.ggml.eos_token_id", gguf::Value(kEosId)},
  };
}

// Converts one tensor's rows from the checkpoint floats into `type`, rows
// spread over the pool.
void encode_rows(std::span<const std::byte> floats, GgmlType type, int64_t row_length,
                 ThreadPool& pool, std::vector<std::byte>& out) {
  const uint64_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(row_length));
  const auto n_rows = static_cast<int64_t>(floats.size() / 4 / static_cast<uint64_t>(row_length));
  out.resize(static_cast<size_t>(row_bytes * static_cast<uint64_t>(n_rows)));
  pool.parallel_for(
      n_rows,
      [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(row_length));
        for (int64_t r = begin; r < end; ++r) {
          std::memcpy(row.data(), floats.data() + r * row_length * 4, row.size() * 4);
          quantize_row(type, row,
                       std::span(out).subspan(static_cast<size_t>(r * row_bytes), row_bytes));
        }
      },
      16);
}

// A legacy file holds the RoPE table of its training (freq_cis); run.c
// ignores it and uses base 10000, as the GGUF will. Warn when the table says
// otherwise (a fork trained with another base): position 1 holds
// cos/sin(base^(-2i/head_size)).
void check_rope_table(const Checkpoint& checkpoint) {
  const Config& c = checkpoint.config();
  if (checkpoint.find(Weight::freq_cis_real) == nullptr || c.seq_len < 2) return;
  const std::vector<float> real = checkpoint.item_floats(Weight::freq_cis_real);
  const std::vector<float> imag = checkpoint.item_floats(Weight::freq_cis_imag);
  const int64_t half = c.head_size() / 2;
  double worst = 0;
  for (int64_t i = 0; i < half; ++i) {
    const double angle =
        std::pow(kRopeBase, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_size()));
    worst = std::max({worst, std::abs(real[half + i] - std::cos(angle)),
                      std::abs(imag[half + i] - std::sin(angle))});
  }
  if (!(worst <= 1e-4)) {
    LOG_WARN(
        "%s: freq_cis is not RoPE with base %g (off by %.3g at position 1); the GGUF "
        "states base %g, which run.c uses",
        checkpoint.path().c_str(), kRopeBase, worst, kRopeBase);
  }
}

}  // namespace

ModelGeometry geometry_of(const Config& c) {
  ModelGeometry g;
  g.n_vocab = c.vocab_size;
  g.n_embd = c.dim;
  g.n_layer = c.n_layers;
  g.n_head = c.n_heads;
  g.n_head_kv = c.n_kv_heads;
  g.head_dim = 0;  // dim / n_heads
  g.n_ff = c.hidden_dim;
  g.n_ctx = c.seq_len;
  g.rope_base = kRopeBase;
  g.rms_eps = kRmsEps;
  g.tied = c.shared_classifier;
  return g;
}

std::optional<Source> source_of(std::string_view name) {
  if (name == "token_embd.weight") return Source{Weight::token_embedding};
  if (name == "output_norm.weight") return Source{Weight::rms_final};
  if (name == "output.weight") return Source{Weight::wcls};
  if (!name.starts_with("blk.")) return std::nullopt;
  name.remove_prefix(4);
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.' ||
      layer < 0) {
    return std::nullopt;
  }
  const std::string_view suffix = name.substr(static_cast<size_t>(end - name.data()) + 1);
  for (const LayerTensor& t : kLayerTensors) {
    if (t.suffix == suffix) return Source{t.weight, layer};
  }
  return std::nullopt;
}

Vocabulary spm_vocabulary(const TokenizerFile& tokenizer, std::string_view name) {
  Vocabulary v;
  const size_t n = tokenizer.pieces.size();
  v.tokens.reserve(n);
  v.types.reserve(n);
  v.scores = tokenizer.scores;
  for (size_t id = 0; id < n; ++id) {
    const std::string& piece = tokenizer.pieces[id];
    if (id == 0) {
      v.tokens.push_back("<unk>");
      v.types.push_back(TokenType::unknown);
    } else if (id == kBosId) {  // exported as "\n<s>\n"
      v.tokens.push_back("<s>");
      v.types.push_back(TokenType::control);
    } else if (id == kEosId) {  // exported as "\n</s>\n"
      v.tokens.push_back("</s>");
      v.types.push_back(TokenType::control);
    } else if (piece.empty()) {
      v.tokens.push_back(piece);
      v.types.push_back(TokenType::control);
    } else if (is_byte_piece(piece)) {
      v.tokens.push_back(piece);
      v.types.push_back(TokenType::byte);
    } else {
      v.tokens.push_back(replace_spaces(piece));
      v.types.push_back(TokenType::normal);
    }
  }
  // The peer aborts on a vocabulary with two equal tokens (it renames empty
  // ones to "[EMPTY_<id>]" first, as Vocab does): refuse it here.
  std::unordered_map<std::string, size_t> first_id;
  for (size_t id = 0; id < n; ++id) {
    const std::string& token = v.tokens[id];
    const auto [it, inserted] =
        first_id.emplace(token.empty() ? "[EMPTY_" + std::to_string(id) + "]" : token, id);
    if (!inserted) {
      throw Error(
          strfmt("%s: tokens %zu and %zu are both \"%s\" (llama.cpp refuses a vocabulary "
                 "with duplicate tokens)",
                 std::string(name).c_str(), it->second, id, token.c_str()));
    }
  }
  v.unk_id = 0;
  v.bos_id = kBosId;
  v.eos_id = kEosId;
  return v;
}

ConvertSummary convert_to_gguf(const Checkpoint& checkpoint, const std::filesystem::path& output,
                               const ConvertOptions& options) {
  const Timer timer;
  const QuantRecipe& recipe =
      options.recipe != nullptr ? *options.recipe : *find_quant_recipe("F32");
  const Config& config = checkpoint.config();
  const ModelGeometry geometry = geometry_of(config);
  check_rope_table(checkpoint);

  // The tokenizer first: a mismatch fails before any work.
  std::vector<gguf::KeyValue> tokenizer_keys = ids_only_tokenizer();
  if (!options.tokenizer.empty()) {
    tokenizer_keys = tokenizer_metadata(spm_vocabulary(
        read_tokenizer(options.tokenizer, config.vocab_size), options.tokenizer.string()));
  }

  const ModelSpec model = model_spec(kLlamaFamily, geometry);  // validates
  const std::vector<TensorSpec>& specs = model.tensors;
  std::vector<TensorDesc> descs;
  std::vector<Source> sources;
  for (const TensorSpec& spec : specs) {
    const std::optional<Source> source = source_of(spec.name);
    const ArrayInfo* array = source ? checkpoint.find(source->weight) : nullptr;
    if (array == nullptr || array->item_floats != element_count(spec.shape)) {
      throw Error("internal error: llama tensor " + spec.name +
                  " has no matching array in the llama2.c checkpoint");
    }
    descs.push_back({spec.name, spec.shape});
    sources.push_back(*source);
  }
  ModelShape shape;
  shape.n_layer = static_cast<uint32_t>(geometry.n_layer);
  shape.n_head = static_cast<uint32_t>(geometry.n_head);
  shape.n_head_kv = static_cast<uint32_t>(geometry.n_head_kv);
  const std::vector<TensorTypeChoice> choices =
      choose_tensor_types(recipe, options.pure, shape, descs);

  gguf::GgufWriter writer;
  const std::vector<gguf::KeyValue>& arch_keys = model.metadata;
  writer.set(arch_keys.front().key, arch_keys.front().value);  // general.architecture first
  const std::string name = options.name.empty()
                               ? std::filesystem::path(checkpoint.path()).stem().string()
                               : options.name;
  writer.set("general.name", gguf::Value(name));
  writer.set("general.file_type", gguf::Value(recipe.file_type));
  writer.set("general.quantization_version", gguf::Value(kQuantizationVersion));
  for (size_t i = 1; i < arch_keys.size(); ++i) writer.set(arch_keys[i].key, arch_keys[i].value);
  for (const gguf::KeyValue& kv : tokenizer_keys) writer.set(kv.key, kv.value);

  ConvertSummary summary;
  summary.geometry = geometry;
  summary.has_vocab = !options.tokenizer.empty();
  std::vector<GgmlType> types;
  const TensorDesc* first_fallback = nullptr;
  GgmlType first_fallback_type = GgmlType::F32;
  bool quantizes = false;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorTypeChoice& c = choices[i];
    const GgmlType type = c.quantize ? c.type : GgmlType::F32;
    types.push_back(type);
    quantizes = quantizes || type != GgmlType::F32;
    if (c.fell_back()) {
      if (first_fallback == nullptr) first_fallback = &descs[i], first_fallback_type = type;
      ++summary.n_fallbacks;
    }
    writer.add_tensor(specs[i].name, type, specs[i].shape);
    summary.n_parameters += element_count(specs[i].shape);
  }
  if (first_fallback != nullptr) {
    LOG_WARN(
        "%zu matrices have rows that are not a whole number of %s blocks (e.g. %s, row length "
        "%lld, gets %s)",
        summary.n_fallbacks, std::string(ggml_type_name(recipe.default_type)).c_str(),
        first_fallback->name.c_str(), static_cast<long long>(first_fallback->shape[0]),
        std::string(ggml_type_name(first_fallback_type)).c_str());
  }

  ConvertProgress progress;
  progress.tensors_total = specs.size();
  for (const TensorSpec& spec : specs) progress.bytes_total += 4 * element_count(spec.shape);
  std::optional<ThreadPool> pool;
  if (quantizes) pool.emplace(options.n_threads);

  writer.begin(output);
  std::vector<std::byte> encoded;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::span<const std::byte> floats =
        checkpoint.item_bytes(sources[i].weight, sources[i].layer);
    if (types[i] == GgmlType::F32) {
      writer.write_tensor_data(floats);  // the same little-endian bytes
    } else {
      encode_rows(floats, types[i], specs[i].shape[0], *pool, encoded);
      writer.write_tensor_data(encoded);
    }
    progress.tensors_done = i + 1;
    progress.bytes_done += floats.size();
    progress.seconds = timer.seconds();
    if (options.on_progress) options.on_progress(progress);
  }
  writer.finish();

  summary.n_tensors = specs.size();
  summary.input_bytes = checkpoint.file_size();
  summary.output_bytes = std::filesystem::file_size(output);
  summary.seconds = timer.seconds();
  return summary;
}

}  // namespace cortiq::llama2c
