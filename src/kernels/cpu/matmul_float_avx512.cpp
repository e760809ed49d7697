// AVX-512 float tiles (matmul_float.hpp): one zmm register is exactly the
// 16 lanes of dot_f32, so each output accumulates in its own register with
// one fused multiply-add per 16 elements (rounded once, as the scalar
// reference's std::fma), the last partial chunk under a mask (lanes past
// the end are not touched, as the reference leaves them), and the fold is
// the reference's pairwise 8-4-2-1.
//
// Tiles of 4 weight rows x up to 6 activation rows: 24 accumulators and
// the 4 widened weight vectors fill the 32 registers, and every loaded
// vector serves 4 or 6 products.
#include <immintrin.h>

#include <iterator>

#include "kernels/cpu/matmul_float.hpp"

namespace cortiq::kernels::avx512 {

namespace {

// Sixteen weights from element i of a row, widened to floats; `mask`
// selects the first elements of a last partial chunk (the rest are zero).
struct LoadF32 {
  static constexpr int64_t kBytes = 4;
  static __m512 at(const std::byte* row, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static __m512 masked(const std::byte* row, int64_t i, __mmask16 mask) {
    return _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(row) + i);
  }
};

struct LoadF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 at(const std::byte* row, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 masked(const std::byte* row, int64_t i, __mmask16 mask) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + 2 * i));
  }
};

struct LoadBF16 {
  static constexpr int64_t kBytes = 2;
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 at(const std::byte* row, int64_t i) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static __m512 masked(const std::byte* row, int64_t i, __mmask16 mask) {
    return widen(_mm256_maskz_loadu_epi16(mask, row + 2 * i));
  }
};

// dot_f32's fold: lane j += lane j + 8, then + 4, + 2, + 1.
float fold(__m512 v) {
  const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                                  _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

template <class Load, int C>
void tile(const std::byte* w, size_t w_row_bytes, const float* a, int64_t a_stride, int64_t n,
          float* y, int64_t y_stride) {
  constexpr int R = kFloatTileRows;
  __m512 acc[R][C];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const std::byte* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + r * w_row_bytes;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) {
      wv[r] = Load::at(rows[r], i);
    }
    for (int c = 0; c < C; ++c) {
      const __m512 av = _mm512_loadu_ps(a + c * a_stride + i);
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_fmadd_ps(wv[r], av, acc[r][c]);
    }
  }
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = Load::masked(rows[r], i, mask);
    for (int c = 0; c < C; ++c) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a + c * a_stride + i);
      // mask3: lanes outside the mask keep acc itself (even a -0).
      for (int r = 0; r < R; ++r) acc[r][c] = _mm512_mask3_fmadd_ps(wv[r], av, acc[r][c], mask);
    }
  }
  for (int c = 0; c < C; ++c) {
    for (int r = 0; r < R; ++r) y[c * y_stride + r] = fold(acc[r][c]);
  }
}

// A lone activation row (decode) only streams the weights: one row after
// the other (the tile's rows lie end to end, and the next tile's follow),
// so each thread reads one stream, each line asked for 2 KiB ahead. On the
// 2-core Zen 4 (BM_MatmulDecodeFromMemory F16, alternating runs): the
// tile's four rows side by side with the next tile prefetched 16-20 GB/s,
// one row at a time 20-29 (1 KiB ahead), 24-32 (2 KiB), 20-23 (4 KiB);
// Llama-1B F16 tg32 8.9-9.0 -> 10.5-11.0 tokens/s. Each output keeps one
// accumulator, so the FMA latency bounds a row at 16 elements per 4
// cycles, above what memory delivers.
constexpr int64_t kDecodePrefetchBytes = 2048;

template <class Load>
void tile_decode(const std::byte* w, size_t w_row_bytes, const float* a, int64_t /*a_stride*/,
                 int64_t n, float* y, int64_t /*y_stride*/) {
  for (int r = 0; r < kFloatTileRows; ++r) {
    const std::byte* row = w + r * w_row_bytes;
    __m512 acc = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      if (i * Load::kBytes % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(row + i * Load::kBytes + kDecodePrefetchBytes),
                     _MM_HINT_T0);
      }
      acc = _mm512_fmadd_ps(Load::at(row, i), _mm512_loadu_ps(a + i), acc);
    }
    if (i < n) {
      const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1);
      acc = _mm512_mask3_fmadd_ps(Load::masked(row, i, mask), _mm512_maskz_loadu_ps(mask, a + i),
                                  acc, mask);
    }
    y[r] = fold(acc);
  }
}

template <class Load>
FloatTile tile_for(int n_act) {
  static constexpr FloatTile kTiles[] = {tile_decode<Load>, tile<Load, 2>, tile<Load, 3>,
                                         tile<Load, 4>,     tile<Load, 5>, tile<Load, 6>};
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

}  // namespace cortiq::kernels::avx512
