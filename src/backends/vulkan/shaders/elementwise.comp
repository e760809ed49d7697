#version 450
#extension GL_GOOGLE_include_directive : require
// The element-wise ops of the op layer, one element per invocation:
// out[i] = f(x[i], b[...]) for i < n, each buffer read from its own offset.
// x, b and out may be one buffer (x += b in place); every element is read
// and written by one invocation only. Each op computes what the CPU kernel
// of kernels/cpu/activations.hpp computes; GELU reads the CPU's table (the
// input rounded to fp16 to nearest even, as base/fp16.hpp does, indexes the
// fp16 results as floats), so it gives the CPU's bits.

layout(local_size_x = 256, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) buffer B { float b[]; };
layout(std430, binding = 2) buffer Out { float o[]; };
layout(std430, binding = 3) readonly buffer GeluTable { float gelu_table[]; };  // 65536

// The op codes of ElementOp (vulkan_ops.hpp).
#define OP_ADD 0u
#define OP_ADD_BIAS_ROWS 1u
#define OP_SCALE 2u
#define OP_CLAMP 3u
#define OP_SOFTCAP 4u
#define OP_SILU 5u
#define OP_GELU 6u
#define OP_RELU_SQR 7u
#define OP_SOFTPLUS 8u
#define OP_SIGMOID 9u
#define OP_SWIGLU 10u
#define OP_GEGLU 11u
#define OP_SWIGLU_HALVES 12u
#define OP_GEGLU_HALVES 13u
#define OP_RELU 14u
#define OP_SILU_RATIO 15u
#define OP_REGLU 16u
#define OP_SWIGLU_OAI 17u
#define OP_SCALE_ROWS 18u
#define OP_SUM_ROW_GROUPS 19u
#define OP_DIVIDE_ROWS 20u
#define OP_XIELU 21u

layout(push_constant) uniform Params {
  uint op;
  uint n;
  uint x_offset;
  uint b_offset;
  uint out_offset;
  uint width;  // bias rows: the bias's length; halves, rows: the row's width
  float p0;    // scale; clamp's lo; softcap's cap; swiglu_oai's alpha; xielu's alpha_n
  float p1;    // clamp's hi; swiglu_oai's limit; xielu's alpha_p
  uint group;  // sum_row_groups: rows of x per output row
  float p2;    // xielu's beta
  float p3;    // xielu's eps
} p;

float silu(float v) { return v / (1.0 + exp(-v)); }

#include "fp16_bits.glsl"

float gelu(float v) {
  if (v <= -10.0) return 0.0;
  if (v >= 10.0) return v;
  return gelu_table[fp16_bits(v)];
}

// ggml_vec_geglu_f32: +0 below -10 (not 0 times up, which may be -0).
float geglu(float g, float u) { return g <= -10.0 ? 0.0 : gelu(g) * u; }

// kernels::swiglu_oai: ggml's min, clamp and expf, operation for operation.
float swiglu_oai(float gate, float up, float alpha, float limit) {
  const float g = gate < limit ? gate : limit;
  float u = up < -limit ? -limit : up;
  u = limit < u ? limit : u;
  const float glu = g / (1.0 + exp(alpha * -g));
  return glu * (u + 1.0);
}

// GLSL has no expm1, and exp(v) - 1 loses v's digits near 0, where xIELU's
// (expm1(v) - v) cancels them further: the Taylor series there (its first
// dropped term, v^9 / 9!, is below 1e-11 for |v| <= 0.25).
float expm1_series(float v) {
  if (abs(v) > 0.25) return exp(v) - 1.0;
  float s = 1.0 / 40320.0;
  s = s * v + 1.0 / 5040.0;
  s = s * v + 1.0 / 720.0;
  s = s * v + 1.0 / 120.0;
  s = s * v + 1.0 / 24.0;
  s = s * v + 1.0 / 6.0;
  s = s * v + 0.5;
  s = s * v + 1.0;
  return s * v;
}

// kernels::xielu_inplace: alpha_p v² + beta v above 0, else
// (expm1(min(v, eps)) - v) alpha_n + beta v.
float xielu(float v) {
  if (v > 0.0) return p.p1 * v * v + p.p2 * v;
  return (expm1_series(min(v, p.p3)) - v) * p.p0 + p.p2 * v;
}

void main() {
  const uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * 256u;
  if (i >= p.n) return;
  if (p.op == OP_SWIGLU_HALVES || p.op == OP_GEGLU_HALVES) {
    const uint row = i / p.width, col = i % p.width;
    const float g = x[p.x_offset + row * 2u * p.width + col];
    const float u = x[p.x_offset + row * 2u * p.width + p.width + col];
    o[p.out_offset + i] = p.op == OP_SWIGLU_HALVES ? silu(g) * u : geglu(g, u);
    return;
  }
  if (p.op == OP_SUM_ROW_GROUPS) {
    // The group's rows in order, as the CPU adds them.
    const uint row = i / p.width, col = i % p.width;
    const uint first = p.x_offset + row * p.group * p.width + col;
    float sum = x[first];
    for (uint j = 1u; j < p.group; ++j) sum += x[first + j * p.width];
    o[p.out_offset + i] = sum;
    return;
  }
  const float v = x[p.x_offset + i];
  float r = v;
  switch (p.op) {
    case OP_ADD: r = v + b[p.b_offset + i]; break;
    case OP_ADD_BIAS_ROWS: r = v + b[p.b_offset + i % p.width]; break;
    case OP_SCALE: r = v * p.p0; break;
    // ggml's MAX(MIN(v, hi), lo), comparison for comparison.
    case OP_CLAMP: r = v < p.p1 ? v : p.p1; r = r > p.p0 ? r : p.p0; break;
    case OP_SOFTCAP: r = tanh(v * (1.0 / p.p0)) * p.p0; break;
    case OP_SILU: r = silu(v); break;
    case OP_GELU: r = gelu(v); break;
    case OP_RELU_SQR: r = v > 0.0 ? v * v : 0.0; break;
    case OP_SOFTPLUS: r = v > 20.0 ? v : log(1.0 + exp(v)); break;
    case OP_SIGMOID: r = 1.0 / (1.0 + exp(-v)); break;
    case OP_SWIGLU: r = silu(v) * b[p.b_offset + i]; break;
    case OP_GEGLU: r = geglu(v, b[p.b_offset + i]); break;
    case OP_RELU: r = v > 0.0 ? v : 0.0; break;
    case OP_SILU_RATIO: r = silu(v) / v; break;
    case OP_REGLU: r = (v > 0.0 ? v : 0.0) * b[p.b_offset + i]; break;
    case OP_SWIGLU_OAI: r = swiglu_oai(v, b[p.b_offset + i], p.p0, p.p1); break;
    case OP_SCALE_ROWS: r = v * b[p.b_offset + i / p.width]; break;
    case OP_DIVIDE_ROWS: r = v / b[p.b_offset + i % p.width]; break;
    case OP_XIELU: r = xielu(v); break;
  }
  o[p.out_offset + i] = r;
}
