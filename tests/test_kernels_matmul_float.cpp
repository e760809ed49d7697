// The float tiles (kernels/cpu/matmul_float.hpp): every tile kernel gives
// dot_f32's scalar bits for each of its outputs, for every length (whole
// 16-lane chunks and every tail), every activation count, F32, F16 and
// BF16 weights and special values; and matmul of these types equals the
// scalar reference output by output, whatever the batch, the threads, the
// weight rows left over after the last whole tile, or the output stride.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/matmul_float.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};

struct Rows {
  std::vector<std::byte> bytes;  // as the file stores them
  std::vector<float> values;     // the same rows as floats
  size_t row_bytes = 0;
};

// n_rows rows of n values of `type`, normal with scale `scale`.
Rows make_rows(GgmlType type, int64_t n_rows, int64_t n, uint64_t seed, double scale) {
  Rows rows;
  rows.row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(n));
  rows.bytes.resize(rows.row_bytes * static_cast<size_t>(n_rows));
  rows.values.resize(static_cast<size_t>(n_rows * n));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> v = test::normal_values(seed + static_cast<uint64_t>(r), n, scale);
    const auto bytes =
        std::span(rows.bytes).subspan(static_cast<size_t>(r) * rows.row_bytes, rows.row_bytes);
    quantize_row(type, v, bytes);
    dequantize_row(
        type, bytes,
        std::span(rows.values).subspan(static_cast<size_t>(r * n), static_cast<size_t>(n)));
  }
  return rows;
}

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// The tile kernels of the SIMD levels this machine runs.
struct Level {
  const char* name;
  FloatTile (*tile)(GgmlType, int);
};
std::vector<Level> levels() {
  std::vector<Level> out;
#if defined(__x86_64__)
  if (simd_level() >= SimdLevel::avx2) out.push_back({"avx2", avx2::float_tile});
  if (simd_level() >= SimdLevel::avx512) out.push_back({"avx512", avx512::float_tile});
#endif
  return out;
}

TEST(KernelFloatTiles, EveryTileGivesTheScalarDotBits) {
  if (levels().empty()) GTEST_SKIP() << "no SIMD level with float tiles on this CPU";
  // Every short length, and long rows the tiles take in several blocks
  // (the AVX2 tile blocks by 1024 elements), with and without a tail.
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 200; n += (n < 40 ? 1 : 37)) lengths.push_back(n);
  for (const int64_t n : {1024, 1040, 2085, 3333}) lengths.push_back(n);
  for (const Level& level : levels()) {
    for (const GgmlType type : kTypes) {
      for (const int64_t n : lengths) {
        const Rows w = make_rows(type, kFloatTileRows, n, 100 + static_cast<uint64_t>(n), 1.0);
        // Activation rows with a stride wider than n, in very different scales.
        const int64_t stride = n + 3;
        std::vector<float> a(static_cast<size_t>(kFloatTileActs * stride), 99.0f);
        for (int c = 0; c < kFloatTileActs; ++c) {
          const std::vector<float> v = test::normal_values(7 + c, n, c % 2 ? 1e-3 : 1e3);
          std::copy(v.begin(), v.end(), a.begin() + c * stride);
        }
        if (n > 20) a[static_cast<size_t>(stride + 17)] = std::numeric_limits<float>::infinity();
        for (int n_act = 1; n_act <= kFloatTileActs; ++n_act) {
          const int64_t y_stride = kFloatTileRows + 5;
          std::vector<float> y(static_cast<size_t>(n_act * y_stride), -7.0f);
          level.tile(type, n_act)(w.bytes.data(), w.row_bytes, a.data(), stride, n, y.data(),
                                  y_stride);
          for (int c = 0; c < n_act; ++c) {
            for (int r = 0; r < kFloatTileRows; ++r) {
              const float expected =
                  scalar::dot_f32(w.values.data() + r * n, a.data() + c * stride, n);
              ASSERT_EQ(bits(y[static_cast<size_t>(c * y_stride + r)]), bits(expected))
                  << level.name << " " << ggml_type_name(type) << " n " << n << " n_act " << n_act
                  << " row " << r << " act " << c;
            }
            // Outputs past the tile's rows are left alone.
            EXPECT_EQ(y[static_cast<size_t>(c * y_stride + kFloatTileRows)], -7.0f);
          }
        }
      }
    }
  }
}

// matmul over F32 / F16 / BF16: every output is scalar dot_f32 of the weight
// row with the activation row rounded through the type's format — 43 rows
// (10 whole tiles and 3 left over), 17 activation rows (tiles of 6, 6, 5)
// or one at a time, on 1, 2 or 7 threads, into a wider output stride.
TEST(KernelFloatTiles, MatmulIsTheScalarDotOutputByOutput) {
  ThreadPool one(1), two(2), seven(7);
  const int64_t n_rows = 43, n_cols = 333, n_x = 17, y_stride = 50;
  for (const GgmlType type : kTypes) {
    const Rows w = make_rows(type, n_rows, n_cols, 5, 0.1);
    const WeightView view{type, n_rows, n_cols, w.row_bytes, w.bytes.data(), "blk.0.float.weight"};
    const std::vector<float> x = test::normal_values(3, static_cast<size_t>(n_x * n_cols));
    std::vector<float> rounded(x.size());
    round_activations(type, x, rounded);
    MatmulScratch scratch;
    std::vector<float> batch(static_cast<size_t>(n_x * y_stride), -1.0f);
    matmul(view, x, n_x, batch, y_stride, two, scratch);
    // More threads than this machine's cores: the same bits.
    std::vector<float> crowded(batch.size(), -1.0f);
    matmul(view, x, n_x, crowded, y_stride, seven, scratch);
    ASSERT_EQ(std::memcmp(crowded.data(), batch.data(), batch.size() * sizeof(float)), 0)
        << ggml_type_name(type);
    for (int64_t i = 0; i < n_x; ++i) {
      std::vector<float> alone(static_cast<size_t>(n_rows));
      matmul(view, std::span(x).subspan(static_cast<size_t>(i * n_cols), n_cols), 1, alone, n_rows,
             i % 2 ? one : two, scratch);
      for (int64_t o = 0; o < n_rows; ++o) {
        const float expected =
            scalar::dot_f32(w.values.data() + o * n_cols, rounded.data() + i * n_cols, n_cols);
        ASSERT_EQ(bits(batch[static_cast<size_t>(i * y_stride + o)]), bits(expected))
            << ggml_type_name(type) << " act " << i << " row " << o;
        ASSERT_EQ(bits(alone[static_cast<size_t>(o)]), bits(expected))
            << ggml_type_name(type) << " alone, act " << i << " row " << o;
      }
      EXPECT_EQ(batch[static_cast<size_t>(i * y_stride + n_rows)], -1.0f);
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels
