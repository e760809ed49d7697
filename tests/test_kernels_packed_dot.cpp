// The Q4_0 / Q8_0 / MXFP4 integer kernels: packing is a pure rearrangement, the
// packed and file-layout kernels and every SIMD level give the same bits,
// the result is the exact dot of the dequantized operands up to float
// rounding, extreme codes do not overflow, and matmul over a packed matrix
// is batch invariant and equal to the unpacked one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

struct Matrix {
  std::vector<std::byte> bytes;
  std::vector<std::byte> packed;
  WeightView view;  // with `packed` set
};

Matrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, uint64_t seed) {
  Matrix m;
  const size_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(n_cols));
  m.bytes.resize(row_bytes * static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row(type, normal_values(seed + static_cast<uint64_t>(r), n_cols, 0.05),
                 std::span(m.bytes).subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
  }
  m.packed.resize(m.bytes.size());
  m.view = {type, n_rows, n_cols, row_bytes, m.bytes.data(), "blk.0.packed.weight"};
  pack_rows(m.view, m.packed, 0, n_rows / kPackRows);
  m.view.packed = m.packed.data();
  return m;
}

std::vector<Q8Block32> quantized(const std::vector<float>& x) {
  std::vector<Q8Block32> blocks(x.size() / 32);
  quantize_q8_0(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  return blocks;
}

// A type, its layout, and its blocks' extremes: a block is its scale
// (scale_bytes; `one` the scale 1) then its codes, all bytes `lowest` or
// `highest` giving the codes lowest_value or highest_value.
struct Case {
  GgmlType type;
  PackedLayout layout;
  size_t block_bytes;
  size_t scale_bytes;
  uint16_t one;
  uint8_t lowest, highest;
  int lowest_value, highest_value;
};
const Case kCases[] = {{GgmlType::Q4_0, PackedLayout::q4_0x8, 18, 2, 0x3C00, 0x00, 0xFF, -8, 7},
                       {GgmlType::Q8_0, PackedLayout::q8_0x8, 34, 2, 0x3C00, 0x80, 0x7F, -128, 127},
                       // E8M0 128: the halved scale 1; nibble 15 is -12 (-6 doubled), 7 is 12.
                       {GgmlType::MXFP4, PackedLayout::mxfp4x8, 17, 1, 128, 0xFF, 0x77, -12, 12}};

size_t group_bytes(const Case& c, int64_t n_blocks) {
  return static_cast<size_t>(n_blocks) * packed_block_bytes(c.layout);
}

TEST(KernelPackedDot, LayoutsForTypesAndRowCounts) {
  EXPECT_EQ(packed_layout(GgmlType::Q4_0, 16), PackedLayout::q4_0x8);
  EXPECT_EQ(packed_layout(GgmlType::Q8_0, 8), PackedLayout::q8_0x8);
  EXPECT_EQ(packed_layout(GgmlType::Q4_0, 12), PackedLayout::none);
  EXPECT_EQ(packed_layout(GgmlType::Q4_K, 16), PackedLayout::q4_Kx8);
  EXPECT_EQ(packed_layout(GgmlType::Q5_K, 16), PackedLayout::none);
  EXPECT_EQ(packed_block_bytes(PackedLayout::q4_0x8), 8u * 18u);
  EXPECT_EQ(packed_block_bytes(PackedLayout::q8_0x8), 8u * 34u);
  EXPECT_EQ(packed_layout(GgmlType::MXFP4, 24), PackedLayout::mxfp4x8);
  EXPECT_EQ(packed_block_bytes(PackedLayout::mxfp4x8), 8u * 17u);
}

// Activation codes times their scale are the values round_activations gives.
TEST(KernelPackedDot, QuantizedActivationsAreTheRoundedOnes) {
  const std::vector<float> x = normal_values(7, 32 * 40);
  std::vector<float> rounded(x.size());
  round_activations(GgmlType::Q4_0, x, rounded);
  const std::vector<Q8Block32> blocks = quantized(x);
  for (size_t b = 0; b < blocks.size(); ++b) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const float value = static_cast<float>(blocks[b].qs[j]) * blocks[b].d;
      ASSERT_EQ(std::bit_cast<uint32_t>(value), std::bit_cast<uint32_t>(rounded[b * 32 + j]));
      sum += blocks[b].qs[j];
    }
    ASSERT_EQ(blocks[b].sum, sum);
  }
}

