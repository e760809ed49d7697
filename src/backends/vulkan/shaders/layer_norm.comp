#version 450
// Layer norm of each row, as kernels/cpu/norm.hpp's layer_norm_rows:
// mean, then y = x - mean, variance = mean of y*y, out = y / sqrt(variance +
// eps) * weight + bias, the weight and the bias separate roundings (each
// optional, each weight_rows / bias_rows rows of width that the rows take
// in turn: a weight row per head). The sums are in float by a fixed tree in shared memory (the
// CPU's are in double), one row per workgroup, so a row's result does not
// depend on the rows beside it. out may be x.

#define WG 64u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Output { float o[]; };

layout(push_constant) uniform Params {
  uint width;
  uint n_rows;
  float eps;
  uint weight_rows;  // 0: none
  uint bias_rows;    // 0: none
  uint x_offset;    // in floats
  uint out_offset;  // in floats
} p;

shared float partial[WG];

float row_sum(float v) {
  const uint lid = gl_LocalInvocationID.x;
  partial[lid] = v;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier();
  }
  const float total = partial[0];
  barrier();
  return total;
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.n_rows) return;  // the whole workgroup leaves
  const uint lid = gl_LocalInvocationID.x;
  const uint base = p.x_offset + row * p.width;
  const uint out_base = p.out_offset + row * p.width;

  precise float acc = 0.0;
  for (uint i = lid; i < p.width; i += WG) acc += x[base + i];
  const float mean = row_sum(acc) / float(p.width);
  precise float sq = 0.0;
  for (uint i = lid; i < p.width; i += WG) {
    const float y = x[base + i] - mean;
    sq = fma(y, y, sq);
  }
  const float variance = row_sum(sq) / float(p.width);
  const float scale = 1.0 / sqrt(variance + p.eps);
  const uint w_base = p.weight_rows != 0u ? (row % p.weight_rows) * p.width : 0u;
  const uint b_base = p.bias_rows != 0u ? (row % p.bias_rows) * p.width : 0u;
  for (uint i = lid; i < p.width; i += WG) {
    precise float v = (x[base + i] - mean) * scale;
    if (p.weight_rows != 0u) v = v * weight[w_base + i];
    if (p.bias_rows != 0u) v = v + bias[b_base + i];
    o[out_base + i] = v;
  }
}
