#include "model/blocks/causal_conv_rows.hpp"

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/causal_conv.hpp"
#include "runtime/kv_cache.hpp"

namespace cortiq {

namespace {

// Channels per thread's share.
constexpr int64_t kChannelGrain = 64;

}  // namespace

void causal_conv_silu_rows(const CausalConv& conv, std::span<const BatchRow> rows, int64_t layer,
                           KvCache& cache, ThreadPool& pool, float* x, size_t row_stride) {
  const size_t held = conv.taps - 1;
  pool.parallel_for(
      static_cast<int64_t>(conv.channels),
      [&](int64_t begin, int64_t end) {
        for (size_t r = 0; r < rows.size(); ++r) {
          float* state = cache.state(layer, rows[r].seq).data();
          float* in = x + r * row_stride;
          for (auto ch = static_cast<size_t>(begin); ch < static_cast<size_t>(end); ++ch) {
            const float sum = kernels::causal_conv_step(
                state + ch * held, conv.kernel.data() + ch * conv.taps, conv.taps, in[ch]);
            in[ch] = kernels::silu(conv.bias.empty() ? sum : sum + conv.bias[ch]);
          }
        }
      },
      kChannelGrain);
}

}  // namespace cortiq
