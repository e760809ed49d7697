// AVX2 float tiles (matmul_float.hpp): dot_f32's 16 lanes are two ymm
// registers per output (lanes 0-7 and 8-15, as dot_lanes_avx2.hpp), each
// updated with a fused multiply-add per 16 elements, the last partial chunk
// through the reference's scalar lane loop, then the pairwise fold: the
// scalar bits.
//
// A tile (4 weight rows x up to 6 activation rows) runs as pieces of 2
// weight rows x up to 3 activation rows: 12 accumulators, the two weight
// rows' half-chunk and one activation half-chunk fill the 16 registers.
// The pieces go block by block along the row, their running lanes kept in
// the tile between blocks.
#include <immintrin.h>

#include <iterator>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cpu/dot_lanes_avx2.hpp"
#include "kernels/cpu/matmul_float.hpp"

namespace cortiq::kernels::avx2 {

namespace {

constexpr int kRows = 2;

struct LoadF32 {
  static constexpr int64_t kBytes = 4;
  // A row of a GGUF tensor need not be 4-byte aligned (only the data
  // section is), so a lone float is copied, never read through a float*.
  static float one(const std::byte* row, int64_t i) {
    float f;
    std::memcpy(&f, row + 4 * i, sizeof(f));
    return f;
  }
  static __m256 at(const std::byte* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * i));
  }
};

struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static float one(const std::byte* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, sizeof(h));
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
  }
  static __m256 at(const std::byte* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
};

struct LoadBF16 {
  static constexpr int64_t kBytes = 2;
  static float one(const std::byte* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, sizeof(h));
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  static __m256 at(const std::byte* row, int64_t i) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
};

// A lone activation row (decode) streams the weights once: each line is
// asked for a tile ahead, from the next tile's row at the same offset (see
// matmul_float_avx512.cpp; at this level Llama-1B F16 decode went from
// 7.5-7.8 to 9.7-10.3 t/s on the Xeon of that note, CORTIQ_SIMD=avx2).
template <class Load>
void prefetch_next_tile(const std::byte* row, size_t w_row_bytes, int64_t i) {
  if (i * Load::kBytes % 64 == 0) {
    _mm_prefetch(
        reinterpret_cast<const char*>(row + kFloatTileRows * w_row_bytes + i * Load::kBytes),
        _MM_HINT_T0);
  }
}

// Eight activation floats, loaded into a register once for both weight
// rows. Left to itself GCC folds the load into each FMA's memory operand,
// loading every activation chunk twice (16 loads per 12 FMAs instead of
// 10); the empty asm keeps it in a register. Llama-1B F16 pp512 at this
// level on the 2-core Zen 4: 39 -> 53-59 t/s (BF16 40-47 -> 47-58).
__m256 load_once(const float* p) {
  __m256 v = _mm256_loadu_ps(p);
  asm("" : "+x"(v));
  return v;
}

// kRows weight rows x C (1-3) activation rows over whole chunks [i0, i1):
// acc[r * acc_stride + c] += their products, lane by lane in the
// reference's order.
template <class Load, int C>
void accumulate(const std::byte* w, size_t w_row_bytes, const float* a, int64_t a_stride,
                int64_t i0, int64_t i1, DotLanes* acc, int64_t acc_stride) {
  __m256 lo[kRows][C], hi[kRows][C];
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < C; ++c) {
      lo[r][c] = acc[r * acc_stride + c].lo;
      hi[r][c] = acc[r * acc_stride + c].hi;
    }
  }
  const std::byte* rows[kRows] = {w, w + w_row_bytes};
  for (int64_t i = i0; i < i1; i += 16) {
    if constexpr (C == 1) {
      prefetch_next_tile<Load>(rows[0], w_row_bytes, i);
      prefetch_next_tile<Load>(rows[1], w_row_bytes, i);
    }
    const __m256 w0 = Load::at(rows[0], i), w1 = Load::at(rows[1], i);
    for (int c = 0; c < C; ++c) {
      const __m256 av = load_once(a + c * a_stride + i);
      lo[0][c] = _mm256_fmadd_ps(w0, av, lo[0][c]);
      lo[1][c] = _mm256_fmadd_ps(w1, av, lo[1][c]);
    }
    const __m256 v0 = Load::at(rows[0], i + 8), v1 = Load::at(rows[1], i + 8);
    for (int c = 0; c < C; ++c) {
      const __m256 av = load_once(a + c * a_stride + i + 8);
      hi[0][c] = _mm256_fmadd_ps(v0, av, hi[0][c]);
      hi[1][c] = _mm256_fmadd_ps(v1, av, hi[1][c]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < C; ++c) {
      acc[r * acc_stride + c].lo = lo[r][c];
      acc[r * acc_stride + c].hi = hi[r][c];
    }
  }
}

