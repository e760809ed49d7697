#include "model/gen_model/random_model.hpp"

#include <cmath>
#include <cstring>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "model/family.hpp"
#include "model/gen_model/builtin_vocab.hpp"
#include "quant/quant_recipe.hpp"
#include "quant/quantize.hpp"
#include "quant/quantize_model.hpp"

namespace cortiq {

namespace {

struct Tokenizer {
  std::vector<gguf::KeyValue> metadata;
  int64_t n_vocab = 0;
};

// Every tokenizer.* key of another model, and its vocabulary size.
Tokenizer tokenizer_from_file(const std::filesystem::path& path) {
  const gguf::GgufFile source = gguf::GgufFile::open(path);
  Tokenizer tokenizer;
  for (const gguf::KeyValue& kv : source.metadata()) {
    if (kv.key.starts_with("tokenizer.")) tokenizer.metadata.push_back(kv);
  }
  const gguf::Array* tokens = source.get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->size() == 0) {
    throw Error(path.string() + ": no tokenizer.ggml.tokens to take the vocabulary from");
  }
  tokenizer.n_vocab = static_cast<int64_t>(tokens->size());
  return tokenizer;
}

Tokenizer choose_tokenizer(const RandomModelOptions& options) {
  if (options.vocab_from.empty()) {
    const Vocabulary vocab = builtin_spm_vocab(options.geometry.n_vocab);
    return {tokenizer_metadata(vocab), static_cast<int64_t>(vocab.tokens.size())};
  }
  Tokenizer tokenizer = tokenizer_from_file(options.vocab_from);
  if (options.geometry.n_vocab != 0 && options.geometry.n_vocab != tokenizer.n_vocab) {
    throw Error(strfmt("--vocab %lld disagrees with the %lld tokens of %s",
                       static_cast<long long>(options.geometry.n_vocab),
                       static_cast<long long>(tokenizer.n_vocab), options.vocab_from.c_str()));
  }
  return tokenizer;
}

GgmlType storage_type(const TensorSpec& spec, GgmlType weight_type) {
  if (spec.kind != TensorKind::matrix) return GgmlType::F32;
  return fallback_type(weight_type, spec.shape[0]);
}

uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// The tensor's values in its storage type, row by row.
std::vector<std::byte> encode(const std::vector<float>& values, GgmlType type, int64_t row_length) {
  const uint64_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(row_length));
  const size_t n_rows = values.size() / static_cast<size_t>(row_length);
  std::vector<std::byte> out(row_bytes * n_rows);
  for (size_t r = 0; r < n_rows; ++r) {
    quantize_row(type, std::span(values).subspan(r * row_length, row_length),
                 std::span(out).subspan(r * row_bytes, row_bytes));
  }
  return out;
}

}  // namespace

uint64_t tensor_seed(uint64_t model_seed, std::string_view tensor_name) {
  return SplitMix64::mix(SplitMix64::mix(model_seed) ^ fnv1a64(tensor_name));
}

std::vector<float> random_tensor_values(const TensorSpec& spec, uint64_t model_seed) {
  NormalSampler normal(tensor_seed(model_seed, spec.name));
  std::vector<float> values(element_count(spec.shape));
  double mean = 0;
  double std_dev = kRandomBiasStd;
  if (spec.kind == TensorKind::matrix || spec.kind == TensorKind::router ||
      spec.kind == TensorKind::conv) {
    std_dev = 1.0 / std::sqrt(static_cast<double>(spec.shape[0]));
  } else if (spec.kind == TensorKind::norm) {
    mean = 1.0;
    std_dev = kRandomNormStd;
  } else if (spec.kind == TensorKind::scale) {
    mean = 1.0;
    std_dev = kRandomScaleStd;
  }
  for (float& v : values) v = static_cast<float>(mean + std_dev * normal.next());
  if (spec.kind == TensorKind::decay) {
    for (float& v : values) v = -std::exp(v);
  }
  return values;
}

RandomModelSummary write_random_model(const RandomModelOptions& options,
                                      const std::filesystem::path& output) {
  if (options.family == nullptr) throw Error("no architecture given");
  if (!can_quantize(options.weight_type)) {
    throw Error("cannot write weight type " + std::string(ggml_type_name(options.weight_type)));
  }
  const Tokenizer tokenizer = choose_tokenizer(options);
  ModelGeometry geometry = options.geometry;
  geometry.n_vocab = tokenizer.n_vocab;
  const ModelSpec model = model_spec(*options.family, geometry, options.optional);
  const std::vector<TensorSpec>& specs = model.tensors;

  gguf::GgufWriter writer;
  const std::vector<gguf::KeyValue>& arch_keys = model.metadata;
  writer.set(arch_keys.front().key, arch_keys.front().value);  // general.architecture first
  const std::string name =
      options.name.empty() ? "cortiq-random-" + std::string(options.family->arch) : options.name;
  writer.set("general.name", gguf::Value(name));
  writer.set("general.file_type", gguf::Value(file_type_for_uniform_type(options.weight_type)));
  writer.set("general.quantization_version", gguf::Value(kQuantizationVersion));
  for (size_t i = 1; i < arch_keys.size(); ++i) writer.set(arch_keys[i].key, arch_keys[i].value);
  // A family may name its files (Family::write_hparams); --name still wins.
  if (!options.name.empty()) writer.set("general.name", gguf::Value(options.name));
  for (const gguf::KeyValue& kv : tokenizer.metadata) writer.set(kv.key, kv.value);
  if (!options.chat_template.empty()) {
    writer.set("tokenizer.chat_template", gguf::Value(options.chat_template));
  }

  RandomModelSummary summary;
  summary.n_vocab = tokenizer.n_vocab;
  const TensorSpec* first_fallback = nullptr;
  for (const TensorSpec& spec : specs) {
    const GgmlType type = storage_type(spec, options.weight_type);
    if (spec.kind == TensorKind::matrix && type != options.weight_type) {
      ++summary.n_fallbacks;
      if (first_fallback == nullptr) first_fallback = &spec;
    }
    writer.add_tensor(spec.name, type, spec.shape);
    summary.n_parameters += element_count(spec.shape);
  }
  if (first_fallback != nullptr) {
    LOG_WARN(
        "%zu matrices have rows that are not a whole number of %s blocks (e.g. %s, row length "
        "%lld, gets %s)",
        summary.n_fallbacks, std::string(ggml_type_name(options.weight_type)).c_str(),
        first_fallback->name.c_str(), static_cast<long long>(first_fallback->shape[0]),
        std::string(ggml_type_name(storage_type(*first_fallback, options.weight_type))).c_str());
  }
  writer.begin(output);
  for (const TensorSpec& spec : specs) {
    const std::vector<float> values = random_tensor_values(spec, options.seed);
    writer.write_tensor_data(
        encode(values, storage_type(spec, options.weight_type), spec.shape[0]));
  }
  writer.finish();
  summary.n_tensors = specs.size();
  summary.file_bytes = std::filesystem::file_size(output);
  return summary;
}

}  // namespace cortiq
