#version 450
// Attention over an f32 KV cache (attention.glsl).
#include "attention.glsl"