// The AVX2 quantizers give the scalar blocks byte for byte: random rows,
// an all-zero block, ties of |max| with both signs, and codes exactly half
// way between integers.
TEST(KernelPackedDot, SimdQuantizersMatchScalar) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> x = normal_values(31, 256 * 6, 3.0);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // a zero Q8_K block (and 8 Q8_0 ones)
  x[600] = 5.0f, x[610] = -5.0f;                      // tie: the first one sets the sign
  x[800] = -4.0f, x[801] = 4.0f;
  for (int j = 0; j < 32; ++j) x[1024 + j] = 127.0f * (static_cast<float>(j) + 0.5f) / 64.0f;
  const auto n = static_cast<int64_t>(x.size());
  std::vector<Q8Block32> s0(x.size() / 32), v0(x.size() / 32);
  scalar::quantize_q8_0(x.data(), s0.data(), n);
  avx2::quantize_q8_0(x.data(), v0.data(), n);
  EXPECT_EQ(std::memcmp(s0.data(), v0.data(), s0.size() * sizeof(Q8Block32)), 0);
  std::vector<Q8BlockK> sk(x.size() / 256), vk(x.size() / 256);
  scalar::quantize_q8_k(x.data(), sk.data(), n);
  avx2::quantize_q8_k(x.data(), vk.data(), n);
  EXPECT_EQ(std::memcmp(sk.data(), vk.data(), sk.size() * sizeof(Q8BlockK)), 0);
}

// Scalar packed == scalar file layout (bits), and both within float
// rounding of the double dot of the dequantized operands.
TEST(KernelPackedDot, PackedMatchesFileRowsAndTheDoubleDot) {
  for (const Case& c : kCases) {
    for (const int64_t n_blocks : {1, 3, 64}) {
      const int64_t n_cols = 32 * n_blocks;
      const Matrix m = make_matrix(c.type, 16, n_cols, 11 + static_cast<uint64_t>(n_blocks));
      const std::vector<float> x = normal_values(5, static_cast<size_t>(4 * n_cols));
      const std::vector<Q8Block32> a = quantized(x);
      for (int64_t g = 0; g < 2; ++g) {
        float packed_out[32];
        scalar::packed_dot(c.layout)(m.packed.data() + g * group_bytes(c, n_blocks), a.data(),
                                     n_blocks, 4, n_blocks, packed_out);
        for (int r = 0; r < 8; ++r) {
          const int64_t row = g * 8 + r;
          float row_out[4];
          scalar::row_dot(c.type)(m.view.row(row).data(), a.data(), n_blocks, 4, n_blocks, row_out);
          std::vector<float> w(static_cast<size_t>(n_cols));
          dequantize_row(c.type, m.view.row(row), w);
          for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(std::bit_cast<uint32_t>(packed_out[i * 8 + r]),
                      std::bit_cast<uint32_t>(row_out[i]));
            double dot = 0, magnitude = 0;
            for (int64_t j = 0; j < n_cols; ++j) {
              const Q8Block32& ab = a[static_cast<size_t>(i * n_blocks + j / 32)];
              const double v = double(w[j]) * double(ab.qs[j % 32]) * double(ab.d);
              dot += v;
              magnitude += std::fabs(v);
            }
            EXPECT_NEAR(row_out[i], dot, 1e-6 * magnitude + 1e-30)
                << ggml_type_name(c.type) << " row " << row << " act " << i;
          }
        }
      }
    }
  }
}

bool has_avx512() {
  return simd_level() >= SimdLevel::avx512;
}

