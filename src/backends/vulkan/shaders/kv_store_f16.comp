#version 450
#extension GL_GOOGLE_include_directive : require
// A pass's key (or value) rows into an f16 KV cache: row r of `width`
// floats, rounded to halves as base/fp16.hpp does, packed two to a word
// from word dst_rows[r] of the cache's buffer. One invocation per word
// (width is even, rows start at whole words: the host checks).

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer Src { float src[]; };
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(std430, binding = 2) readonly buffer DstRows { uint dst_rows[]; };

layout(push_constant) uniform Params {
  uint n_rows;
  uint width;       // floats per row
  uint src_offset;  // floats
} p;

#include "fp16_bits.glsl"

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  const uint words = p.width / 2u;
  if (i >= p.n_rows * words) return;
  const uint row = i / words, w = i % words;
  const uint from = p.src_offset + row * p.width + 2u * w;
  dst[dst_rows[row] + w] = fp16_bits(src[from]) | (fp16_bits(src[from + 1u]) << 16u);
}
