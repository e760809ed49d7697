#include "model/hparams.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <variant>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "model/family.hpp"

namespace cortiq {

namespace {

// Element i of an array of any integer type; nullopt for other types or
// values beyond int64.
std::optional<int64_t> integer_at(const gguf::Array& array, size_t i) {
  return std::visit(
      [i](const auto& items) -> std::optional<int64_t> {
        using T = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (items[i] > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
          }
          return static_cast<int64_t>(items[i]);
        } else {
          return std::nullopt;
        }
      },
      array.items);
}

}  // namespace

HParamReader::HParamReader(const gguf::GgufFile& file, std::string arch)
    : file_(file), prefix_(std::move(arch) + ".") {}

bool HParamReader::has(std::string_view name) const {
  return file_.find(key(name)) != nullptr;
}

void HParamReader::require(std::string_view name) const {
  if (!has(name)) invalid("missing key " + key(name));
}

int64_t HParamReader::required_uint(std::string_view name) const {
  const auto value = file_.get_uint(key(name));
  if (!value) throw Error(strfmt("%s: missing key %s", file_.path().c_str(), key(name).c_str()));
  return checked(name, *value);
}

int64_t HParamReader::uint_or(std::string_view name, int64_t fallback) const {
  const auto value = file_.get_uint(key(name));
  return value ? checked(name, *value) : fallback;
}

float HParamReader::float_or(std::string_view name, float fallback) const {
  const auto value = file_.get_float(key(name));
  if (!value) return fallback;
  if (!std::isfinite(*value)) {
    throw Error(strfmt("%s: %s is not finite", file_.path().c_str(), key(name).c_str()));
  }
  return static_cast<float>(*value);
}

bool HParamReader::bool_or(std::string_view name, bool fallback) const {
  return file_.get_bool(key(name)).value_or(fallback);
}

std::string HParamReader::string_or(std::string_view name, std::string fallback) const {
  return file_.get_string(key(name)).value_or(std::move(fallback));
}

std::vector<int64_t> HParamReader::per_layer_uint(std::string_view name, int64_t n_layer,
                                                  int64_t fallback) const {
  std::vector<int64_t> out(static_cast<size_t>(n_layer), fallback);
  const gguf::Value* value = file_.find(key(name));
  const gguf::Array* array = value != nullptr ? value->as_array() : nullptr;
  if (array == nullptr) {
    const int64_t value = uint_or(name, fallback);
    std::fill(out.begin(), out.end(), value);
    return out;
  }
  if (static_cast<int64_t>(array->size()) != n_layer) {
    invalid(strfmt("%s has %zu values for %lld layers", key(name).c_str(), array->size(),
                   static_cast<long long>(n_layer)));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const std::optional<int64_t> v = integer_at(*array, i);
    if (!v || *v < 0) invalid(strfmt("%s[%zu] is not a size", key(name).c_str(), i));
    out[i] = checked(name, static_cast<uint64_t>(*v));
  }
  return out;
}

void HParamReader::invalid(const std::string& what) const {
  throw Error(file_.path() + ": invalid hyper-parameters: " + what);
}

int64_t HParamReader::checked(std::string_view name, uint64_t value) const {
  // Sizes beyond 2^31 are never real and would overflow products later.
  if (value > (uint64_t{1} << 31)) {
    throw Error(strfmt("%s: %s = %llu is out of range", file_.path().c_str(), key(name).c_str(),
                       static_cast<unsigned long long>(value)));
  }
  return static_cast<int64_t>(value);
}

