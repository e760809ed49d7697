// Attention of query rows over their sequences' cached rows, one workgroup
// per (row, head): scores of every position the row sees, the softcap,
// ALiBi's bias, the softmax (with the head's learned sink, when there is one), then the
// weighted sum of the values. Rows of keys and values are found through a
// table the host writes per call: for each query row its first position,
// its position count and where its positions' row offsets start; for each
// position the offsets (in elements) of its key and value rows in the
// cache's buffers. A row's result depends only on its own positions, in a fixed
// order (a tree in shared memory for the max and the sum, positions in order
// for the values), so it does not depend on the batch around it.
//
// The including file defines KV_F16 (an f16 cache: rows of halves, two to a
// word, their offsets in halves; the query and the probabilities rounded to
// f16 first, as the CPU and ggml's f16 mat-muls do) or not (f32 rows).
#extension GL_GOOGLE_include_directive : require

#define WG 64u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
#ifdef KV_F16
layout(std430, binding = 1) readonly buffer Keys { uint key_words[]; };
layout(std430, binding = 2) readonly buffer Values { uint value_words[]; };
float key_at(uint i) { return unpackHalf2x16(key_words[i >> 1u] >> ((i & 1u) * 16u)).x; }
float value_at(uint i) { return unpackHalf2x16(value_words[i >> 1u] >> ((i & 1u) * 16u)).x; }
#include "fp16_bits.glsl"
float to_f16(float v) { return unpackHalf2x16(fp16_bits(v)).x; }
#else
layout(std430, binding = 1) readonly buffer Keys { float keys[]; };
layout(std430, binding = 2) readonly buffer Values { float vals[]; };
float key_at(uint i) { return keys[i]; }
float value_at(uint i) { return vals[i]; }
float to_f16(float v) { return v; }  // unused
#endif
// [rows][3]: first position, position count, offset of the row's positions
// in `rows_at`; then [positions][2]: key row, value row (element offsets).
layout(std430, binding = 3) readonly buffer Rows { uint rows_at[]; };
layout(std430, binding = 4) readonly buffer Sinks { float sinks[]; };
layout(std430, binding = 5) coherent buffer Scores { float scores[]; };
layout(std430, binding = 6) writeonly buffer Out { float o[]; };
layout(std430, binding = 7) readonly buffer Slopes { float slopes[]; };  // ALiBi, per head

layout(push_constant) uniform Params {
  uint n_rows;
  uint n_head;
  uint n_head_kv;
  uint dk;
  uint dv;
  uint q_offset;    // floats
  uint out_offset;  // floats
  uint max_kv;      // scores per (row, head)
  float scale;      // the softmax's scale
  float dot_scale;  // with a softcap: 1 / softcap (or the family's); else the scale
  float softcap;    // 0: none
  uint has_sinks;
  uint has_alibi;
} p;

shared float partial[WG];

void main() {
  const uint head = gl_WorkGroupID.x;
  const uint row = gl_WorkGroupID.y;
  if (row >= p.n_rows) return;
  const uint lid = gl_LocalInvocationID.x;
  const uint kv_head = head / (p.n_head / p.n_head_kv);
  const uint start = rows_at[3u * row], n_kv = rows_at[3u * row + 1u];
  const uint positions = rows_at[3u * row + 2u];
  const uint q_base = p.q_offset + (row * p.n_head + head) * p.dk;
  const uint s_base = (row * p.n_head + head) * p.max_kv;

  float local_max = -3.402823466e38;
  for (uint j = start + lid; j < n_kv; j += WG) {
    const uint k_base = rows_at[positions + 2u * j] + kv_head * p.dk;
    precise float dot = 0.0;
#ifdef KV_F16
    for (uint d = 0u; d < p.dk; ++d) dot = fma(to_f16(q[q_base + d]), key_at(k_base + d), dot);
#else
    for (uint d = 0u; d < p.dk; ++d) dot = fma(q[q_base + d], key_at(k_base + d), dot);
#endif
    precise float s = dot * p.dot_scale;
    if (p.softcap > 0.0) s = (tanh(s) * p.softcap) * p.scale;
    // llama.cpp's mask holds -(query position - key position); its
    // soft_max_ext adds slope * mask in one FMA, as the CPU does.
    if (p.has_alibi != 0u) s = fma(slopes[head], float(int(j) - int(n_kv - 1u)), s);
    scores[s_base + j] = s;
    local_max = max(local_max, s);
  }
  partial[lid] = local_max;
  barrier();
  for (uint w = WG / 2u; w > 0u; w >>= 1u) {
    if (lid < w) partial[lid] = max(partial[lid], partial[lid + w]);
    barrier();
  }
  float m = partial[0];
  if (p.has_sinks != 0u) m = max(m, sinks[head]);
  barrier();

  precise float local_sum = 0.0;
  for (uint j = start + lid; j < n_kv; j += WG) {
    const float e = exp(scores[s_base + j] - m);
    scores[s_base + j] = e;
    local_sum += e;
  }
  partial[lid] = local_sum;
  // Every invocation reads every position's weight below.
  memoryBarrierBuffer();
  barrier();
  for (uint w = WG / 2u; w > 0u; w >>= 1u) {
    if (lid < w) partial[lid] += partial[lid + w];
    barrier();
  }
  float sum = partial[0];
  if (p.has_sinks != 0u) sum += exp(sinks[head] - m);
  const float inv = n_kv > start ? 1.0 / sum : 0.0;

  const uint o_base = p.out_offset + (row * p.n_head + head) * p.dv;
#ifdef KV_F16
  // The probabilities themselves, rounded to f16, weigh the values.
  barrier();
  for (uint j = start + lid; j < n_kv; j += WG) scores[s_base + j] = to_f16(scores[s_base + j] * inv);
  memoryBarrierBuffer();
  barrier();
  for (uint d = lid; d < p.dv; d += WG) {
    precise float acc = 0.0;
    for (uint j = start; j < n_kv; ++j) {
      const uint v_base = rows_at[positions + 2u * j + 1u] + kv_head * p.dv;
      acc = fma(scores[s_base + j], value_at(v_base + d), acc);
    }
    o[o_base + d] = acc;
  }
#else
  for (uint d = lid; d < p.dv; d += WG) {
    precise float acc = 0.0;
    for (uint j = start; j < n_kv; ++j) {
      const uint v_base = rows_at[positions + 2u * j + 1u] + kv_head * p.dv;
      acc = fma(scores[s_base + j], value_at(v_base + d), acc);
    }
    o[o_base + d] = acc * inv;
  }
#endif
}