// accumulate for `count` (1-3) activation rows from a on, into the lanes
// of a tile of C activation rows.
template <class Load, int C>
void accumulate_acts(int count, const std::byte* w, size_t w_row_bytes, const float* a,
                     int64_t a_stride, int64_t i0, int64_t i1, DotLanes* acc) {
  if (count == 3) return accumulate<Load, 3>(w, w_row_bytes, a, a_stride, i0, i1, acc, C);
  if (count == 2) return accumulate<Load, 2>(w, w_row_bytes, a, a_stride, i0, i1, acc, C);
  accumulate<Load, 1>(w, w_row_bytes, a, a_stride, i0, i1, acc, C);
}

// Elements per block of the row: a tile's 4 weight rows and 6 activation
// rows of one block (4 x 1024 x 2 + 6 x 1024 x 4 bytes for f16) stay in L1
// while both activation triples and both row pairs go over it; unblocked,
// the FFN's 8192-wide rows left L1 before their next use. Llama-1B F16
// pp512 at this level (Xeon, 2 threads): 36.8-37.6 -> 39.0-39.3 t/s
// (blocks of 256: 37.2, 512: 38.5, 2048: 39.0).
constexpr int64_t kBlock = 1024;

// A tile: kFloatTileRows weight rows x C activation rows, taken kRows x 3
// at a time, block by block along the row, then the reference's tail
// (lane j = fma(w[i + j], a[i + j], lane j)) and fold.
template <class Load, int C>
void tile(const std::byte* w, size_t w_row_bytes, const float* a, int64_t a_stride, int64_t n,
          float* y, int64_t y_stride) {
  static_assert(kFloatTileRows % kRows == 0);
  DotLanes acc[kFloatTileRows][C];  // every lane starts at zero
  const int64_t n_whole = n / 16 * 16;
  // A lone activation row reuses nothing: one block, one stream per row.
  const int64_t block = C == 1 ? n_whole : kBlock;
  for (int64_t i0 = 0; i0 < n_whole; i0 += block) {
    const int64_t i1 = std::min(n_whole, i0 + block);
    for (int c = 0; c < C; c += 3) {
      for (int r = 0; r < kFloatTileRows; r += kRows) {
        accumulate_acts<Load, C>(std::min(3, C - c), w + r * w_row_bytes, w_row_bytes,
                                 a + c * a_stride, a_stride, i0, i1, &acc[r][c]);
      }
    }
  }
  for (int r = 0; r < kFloatTileRows; ++r) {
    const std::byte* row = w + r * w_row_bytes;
    // The tail's weights as floats (exact), for the reference's lane loop.
    std::array<float, 16> tail{};
    for (int64_t j = 0; n_whole + j < n; ++j) tail[j] = Load::one(row, n_whole + j);
    for (int c = 0; c < C; ++c) {
      if (n_whole < n) acc[r][c].add_tail(tail.data(), a + c * a_stride + n_whole, n - n_whole);
      y[c * y_stride + r] = acc[r][c].fold();
    }
  }
}

template <class Load>
FloatTile tile_for(int n_act) {
  static constexpr FloatTile kTiles[] = {tile<Load, 1>, tile<Load, 2>, tile<Load, 3>,
                                         tile<Load, 4>, tile<Load, 5>, tile<Load, 6>};
  static_assert(std::size(kTiles) == kFloatTileActs);
  return n_act >= 1 && n_act <= kFloatTileActs ? kTiles[n_act - 1] : nullptr;
}

}  // namespace

FloatTile float_tile(GgmlType type, int n_act) {
  switch (type) {
    case GgmlType::F32:
      return tile_for<LoadF32>(n_act);
    case GgmlType::F16:
      return tile_for<LoadF16>(n_act);
    case GgmlType::BF16:
      return tile_for<LoadBF16>(n_act);
    default:
      return nullptr;
  }
}

}  // namespace cortiq::kernels::avx2
