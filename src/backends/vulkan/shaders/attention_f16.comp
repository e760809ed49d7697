#version 450
// Attention over an f16 KV cache (attention.glsl).
#define KV_F16
#include "attention.glsl"