// Every SIMD level's one-group kernel (AVX-512: its own decode loop for one
// activation row) gives the scalar bits, for 1..max activation rows, and a
// row's result does not depend on how many rows the call took.
TEST(KernelPackedDot, SimdMatchesScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<std::pair<const char*, PackedDot (*)(PackedLayout)>> levels = {
      {"avx2", avx2::packed_dot}};
  if (has_avx512()) levels.emplace_back("avx512", avx512::packed_dot);
  for (const auto& [level, kernel_of] : levels) {
    for (const Case& c : kCases) {
      const int64_t n_blocks = 16;
      const int max_rows = packed_dot_max_rows(c.layout);
      const Matrix m = make_matrix(c.type, 8, 32 * n_blocks, 3);
      const std::vector<float> x = normal_values(9, static_cast<size_t>(max_rows * 32 * n_blocks));
      const std::vector<Q8Block32> a = quantized(x);
      std::vector<float> expected(static_cast<size_t>(8 * max_rows));
      scalar::packed_dot(c.layout)(m.packed.data(), a.data(), n_blocks, max_rows, n_blocks,
                                   expected.data());
      for (const int n_act : {1, 2, 3, 4, 9, max_rows}) {
        if (n_act > max_rows) continue;
        std::vector<float> got(static_cast<size_t>(8 * n_act));
        kernel_of(c.layout)(m.packed.data(), a.data(), n_blocks, n_act, n_blocks, got.data());
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), sizeof(float) * 8 * n_act), 0)
            << level << " " << ggml_type_name(c.type) << " n_act " << n_act;
      }
    }
  }
}

// The AVX-512 kernels over two groups give the scalar bits of each group,
// for 1..64 activation rows (the decode kernel's prefetch included), with
// random codes and with the extreme ones (all-lowest and all-highest
// weight codes against +-127 activations).
TEST(KernelPackedDot, Avx512PairsMatchScalarBitForBit) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or CORTIQ_SIMD below it)";
  for (const Case& c : kCases) {
    for (const bool extreme : {false, true}) {
      const int64_t n_blocks = 24;
      Matrix m = make_matrix(c.type, 16, 32 * n_blocks, 5);
      std::vector<float> x = normal_values(13, static_cast<size_t>(kMaxPackedRows * 32 * n_blocks));
      if (extreme) {
        const size_t row_bytes = m.view.row_bytes / static_cast<size_t>(n_blocks);
        for (int64_t r = 0; r < 16; ++r) {
          for (int64_t b = 0; b < n_blocks; ++b) {
            std::byte* block = m.bytes.data() + (r * n_blocks + b) * row_bytes;
            const bool high = (r + b) % 2 == 1;
            const auto code = static_cast<std::byte>(high ? c.highest : c.lowest);
            std::fill(block + c.scale_bytes, block + row_bytes, code);
          }
        }
        pack_rows(m.view, m.packed, 0, 2);
        for (size_t j = 0; j < x.size(); ++j) x[j] = (j / 32) % 3 == 0 ? -1.0f : 1.0f;
      }
      const std::vector<Q8Block32> a = quantized(x);
      const size_t bytes = group_bytes(c, n_blocks);
      std::vector<float> expected(static_cast<size_t>(16 * kMaxPackedRows));
      for (int g = 0; g < 2; ++g) {
        std::vector<float> half(static_cast<size_t>(8 * kMaxPackedRows));
        scalar::packed_dot(c.layout)(m.packed.data() + g * bytes, a.data(), n_blocks,
                                     kMaxPackedRows, n_blocks, half.data());
        for (int i = 0; i < kMaxPackedRows; ++i) {
          std::copy_n(half.data() + 8 * i, 8, expected.data() + 16 * i + 8 * g);
        }
      }
      for (const int n_act : {1, 2, 3, 4, 9, 17, kMaxPackedRows}) {
        std::vector<float> got(static_cast<size_t>(16 * n_act));
        avx512::packed_dot_pair(c.layout)(m.packed.data(), a.data(), n_blocks, n_act, n_blocks,
                                          got.data());
        EXPECT_EQ(std::memcmp(got.data(), expected.data(), sizeof(float) * 16 * n_act), 0)
            << ggml_type_name(c.type) << " n_act " << n_act << (extreme ? " extreme codes" : "");
      }
    }
  }
}

