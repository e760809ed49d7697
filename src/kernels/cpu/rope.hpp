// Rotary position embedding (RoPE) with the peer's variants: the "normal"
// layout rotates adjacent pairs (x[2i], x[2i+1]) (llama, llama2.c), the NeoX
// layout rotates (x[i], x[i + n_dims/2]) (qwen2, qwen3); only the first
// n_dims of each head rotate (partial rotary), the rest pass through.
// Frequencies: theta_i = pos * base^(-2i/n_dims) / freq_factor_i, then the
// scaling: linear (pos * freq_scale), YaRN (ramp between interpolation and
// extrapolation over [beta_slow, beta_fast] with magnitude scaling
// attn_factor), as ggml's rope_yarn computes them in float.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace cortiq::kernels {

// M-RoPE (ggml_rope_multi) for text positions: the pairs of each head are
// dealt to four position sections — time, height, width, extra — in runs
// (`sections`: Qwen2-VL's mrope) or interleaved t, h, w, t, h, w...
// (`interleaved`: Qwen3-VL's imrope). A text token's position is its
// position in the first three and 0 in the extra one, so the pairs dealt to
// the extra section do not turn; the others turn as NeoX RoPE's.
enum class MRope : uint8_t { none, sections, interleaved };

struct RopeParams {
  int32_t n_dims = 0;  // rotated dimensions per head (even, <= head_dim)
  bool neox = false;   // NeoX (half-split) pairing instead of adjacent pairs
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;   // 1 / linear or YaRN scaling factor
  float ext_factor = 0.0f;   // YaRN extrapolation mix: 0 = none (not YaRN), 1 = YaRN
  float attn_factor = 1.0f;  // magnitude scale of cos/sin
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  int32_t n_ctx_orig = 0;  // context the model was trained with (YaRN)
  // Per-pair divisors of theta (llama3 scaling's rope_freqs.weight, n_dims/2
  // values), or empty.
  std::span<const float> freq_factors;
  MRope mrope = MRope::none;
  std::array<int32_t, 4> mrope_sections{};  // pairs per section (rope.dimension_sections)
};

// Whether pair i (0 <= i < n_dims / 2) belongs to M-RoPE's extra section,
// which a text position leaves unturned (ggml_mrope_cache_init's sectors:
// i modulo the sections' sum).
bool mrope_text_pair_unturned(const RopeParams& params, int32_t pair);

// cos/sin of every rotated pair for one position: cache holds n_dims floats,
// (cos, sin) interleaved per pair, computed exactly as the peer's cache.
void rope_cache(int32_t pos, const RopeParams& params, std::span<float> cache);

// Rotates n_heads heads of head_dim floats (contiguous) in place with a
// cache from rope_cache for the row's position.
void rope_apply(std::span<float> heads, int64_t n_heads, int64_t head_dim, const RopeParams& params,
                std::span<const float> cache);

}  // namespace cortiq::kernels