namespace {

RopeScalingType parse_scaling(const HParamReader& keys, const std::string& key,
                              const std::string& name) {
  if (name == "none") return RopeScalingType::none;
  if (name == "linear") return RopeScalingType::linear;
  if (name == "yarn") return RopeScalingType::yarn;
  if (name == "llama3") return RopeScalingType::llama3;
  keys.invalid(strfmt("%s = \"%s\" is not supported (none, linear, yarn, llama3)", key.c_str(),
                      name.c_str()));
}

// YaRN's magnitude correction, as llama.cpp's context resolves it: the
// mscale for the scaling factor, cancelled against the factor rope_yarn
// applies itself.
float yarn_attn_factor(float freq_scale, float log_mul) {
  const auto mscale = [](float scale, float m) {
    return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f;
  };
  const float factor = 1.0f / freq_scale;
  float attn =
      log_mul != 0.0f ? mscale(factor, 1.0f) / mscale(factor, log_mul) : mscale(factor, 1.0f);
  attn *= 1.0f / (1.0f + 0.1f * std::log(factor));
  return attn;
}

// The RoPE's magnitude factor as llama.cpp's context resolves it: YaRN's
// (with the log multiplier, for the families whose loader reads one) when
// it extrapolates (ext_factor != 0), else the loader's yarn_attn_factor;
// times rope.scaling.attn_factor.
void resolve_attn_factor(const HParamReader& keys, RopeHParams& rope, float yarn_attn,
                         float log_mul) {
  rope.attn_factor =
      rope.ext_factor != 0.0f ? yarn_attn_factor(rope.freq_scale, log_mul) : yarn_attn;
  rope.attn_factor *= keys.float_or("rope.scaling.attn_factor", 1.0f);
}

RopeHParams read_rope(const HParamReader& keys, const ModelHParams& hp, bool neox) {
  RopeHParams rope;
  rope.neox = neox;
  rope.n_dims = keys.uint_or("rope.dimension_count", hp.head_dim_k);
  rope.freq_base = keys.float_or("rope.freq_base", 10000.0f);
  rope.scaling = parse_scaling(keys, keys.key("rope.scaling.type"),
                               keys.string_or("rope.scaling.type", "linear"));
  float factor = keys.float_or("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = keys.float_or("rope.scale_linear", 0.0f);
  if (factor < 0.0f) keys.invalid("rope scaling factor is negative");
  rope.scaling_factor = factor == 0.0f ? 1.0f : factor;
  rope.freq_scale = 1.0f / rope.scaling_factor;
  // llama3 scaling changes the frequencies per pair (freq factors), not the
  // positions; "none" never scales.
  if (rope.scaling == RopeScalingType::none || rope.scaling == RopeScalingType::llama3) {
    rope.freq_scale = 1.0f;
  }
  rope.n_ctx_orig = keys.uint_or("rope.scaling.original_context_length", hp.n_ctx_train);
  // llama.cpp's defaults: its loader reads the rope.scaling.yarn_* keys
  // for a few families only (read_yarn_keys; deepseek2 reads its own).
  rope.beta_fast = 32.0f;
  rope.beta_slow = 1.0f;
  rope.ext_factor = rope.scaling == RopeScalingType::yarn ? 1.0f : 0.0f;
  resolve_attn_factor(keys, rope, 1.0f, 0.0f);
  if (rope.scaling == RopeScalingType::llama3) {
    rope.llama3_low_freq_factor = keys.float_or("rope.scaling.low_freq_factor", 1.0f);
    rope.llama3_high_freq_factor = keys.float_or("rope.scaling.high_freq_factor", 4.0f);
  }
  if (!(rope.freq_base > 0.0f)) keys.invalid("rope.freq_base must be positive");
  if (rope.n_dims <= 0 || rope.n_dims % 2 != 0 || rope.n_dims > hp.head_dim_k) {
    keys.invalid(strfmt("rope.dimension_count %lld must be even and within the head size %lld",
                        static_cast<long long>(rope.n_dims),
                        static_cast<long long>(hp.head_dim_k)));
  }
  return rope;
}

int64_t read_vocab_size(const gguf::GgufFile& file, const HParamReader& keys) {
  const int64_t from_key = keys.uint_or("vocab_size", 0);
  if (from_key > 0) return from_key;
  if (const auto* tokens = file.get_array("tokenizer.ggml.tokens")) {
    return static_cast<int64_t>(tokens->size());
  }
  return 0;  // filled from token_embd.weight by the loader
}

// Per-layer head counts and widths (a number, or an array of one per layer).
void read_layers(const HParamReader& keys, ModelHParams& hp, bool may_lack_parts) {
  const auto heads = keys.per_layer_uint("attention.head_count", hp.n_layer, 0);
  const auto kv_heads = keys.per_layer_uint("attention.head_count_kv", hp.n_layer, -1);
  const auto ffs = keys.per_layer_uint("feed_forward_length", hp.n_layer, 0);
  hp.layers.assign(static_cast<size_t>(hp.n_layer), LayerSpec{});
  for (size_t il = 0; il < hp.layers.size(); ++il) {
    LayerSpec& layer = hp.layers[il];
    layer.n_head = heads[il];
    layer.n_head_kv = kv_heads[il] < 0 ? heads[il] : kv_heads[il];
    layer.n_ff = ffs[il];
    if (may_lack_parts) {
      if (layer.n_head < 0 || layer.n_head_kv < 0 || layer.n_ff < 0 ||
          (layer.n_head == 0 && layer.n_head_kv != 0)) {
        keys.invalid("every size must be positive or 0, KV heads only with heads");
      }
    } else if (layer.n_head <= 0 || layer.n_head_kv <= 0 || layer.n_ff <= 0) {
      keys.invalid("every size must be positive");
    }
    if (layer.n_head_kv > 0 && layer.n_head % layer.n_head_kv != 0) {
      keys.invalid(strfmt("%lld heads do not split into groups of %lld KV heads",
                          static_cast<long long>(layer.n_head),
                          static_cast<long long>(layer.n_head_kv)));
    }
  }
  const LayerSpec& first = hp.layers.front();
  hp.n_head = first.n_head;
  hp.n_head_kv = first.n_head_kv;
  hp.n_ff = first.n_ff;
}

}  // namespace

float ModelHParams::kq_scale() const {
  return attention_scale != 0.0f ? attention_scale
                                 : 1.0f / std::sqrt(static_cast<float>(head_dim_k));
}

float ModelHParams::kq_scale(const LayerSpec& layer) const {
  return attention_scale != 0.0f ? attention_scale
                                 : 1.0f / std::sqrt(static_cast<float>(layer.head_dim_k));
}

void read_yarn_keys(const HParamReader& keys, RopeHParams& rope, const YarnKeys& which) {
  rope.beta_fast = keys.float_or("rope.scaling.yarn_beta_fast", which.beta_fast_default);
  rope.beta_slow = keys.float_or("rope.scaling.yarn_beta_slow", 1.0f);
  float yarn_attn = 1.0f;
  if (which.ext_and_attn) {
    rope.ext_factor = keys.float_or("rope.scaling.yarn_ext_factor", rope.ext_factor);
    yarn_attn = keys.float_or("rope.scaling.yarn_attn_factor", 1.0f);
  }
  const float log_mul =
      which.log_multiplier ? keys.float_or("rope.scaling.yarn_log_multiplier", 0.0f) : 0.0f;
  resolve_attn_factor(keys, rope, yarn_attn, log_mul);
}

ModelHParams ModelHParams::with_mtp_layers() const {
  ModelHParams all = *this;
  all.layers.insert(all.layers.end(), mtp_layers.begin(), mtp_layers.end());
  return all;
}

ModelHParams ModelHParams::from_gguf(const gguf::GgufFile& file) {
  return from_gguf(file, family_of(file));
}

ModelHParams ModelHParams::from_gguf(const gguf::GgufFile& file, const Family& family) {
  ModelHParams hp;
  hp.arch = file.architecture();
  if (hp.arch.empty()) throw Error(file.path() + ": missing key general.architecture");
  const HParamReader keys(file, hp.arch);
  hp.n_embd = keys.required_uint("embedding_length");
  hp.n_layer = keys.required_uint("block_count");
  // llama.cpp runs block_count - nextn_predict_layers layers; the rest are
  // multi-token-prediction layers for its MTP draft.
  const int64_t n_mtp = keys.uint_or("nextn_predict_layers", 0);
  if (n_mtp > 0 && !family.mtp_layers) {
    keys.invalid(keys.key("nextn_predict_layers") + " " + std::to_string(n_mtp) +
                 ": multi-token-prediction layers are not supported for " + hp.arch);
  }
  if (n_mtp >= hp.n_layer) keys.invalid("nextn_predict_layers must be below block_count");
  for (const char* key : {"attention.head_count", "feed_forward_length"}) {
    if (!keys.has(key)) throw Error(file.path() + ": missing key " + keys.key(key));
  }
  hp.n_ctx_train = keys.required_uint("context_length");
  hp.rms_eps = keys.float_or("attention.layer_norm_rms_epsilon", 1e-5f);
  hp.attention_scale = keys.float_or("attention.scale", 0.0f);
  hp.n_vocab = read_vocab_size(file, keys);
  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_ctx_train <= 0) {
    keys.invalid("every size must be positive");
  }
  read_layers(keys, hp, family.layers_may_lack_parts);  // all block_count layers
  hp.n_layer -= n_mtp;
  if (const gguf::Value* labels = file.find(keys.key("classifier.output_labels"))) {
    const gguf::Array* array = labels->as_array();
    const auto* strings = array != nullptr ? array->as<std::string>() : nullptr;
    if (strings == nullptr)
      keys.invalid(keys.key("classifier.output_labels") + " is not a list of strings");
    hp.classifier_labels = *strings;
  }