// Codes at the ends of their ranges (activations +-127, Q8_0 weights -128
// and 127, Q4_0 nibbles 0 and 15, MXFP4's -12 and 12) stay exact: no int16
// saturation.
TEST(KernelPackedDot, ExtremeCodesDoNotOverflow) {
  for (const Case& c : kCases) {
    const int64_t n_blocks = 2;
    const size_t row_bytes = c.block_bytes;
    std::vector<std::byte> rows(8 * n_blocks * row_bytes);
    for (int r = 0; r < 8; ++r) {
      for (int b = 0; b < n_blocks; ++b) {
        std::byte* block = rows.data() + (r * n_blocks + b) * row_bytes;
        std::memcpy(block, &c.one, c.scale_bytes);  // little-endian
        // Rows alternate all-lowest and all-highest codes.
        const auto code = static_cast<std::byte>(r % 2 ? c.highest : c.lowest);
        std::fill(block + c.scale_bytes, block + row_bytes, code);
      }
    }
    WeightView view{c.type, 8, 32 * n_blocks, n_blocks * row_bytes, rows.data(), "extreme"};
    std::vector<std::byte> packed(rows.size());
    pack_rows(view, packed, 0, 1);
    // Two activation rows of -127s: the one-row and the several-row kernels.
    std::vector<Q8Block32> a(static_cast<size_t>(2 * n_blocks));
    for (auto& block : a) {
      block.d = 1.0f;
      for (int j = 0; j < 32; ++j) block.qs[j] = -127;
      block.sum = -127 * 32;
    }
    std::vector<std::pair<const char*, PackedDot>> kernels = {
        {"scalar", scalar::packed_dot(c.layout)}, {"dispatched", packed_dot(c.layout)}};
    if (cpu_features().avx2) kernels.emplace_back("avx2", avx2::packed_dot(c.layout));
    for (const auto& [level, kernel] : kernels) {
      for (const int n_act : {1, 2}) {
        float out[16];
        kernel(packed.data(), a.data(), n_blocks, n_act, n_blocks, out);
        for (int i = 0; i < n_act * 8; ++i) {
          const int w = i % 2 ? c.highest_value : c.lowest_value;
          EXPECT_EQ(out[i], static_cast<float>(w * -127 * 32 * n_blocks))
              << level << " " << ggml_type_name(c.type) << " output " << i;
        }
      }
    }
  }
}

// matmul over a packed matrix: equal to the same matrix unpacked, and a
// row's outputs are the same bits alone or in a batch of 37 on 1 or 2
// threads.
TEST(KernelPackedDot, MatmulPackedIsBatchInvariantAndEqualsUnpacked) {
  ThreadPool one(1), two(2), seven(7);
  for (const Case& c : kCases) {
    for (const int64_t n_rows : {40, 48}) {  // 5 groups; 6 (pairs at AVX-512)
      const int64_t n_cols = 96, n_batch = 37;
      const Matrix m = make_matrix(c.type, n_rows, n_cols, 21);
      WeightView unpacked = m.view;
      unpacked.packed = nullptr;
      const std::vector<float> x = normal_values(2, static_cast<size_t>(n_batch * n_cols));
      MatmulScratch scratch;
      std::vector<float> batch(static_cast<size_t>(n_batch * n_rows));
      std::vector<float> plain(batch.size());
      matmul(m.view, x, n_batch, batch, n_rows, two, scratch);
      matmul(unpacked, x, n_batch, plain, n_rows, one, scratch);
      std::vector<float> crowded(batch.size());  // more threads than cores
      matmul(m.view, x, n_batch, crowded, n_rows, seven, scratch);
      ASSERT_EQ(std::memcmp(crowded.data(), batch.data(), batch.size() * sizeof(float)), 0)
          << ggml_type_name(c.type) << " on 7 threads";
      ASSERT_EQ(std::memcmp(batch.data(), plain.data(), batch.size() * sizeof(float)), 0)
          << ggml_type_name(c.type);
      for (int64_t r = 0; r < n_batch; ++r) {
        std::vector<float> alone(static_cast<size_t>(n_rows));
        matmul(m.view, std::span(x).subspan(static_cast<size_t>(r * n_cols), n_cols), 1, alone,
               n_rows, r % 2 ? one : two, scratch);
        ASSERT_EQ(
            std::memcmp(alone.data(), batch.data() + r * n_rows, alone.size() * sizeof(float)), 0)
            << ggml_type_name(c.type) << " row " << r;
      }
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels
