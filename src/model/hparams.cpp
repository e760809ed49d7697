#include "model/hparams.hpp"

#include <cmath>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"

namespace cortiq {

namespace {

class KeyReader {
 public:
  KeyReader(const gguf::GgufFile& file, std::string arch)
      : file_(file), prefix_(std::move(arch) + ".") {}

  std::string key(std::string_view name) const { return prefix_ + std::string(name); }

  int64_t required_uint(std::string_view name) const {
    const auto value = file_.get_uint(key(name));
    if (!value) throw Error(strfmt("%s: missing key %s", file_.path().c_str(), key(name).c_str()));
    return checked(name, *value);
  }
  int64_t uint_or(std::string_view name, int64_t fallback) const {
    const auto value = file_.get_uint(key(name));
    return value ? checked(name, *value) : fallback;
  }
  float float_or(std::string_view name, float fallback) const {
    const auto value = file_.get_float(key(name));
    if (!value) return fallback;
    if (!std::isfinite(*value)) {
      throw Error(strfmt("%s: %s is not finite", file_.path().c_str(), key(name).c_str()));
    }
    return static_cast<float>(*value);
  }
  std::string string_or(std::string_view name, std::string fallback) const {
    return file_.get_string(key(name)).value_or(std::move(fallback));
  }

 private:
  int64_t checked(std::string_view name, uint64_t value) const {
    // Sizes beyond 2^31 are never real and would overflow products later.
    if (value > (uint64_t{1} << 31)) {
      throw Error(strfmt("%s: %s = %llu is out of range", file_.path().c_str(), key(name).c_str(),
                         static_cast<unsigned long long>(value)));
    }
    return static_cast<int64_t>(value);
  }

