// The hyper-parameters of a decoder model, read from a GGUF's ARCH.* keys
// with the peer's defaults where a key is absent (or zero where zero means
// "unset", like a RoPE scaling factor of 0).
#pragma once

#include <cstdint>
#include <string>

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

enum class RopeScalingType { none, linear, yarn, llama3 };

struct RopeHParams {
  int64_t n_dims = 0;          // rotated dimensions per head (ARCH.rope.dimension_count)
  bool neox = false;           // NeoX half-split pairs (qwen2/qwen3) vs adjacent pairs (llama)
  float freq_base = 10000.0f;  // ARCH.rope.freq_base
  RopeScalingType scaling = RopeScalingType::linear;  // the peer's default name
  float scaling_factor = 1.0f;                        // ARCH.rope.scaling.factor (0 or absent: 1)
  float freq_scale = 1.0f;  // 1 / scaling_factor for linear and yarn, else 1
  int64_t n_ctx_orig = 0;   // ARCH.rope.scaling.original_context_length (default: trained context)
  // YaRN, resolved as the peer's context does: ext_factor 1 for yarn,
  // attn_factor the magnitude correction.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  // llama3 scaling given as keys (files usually carry rope_freqs.weight instead).
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
};

struct ModelHParams {
  std::string arch;  // general.architecture
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // ARCH.attention.key_length (default n_embd / n_head)
  int64_t head_dim_v = 0;  // ARCH.attention.value_length (default n_embd / n_head)
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float attention_scale = 0.0f;  // ARCH.attention.scale; 0: 1/sqrt(head_dim_k)
  RopeHParams rope;

  int64_t q_width() const { return n_head * head_dim_k; }
  int64_t k_width() const { return n_head_kv * head_dim_k; }
  int64_t v_width() const { return n_head_kv * head_dim_v; }
  float kq_scale() const;

  // Reads and validates (positive sizes, heads dividing, even rotary dims
  // within the head...); throws cortiq::Error naming the key at fault.
  // n_vocab comes from ARCH.vocab_size or the tokenizer's token list.
  static ModelHParams from_gguf(const gguf::GgufFile& file);
};

}  // namespace cortiq
