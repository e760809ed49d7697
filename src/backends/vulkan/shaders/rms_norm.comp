#version 450
// out = x / sqrt(mean(x^2) + eps) * weight, one row per workgroup (as
// kernels/cpu/norm.hpp's rms_norm_rows, with the sum of squares in float:
// doubles are optional in Vulkan). The row's squares are summed by a fixed
// tree in shared memory, so a row's result does not depend on how many rows
// run beside it. weight holds weight_rows rows of width (0: none), which
// the rows take in turn (a weight row per head); out may be x.

#define WG 64u

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) writeonly buffer Output { float o[]; };

layout(push_constant) uniform Params {
  uint width;
  uint n_rows;
  float eps;
  uint weight_rows;
  uint x_offset;    // in floats
  uint out_offset;  // in floats
} p;

shared float partial[WG];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= p.n_rows) return;  // the whole workgroup leaves
  const uint lid = gl_LocalInvocationID.x;
  const uint base = p.x_offset + row * p.width;
  const uint out_base = p.out_offset + row * p.width;

  precise float acc = 0.0;
  for (uint i = lid; i < p.width; i += WG) acc = fma(x[base + i], x[base + i], acc);
  partial[lid] = acc;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid < s) partial[lid] += partial[lid + s];
    barrier();
  }
  const float mean = partial[0] / float(p.width);
  const float scale = 1.0 / sqrt(mean + p.eps);
  // Two roundings, as the reference: the weight is a separate multiplication.
  const uint w_base = p.weight_rows != 0u ? (row % p.weight_rows) * p.width : 0u;
  for (uint i = lid; i < p.width; i += WG) {
    precise float v = x[base + i] * scale;
    if (p.weight_rows != 0u) v = v * weight[w_base + i];
    o[out_base + i] = v;
  }
}
