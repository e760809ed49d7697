// The float path of matmul (F32, F16 and BF16 weights) in register tiles:
// kFloatTileRows weight rows against up to kFloatTileActs activation rows
// per kernel call, each output in its own 16 float lanes, so every output
// is dot_f32's bits (matmul.hpp: product i into lane i % 16 by a fused
// multiply-add, the pairwise fold) whatever the tile, the batch or the thread. The
// weight rows are read as the file stores them (f16 and bf16 widened in
// registers), and each tile's weight rows stay in cache while a pass of
// activation rows goes by.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/cpu/weight_view.hpp"

namespace cortiq {
class ThreadPool;
}

namespace cortiq::kernels {

struct MatmulScratch;

constexpr int kFloatTileRows = 4;
constexpr int kFloatTileActs = 6;

// y[c * y_stride + r] = dot_f32(weight row r, activation row c) for
// r < kFloatTileRows and c < the kernel's activation count; weight row r at
// w + r * w_row_bytes, activation row c at a + c * a_stride; n elements.
using FloatTile = void (*)(const std::byte* w, size_t w_row_bytes, const float* a, int64_t a_stride,
                           int64_t n, float* y, int64_t y_stride);

// The tile kernel for n_act (1..kFloatTileActs) activation rows of weights
// of `type` (F32, F16 or BF16) at this machine's SIMD level; nullptr where
// there is none (other types, or a level without tiles).
FloatTile float_tile(GgmlType type, int n_act);

namespace avx2 {
FloatTile float_tile(GgmlType type, int n_act);
}
namespace avx512 {
FloatTile float_tile(GgmlType type, int n_act);
}

// y[r * y_stride + o] = dot_f32(weight row o, act row r) for every o and r,
// with the tile kernels on the pool; returns false, computing nothing, when
// the level has no tiles for w's type. act: n_rows_x rows of w.n_cols
// floats, already rounded to the weight type's activation format. Weight
// rows after the last whole tile go through dot_f32 in scratch.weight_rows.
bool matmul_float_tiles(const WeightView& w, const float* act, int64_t n_rows_x, std::span<float> y,
                        int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch);

}  // namespace cortiq::kernels
