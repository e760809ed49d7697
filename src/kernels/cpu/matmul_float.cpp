// The float tiles' dispatch and their split over the threads (see
// matmul_float.hpp). As in the integer path (matmul_integer.cpp), the
// activation rows go in passes small enough to stay in the core's L2 while
// every weight row of the thread meets them, shared out as (pass, slice)
// work items (work_items.hpp).
#include "kernels/cpu/matmul_float.hpp"

#include <algorithm>

#include "base/cpu_features.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dequantize_fast.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/work_items.hpp"

namespace cortiq::kernels {

namespace {

// Activation rows per pass: their floats should take about kPassBytes of
// the L2, in whole tiles, at least one tile and at most kMaxPassRows.
constexpr int64_t kPassBytes = 1536 << 10;
constexpr int64_t kMaxPassRows = 16 * kFloatTileActs;
int64_t rows_per_pass(int64_t n_cols) {
  const int64_t rows = kPassBytes / std::max<int64_t>(n_cols * 4, 1);
  return std::clamp<int64_t>(rows / kFloatTileActs * kFloatTileActs, kFloatTileActs, kMaxPassRows);
}

}  // namespace

FloatTile float_tile(GgmlType type, int n_act) {
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx512) return avx512::float_tile(type, n_act);
  if (simd_level() >= SimdLevel::avx2) return avx2::float_tile(type, n_act);
#endif
  (void)type, (void)n_act;
  return nullptr;
}

bool matmul_float_tiles(const WeightView& w, const float* act, int64_t n_rows_x, std::span<float> y,
                        int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch) {
  FloatTile tiles[kFloatTileActs + 1] = {};
  for (int c = 1; c <= kFloatTileActs; ++c) {
    if (!(tiles[c] = float_tile(w.type, c))) return false;
  }
  const int64_t n_cols = w.n_cols;
  const int64_t n_tiles = w.n_rows / kFloatTileRows;
  const int64_t first_rest = n_tiles * kFloatTileRows;  // rows left over: one by one
  const int64_t per_pass = rows_per_pass(n_cols);
  const int64_t n_passes = (n_rows_x + per_pass - 1) / per_pass;
  const int64_t n_units = n_tiles + (first_rest < w.n_rows ? 1 : 0);
  // Slices in weight rows: the tiles' work, and the rest's few rows.
  const Slices slices = call_slices(n_passes, w.n_rows, n_units,
                                    w.n_rows * static_cast<int64_t>(w.row_bytes), pool.size());
  if (scratch.weight_rows.size() < static_cast<size_t>(pool.size())) {
    scratch.weight_rows.resize(static_cast<size_t>(pool.size()));
  }
  run_work_items(pool, n_passes, slices.count, [&](int thread, int64_t pass_index, int64_t slice) {
    // A left-over weight row as floats (grown once, then reused).
    std::vector<float>& row = scratch.weight_rows[static_cast<size_t>(thread)];
    const int64_t pass = pass_index * per_pass;
    const int64_t pass_end = std::min(n_rows_x, pass + per_pass);
    // Units u whose first row r = u * kFloatTileRows has begin <= r < end.
    const int64_t begin = (slices.begin(slice) + kFloatTileRows - 1) / kFloatTileRows;
    const int64_t end = (slices.end(slice) + kFloatTileRows - 1) / kFloatTileRows;
    for (int64_t u = begin; u < end; ++u) {
      if (u == n_tiles) {  // the rows after the last whole tile
        if (row.size() < static_cast<size_t>(n_cols)) row.resize(static_cast<size_t>(n_cols));
        for (int64_t o = first_rest; o < w.n_rows; ++o) {
          dequantize_row_fast(w.type, w.row(o), std::span(row).first(static_cast<size_t>(n_cols)));
          for (int64_t i = pass; i < pass_end; ++i) {
            y[static_cast<size_t>(i * y_stride + o)] =
                dot_f32(row.data(), act + i * n_cols, n_cols);
          }
        }
        continue;
      }
      const std::byte* rows = w.data + static_cast<size_t>(u * kFloatTileRows) * w.row_bytes;
      for (int64_t i = pass; i < pass_end; i += kFloatTileActs) {
        const int n_act = static_cast<int>(std::min<int64_t>(kFloatTileActs, pass_end - i));
        tiles[n_act](rows, w.row_bytes, act + i * n_cols, n_cols, n_cols,
                     y.data() + i * y_stride + u * kFloatTileRows, y_stride);
      }
    }
  });
  return true;
}

}  // namespace cortiq::kernels