  const int64_t default_head_dim =
      hp.n_head > 0 && hp.n_embd % hp.n_head == 0 ? hp.n_embd / hp.n_head : 0;
  hp.head_dim_k = keys.uint_or("attention.key_length", default_head_dim);
  hp.head_dim_v = keys.uint_or("attention.value_length", default_head_dim);
  // A model without attention (Mamba) has no heads to size or rotate.
  const bool attends =
      std::ranges::any_of(hp.layers, [](const LayerSpec& l) { return l.n_head > 0; });
  if (attends && (hp.head_dim_k <= 0 || hp.head_dim_v <= 0)) {
    keys.invalid("the head size is neither given (attention.key_length) nor n_embd / n_head");
  }
  for (LayerSpec& layer : hp.layers) {
    layer.head_dim_k = hp.head_dim_k;
    layer.head_dim_v = hp.head_dim_v;
  }
  if (attends) {
    hp.rope = read_rope(keys, hp, family.neox_rope);
  } else {
    for (LayerSpec& layer : hp.layers) layer.rope = RopeSlot::none;
  }
  hp.rope_local = hp.rope;
  hp.encoder = family.encoder;
  hp.causal_attention = keys.bool_or("attention.causal", true);
  // llama.cpp's saved files (llama_model_save_to_file, its test models)
  // store "unspecified" (-1) as the u32 0xFFFFFFFF.
  const auto raw_pooling = keys.file().get_uint(keys.key("pooling_type"));
  const int64_t pooling =
      !raw_pooling || *raw_pooling == 0xFFFFFFFFu ? -1 : keys.uint_or("pooling_type", -1);
  if (pooling > 4)
    keys.invalid(strfmt("pooling_type %lld is not one of 0..4", static_cast<long long>(pooling)));
  hp.pooling_type = static_cast<int32_t>(pooling);
  if (family.read_hparams != nullptr) family.read_hparams(keys, hp);
  hp.mtp_layers.assign(hp.layers.begin() + hp.n_layer, hp.layers.end());
  hp.layers.resize(static_cast<size_t>(hp.n_layer));
  if (!hp.causal_attention && !family.encoder) {
    keys.invalid(
        "attention.causal = false (bidirectional attention) is run only by the encoder "
        "families (bert); a " +
        hp.arch + " file with it cannot generate text");
  }
  if (!hp.causal_attention) {
    // The attention kernel's window and ALiBi distances count back from the
    // row's own position, which a bidirectional row does not have.
    const bool windowed =
        std::ranges::any_of(hp.layers, [](const LayerSpec& l) { return l.window > 0; });
    if (windowed || hp.alibi_max_bias > 0.0f) {
      keys.invalid(
          "bidirectional attention (attention.causal = false) with a sliding window or "
          "ALiBi is not supported");
    }
  }
  if (hp.uses_rms_norm && !(hp.rms_eps > 0.0f)) {
    keys.invalid("attention.layer_norm_rms_epsilon must be positive");
  }
  return hp;
}

void set_sliding_window_pattern(ModelHParams& hp, int64_t window, int64_t period,
                                RopeSlot local_rope, bool global_first) {
  for (size_t il = 0; il < hp.layers.size(); ++il) {
    // As llama.cpp's set_swa_pattern: the last (dense_first: the first)
    // layer of each period is global; period 0 makes every layer local.
    const auto at = static_cast<int64_t>(il) % std::max<int64_t>(period, 1);
    const bool local = period == 0 || (global_first ? at != 0 : at < period - 1);
    if (!local) continue;
    hp.layers[il].window = window;
    hp.layers[il].rope = local_rope;
  }
}

}  // namespace cortiq
