// The linear-attention blocks' loop over their heads' state matrices
// (Gated DeltaNet, Kimi Delta Attention, lightning attention, RWKV's time
// mix): each head keeps a d x d matrix per sequence, after `offset` floats
// of the layer's state (its convolution or token-shift rows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/thread_pool.hpp"
#include "kv/batch.hpp"
#include "kv/kv_cache.hpp"

namespace cortiq {

// step(matrix, row, head) for every row and head: rows in order, so that a
// sequence's matrices advance row by row whatever the batch holds; heads in
// parallel, each head's matrix its own.
template <class Step>
void step_heads_in_row_order(std::span<const BatchRow> rows, int64_t layer, KvCache& cache,
                             ThreadPool& pool, size_t offset, size_t n_head, size_t d,
                             const Step& step) {
  pool.parallel_for(static_cast<int64_t>(n_head), [&](int64_t begin, int64_t end) {
    for (size_t r = 0; r < rows.size(); ++r) {
      float* const matrices = cache.state(layer, rows[r].seq).subspan(offset).data();
      for (auto h = static_cast<size_t>(begin); h < static_cast<size_t>(end); ++h) {
        step(matrices + h * d * d, r, h);
      }
    }
  });
}

}  // namespace cortiq
