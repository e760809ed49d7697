#include "model/blocks/causal_conv_rows.hpp"

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/causal_conv.hpp"
#include "kv/kv_cache.hpp"

namespace cortiq {

namespace {

// Channels per thread's share.
constexpr int64_t kChannelGrain = 64;

}  // namespace

namespace {

// The convolution of channels [begin, end) of one row (kTaps 0: conv.taps
// at run time).
template <size_t kTaps>
void convolve_channels(const CausalConv& conv, float* state, float* in, size_t begin, size_t end) {
  const size_t held = conv.taps - 1;
  for (size_t ch = begin; ch < end; ++ch) {
    const float* kernel = conv.kernel.data() + ch * conv.taps;
    float sum = 0.0f;
    if constexpr (kTaps == 0) {
      sum = kernels::causal_conv_step(state + ch * held, kernel, conv.taps, in[ch]);
    } else {
      sum = kernels::causal_conv_step<kTaps>(state + ch * held, kernel, in[ch]);
    }
    in[ch] = conv.bias.empty() ? sum : sum + conv.bias[ch];
  }
  kernels::silu_inplace(std::span(in + begin, end - begin));
}

template <size_t kTaps>
void convolve_rows(const CausalConv& conv, std::span<const BatchRow> rows, int64_t layer,
                   KvCache& cache, ThreadPool& pool, float* x, size_t row_stride) {
  pool.parallel_for(
      static_cast<int64_t>(conv.channels),
      [&](int64_t begin, int64_t end) {
        for (size_t r = 0; r < rows.size(); ++r) {
          convolve_channels<kTaps>(conv, cache.state(layer, rows[r].seq).data(), x + r * row_stride,
                                   static_cast<size_t>(begin), static_cast<size_t>(end));
        }
      },
      kChannelGrain);
}

}  // namespace

void causal_conv_silu_rows(const CausalConv& conv, std::span<const BatchRow> rows, int64_t layer,
                           KvCache& cache, ThreadPool& pool, float* x, size_t row_stride) {
  switch (conv.taps) {
    case 3:
      return convolve_rows<3>(conv, rows, layer, cache, pool, x, row_stride);
    case 4:
      return convolve_rows<4>(conv, rows, layer, cache, pool, x, row_stride);
    default:
      return convolve_rows<0>(conv, rows, layer, cache, pool, x, row_stride);
  }
}

}  // namespace cortiq
