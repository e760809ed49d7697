#version 450
// RoPE of rows of heads in place, as kernels/cpu/rope.cpp's rope_apply, from
// the host's table of (cos, sin) per rotated pair and row (kernels::rope_cache,
// which holds every variant: linear, YaRN, frequency factors, M-RoPE).
// One invocation per (row, head, pair): pair i turns (x[2i], x[2i+1]), or
// (x[i], x[i + n_dims/2]) in NeoX; dimensions from n_dims on stay.

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Table { float table[]; };

layout(push_constant) uniform Params {
  uint n;  // rows * heads * pairs
  uint n_heads;
  uint head_dim;
  uint n_dims;
  uint neox;
  uint x_offset;      // floats
  uint table_offset;  // floats
} p;

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 64u;
  if (i >= p.n) return;
  const uint pairs = p.n_dims / 2u;
  const uint pair = i % pairs;
  const uint head = (i / pairs) % p.n_heads;
  const uint row = i / (pairs * p.n_heads);
  const float c = table[p.table_offset + row * p.n_dims + 2u * pair];
  const float s = table[p.table_offset + row * p.n_dims + 2u * pair + 1u];
  const uint base = p.x_offset + (row * p.n_heads + head) * p.head_dim;
  const uint a = base + (p.neox != 0u ? pair : 2u * pair);
  const uint b = a + (p.neox != 0u ? pairs : 1u);
  const float x0 = x[a], x1 = x[b];
  precise float r0 = x0 * c - x1 * s;
  precise float r1 = x0 * s + x1 * c;
  x[a] = r0;
  x[b] = r1;
}
