// One step of a causal depthwise convolution over a channel's rolling
// state, shared by LFM2's short convolutions and Mamba's conv1d.
#pragma once

#include <algorithm>
#include <cstddef>

namespace cortiq::kernels {

// The convolution of `taps` taps `kernel` over the channel's last taps - 1
// inputs (`state`, oldest first) and `input`, summed in tap order from 0 as
// ggml_ssm_conv does; the state then shifts by one input.
inline float causal_conv_step(float* state, const float* kernel, size_t taps, float input) {
  const size_t held = taps - 1;
  float sum = 0.0f;
  for (size_t i = 0; i < held; ++i) sum += state[i] * kernel[i];
  sum += input * kernel[held];
  std::copy(state + 1, state + held, state);
  state[held - 1] = input;
  return sum;
}

// causal_conv_step for a tap count known at compile time (the models' 3
// and 4): unrolled, the state shifted in registers rather than by a
// memmove per channel, the same operations in the same order.
template <size_t kTaps>
inline float causal_conv_step(float* state, const float* kernel, float input) {
  static_assert(kTaps >= 2);
  float sum = 0.0f;
  for (size_t i = 0; i + 1 < kTaps; ++i) sum += state[i] * kernel[i];
  sum += input * kernel[kTaps - 1];
  for (size_t i = 0; i + 2 < kTaps; ++i) state[i] = state[i + 1];
  state[kTaps - 2] = input;
  return sum;
}

}  // namespace cortiq::kernels
