// The causal depthwise convolution the state space and linear attention
// layers run on their inputs (Mamba, Mamba-2, PLaMo-2, Gated DeltaNet):
// for every row in order, each channel's value becomes
// silu(conv(its last taps - 1 inputs, the value) + bias), the sequence's
// convolution state shifted by one input. Channels are shared among the
// pool's threads (each thread takes every row of its channels), so the bits
// do not depend on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kv/batch.hpp"

namespace cortiq {

class KvCache;
class ThreadPool;

struct CausalConv {
  std::span<const float> kernel;  // [channels][taps]
  std::span<const float> bias;    // [channels], or empty
  size_t taps = 0;
  size_t channels = 0;
};

// x: row r's channels at x + r * row_stride, convolved in place; the
// state: the first (taps - 1) * channels floats of each row's sequence's
// state in `layer` ([channel][taps - 1]).
void causal_conv_silu_rows(const CausalConv& conv, std::span<const BatchRow> rows, int64_t layer,
                           KvCache& cache, ThreadPool& pool, float* x, size_t row_stride);

}  // namespace cortiq