  const gguf::GgufFile& file_;
  std::string prefix_;
};

[[noreturn]] void invalid(const gguf::GgufFile& file, const std::string& what) {
  throw Error(file.path() + ": invalid hyper-parameters: " + what);
}

// The peer's architectures with the NeoX (half-split) rotary layout among
// those we run; llama keeps adjacent pairs (its converter permutes q/k).
bool uses_neox_rope(std::string_view arch) {
  return arch == "qwen2" || arch == "qwen3";
}

RopeScalingType parse_scaling(const gguf::GgufFile& file, const std::string& key,
                              const std::string& name) {
  if (name == "none") return RopeScalingType::none;
  if (name == "linear") return RopeScalingType::linear;
  if (name == "yarn") return RopeScalingType::yarn;
  if (name == "llama3") return RopeScalingType::llama3;
  invalid(file, strfmt("%s = \"%s\" is not supported (none, linear, yarn, llama3)", key.c_str(),
                       name.c_str()));
}

// YaRN's magnitude correction, as the peer's context resolves it: the
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

RopeHParams read_rope(const gguf::GgufFile& file, const KeyReader& keys, const ModelHParams& hp) {
  RopeHParams rope;
  rope.neox = uses_neox_rope(hp.arch);
  rope.n_dims = keys.uint_or("rope.dimension_count", hp.head_dim_k);
  rope.freq_base = keys.float_or("rope.freq_base", 10000.0f);
  rope.scaling = parse_scaling(file, keys.key("rope.scaling.type"),
                               keys.string_or("rope.scaling.type", "linear"));
  float factor = keys.float_or("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = keys.float_or("rope.scale_linear", 0.0f);
  if (factor < 0.0f) invalid(file, "rope scaling factor is negative");
  rope.scaling_factor = factor == 0.0f ? 1.0f : factor;
  rope.freq_scale = 1.0f / rope.scaling_factor;
  // llama3 scaling changes the frequencies per pair (freq factors), not the
  // positions; "none" never scales.
  if (rope.scaling == RopeScalingType::none || rope.scaling == RopeScalingType::llama3) {
    rope.freq_scale = 1.0f;
  }
  rope.n_ctx_orig = keys.uint_or("rope.scaling.original_context_length", hp.n_ctx_train);
  rope.beta_fast = keys.float_or("rope.scaling.yarn_beta_fast", 32.0f);
  rope.beta_slow = keys.float_or("rope.scaling.yarn_beta_slow", 1.0f);
  rope.ext_factor = keys.float_or("rope.scaling.yarn_ext_factor",
                                  rope.scaling == RopeScalingType::yarn ? 1.0f : 0.0f);
  rope.attn_factor = 1.0f;
  if (rope.ext_factor != 0.0f) {
    rope.attn_factor =
        yarn_attn_factor(rope.freq_scale, keys.float_or("rope.scaling.yarn_log_multiplier", 0.0f));
  }
  rope.attn_factor *= keys.float_or("rope.scaling.attn_factor", 1.0f);
  if (rope.scaling == RopeScalingType::llama3) {
    rope.llama3_low_freq_factor = keys.float_or("rope.scaling.low_freq_factor", 1.0f);
    rope.llama3_high_freq_factor = keys.float_or("rope.scaling.high_freq_factor", 4.0f);
  }
  if (!(rope.freq_base > 0.0f)) invalid(file, "rope.freq_base must be positive");
  if (rope.n_dims <= 0 || rope.n_dims % 2 != 0 || rope.n_dims > hp.head_dim_k) {
    invalid(file,
            strfmt("rope.dimension_count %lld must be even and within the head size %lld",
                   static_cast<long long>(rope.n_dims), static_cast<long long>(hp.head_dim_k)));
  }
  return rope;
}

int64_t read_vocab_size(const gguf::GgufFile& file, const KeyReader& keys) {
  const int64_t from_key = keys.uint_or("vocab_size", 0);
  if (from_key > 0) return from_key;
  if (const auto* tokens = file.get_array("tokenizer.ggml.tokens")) {
    return static_cast<int64_t>(tokens->size());
  }
  return 0;  // filled from token_embd.weight by the loader
}

}  // namespace

float ModelHParams::kq_scale() const {
  return attention_scale != 0.0f ? attention_scale
                                 : 1.0f / std::sqrt(static_cast<float>(head_dim_k));
}

ModelHParams ModelHParams::from_gguf(const gguf::GgufFile& file) {
  ModelHParams hp;
  hp.arch = file.architecture();
  if (hp.arch.empty()) throw Error(file.path() + ": missing key general.architecture");
  const KeyReader keys(file, hp.arch);
  hp.n_embd = keys.required_uint("embedding_length");
  hp.n_layer = keys.required_uint("block_count");
  hp.n_head = keys.required_uint("attention.head_count");
  hp.n_head_kv = keys.uint_or("attention.head_count_kv", hp.n_head);
  hp.n_ff = keys.required_uint("feed_forward_length");
  hp.n_ctx_train = keys.required_uint("context_length");
  hp.rms_eps = keys.float_or("attention.layer_norm_rms_epsilon", 1e-5f);
  hp.attention_scale = keys.float_or("attention.scale", 0.0f);
  hp.n_vocab = read_vocab_size(file, keys);

  if (hp.n_embd <= 0 || hp.n_layer <= 0 || hp.n_head <= 0 || hp.n_head_kv <= 0 || hp.n_ff <= 0 ||
      hp.n_ctx_train <= 0) {
    invalid(file, "every size must be positive");
  }
  if (hp.n_head % hp.n_head_kv != 0) {
    invalid(file, strfmt("%lld heads do not split into groups of %lld KV heads",
                         static_cast<long long>(hp.n_head), static_cast<long long>(hp.n_head_kv)));
  }
  const int64_t default_head_dim = hp.n_embd % hp.n_head == 0 ? hp.n_embd / hp.n_head : 0;
  hp.head_dim_k = keys.uint_or("attention.key_length", default_head_dim);
  hp.head_dim_v = keys.uint_or("attention.value_length", default_head_dim);
  if (hp.head_dim_k <= 0 || hp.head_dim_v <= 0) {
    invalid(file, "the head size is neither given (attention.key_length) nor n_embd / n_head");
  }
  if (!(hp.rms_eps > 0.0f)) invalid(file, "attention.layer_norm_rms_epsilon must be positive");
  hp.rope = read_rope(file, keys, hp);
  return hp;
}

}  // namespace cortiq
