// The Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 x Q8Block32 integer dot products
// (kernels/cpu/dot_quants32.hpp): the scalar kernels against a
// double-precision dot of the dequantized weights with the activation
// values, the AVX2 kernels bit for bit against the scalar ones for 1..4
// activation rows, several rows at once bitwise equal to each alone, extreme
// codes, scales and exponents, the Q8_1 min correction of Q4_1/Q5_1, and
// matmul going through the kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/dot_quants32.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

const GgmlType kTypes[] = {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                           GgmlType::MXFP4};

std::string name_of(GgmlType type) {
  return std::string(ggml_type_name(type));
}

size_t block_bytes(GgmlType type) {
  return ggml_type_traits(type).block_bytes;
}

bool has_min(GgmlType type) {
  return type == GgmlType::Q4_1 || type == GgmlType::Q5_1;
}

bool has_fifth_bits(GgmlType type) {
  return type == GgmlType::Q5_0 || type == GgmlType::Q5_1;
}

// Where the 4 bytes of fifth bits start in a Q5 block.
size_t fifth_bits_offset(GgmlType type) {
  return type == GgmlType::Q5_0 ? 2 : 4;
}

void put_half(std::byte* at, float value) {
  const uint16_t h = fp32_to_fp16(value);
  std::memcpy(at, &h, sizeof(h));
}

float half_at(const std::byte* at) {
  uint16_t h;
  std::memcpy(&h, at, sizeof(h));
  return fp16_to_fp32(h);
}

// ---- Weight rows -------------------------------------------------------------

// n_blocks blocks quantized by the project's quantizer from normal values.
std::vector<std::byte> quantized_row(GgmlType type, int64_t n_blocks, uint64_t seed) {
  const auto n = static_cast<size_t>(32 * n_blocks);
  std::vector<std::byte> bytes(*ggml_row_bytes(type, n));
  quantize_row(type, normal_values(seed, n, 0.05), bytes);
  return bytes;
}

// Random bytes (every code and fifth-bit pattern), with sane scales: fp16
// d (and m) of either sign, or an E8M0 exponent near 1.
std::vector<std::byte> random_row(GgmlType type, int64_t n_blocks, uint64_t seed) {
  std::vector<std::byte> bytes(*ggml_row_bytes(type, static_cast<uint64_t>(32 * n_blocks)));
  SplitMix64 bits(seed);
  for (std::byte& b : bytes) b = static_cast<std::byte>(bits.next() & 0xff);
  for (size_t at = 0; at < bytes.size(); at += block_bytes(type)) {
    const auto k = static_cast<float>(bits.next() % 7) - 3.0f;
    if (type == GgmlType::MXFP4) {
      bytes[at] = static_cast<std::byte>(120 + bits.next() % 8);
      continue;
    }
    put_half(bytes.data() + at, 0.003f * k);
    if (has_min(type)) put_half(bytes.data() + at + 2, -0.02f * (k + 0.5f));
  }
  return bytes;
}

// Every block the same: code bytes `codes`, fifth bits `fifth` (0x00 or
// 0xFF), scale d and min m, or exponent e (MXFP4).
struct BlockPattern {
  uint8_t codes;
  uint8_t fifth;
  float d;
  float m;
  uint8_t e;
};

std::vector<std::byte> pattern_row(GgmlType type, int64_t n_blocks, const BlockPattern& p) {
  const size_t bb = block_bytes(type);
  std::vector<std::byte> bytes(bb * static_cast<size_t>(n_blocks), std::byte{p.codes});
  for (size_t at = 0; at < bytes.size(); at += bb) {
    if (type == GgmlType::MXFP4) {
      bytes[at] = std::byte{p.e};
      continue;
    }
    put_half(bytes.data() + at, p.d);
    if (has_min(type)) put_half(bytes.data() + at + 2, p.m);
    if (has_fifth_bits(type)) {
      std::memset(bytes.data() + at + fifth_bits_offset(type), p.fifth, 4);
    }
  }
  return bytes;
}

// Extreme rows: all codes at either end (nibbles 0 or 15, fifth bits all
// clear or all set), fp16 scales negative, zero, -0 and the largest finite,
// and MXFP4 exponents from the subnormal scales 2^-128, 2^-127 to 2^102
// (outputs stay finite for activations below 2^-4 or so).
std::vector<std::vector<std::byte>> extreme_rows(GgmlType type, int64_t n_blocks) {
  std::vector<std::vector<std::byte>> rows;
  for (const uint8_t codes : {uint8_t{0x00}, uint8_t{0xFF}, uint8_t{0x0F}, uint8_t{0x77}}) {
    for (const uint8_t fifth : {uint8_t{0x00}, uint8_t{0xFF}}) {
      if (type == GgmlType::MXFP4) {
        for (const uint8_t e : {0, 1, 2, 3, 100, 127, 128, 129, 200, 230}) {
          rows.push_back(pattern_row(type, n_blocks, {codes, fifth, 0, 0, e}));
        }
        continue;
      }
      for (const float d : {-0.25f, 0.0f, -0.0f, 1.0f / 1024, 65504.0f}) {
        const float m = std::clamp(-3.5f * d, -65504.0f, 65504.0f);  // finite in fp16
        rows.push_back(pattern_row(type, n_blocks, {codes, fifth, d, m, 0}));
      }
      if (has_min(type)) rows.push_back(pattern_row(type, n_blocks, {codes, fifth, 0.5f, 0, 0}));
    }
  }
  return rows;
}

// ---- Activations ---------------------------------------------------------------

// n_rows activation rows of n_blocks blocks, row i at block i * stride; the
// blocks between rows hold other values (no kernel may read them).
std::vector<Q8Block32> activations(int n_rows, int64_t stride, uint64_t seed, double scale = 1.0) {
  const std::vector<float> x =
      normal_values(seed, static_cast<size_t>(n_rows * stride * 32), scale);
  std::vector<Q8Block32> blocks(static_cast<size_t>(n_rows * stride));
  quantize_q8_0(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  return blocks;
}

// A block of the same code everywhere, with scale d.
Q8Block32 uniform_block(int8_t code, float d) {
  Q8Block32 block;
  block.d = d;
  for (int8_t& q : block.qs) q = code;
  block.sum = 32 * code;
  return block;
}

// Extreme activation rows: all codes +127 or -127 (the ends quantize_q8_0
// reaches), alternating, and a zero scale.
std::vector<Q8Block32> extreme_activations(int64_t n_blocks, int64_t stride, float d) {
  std::vector<Q8Block32> blocks(static_cast<size_t>(4 * stride));
  for (int64_t b = 0; b < n_blocks; ++b) {
    blocks[static_cast<size_t>(b)] = uniform_block(127, d);
    blocks[static_cast<size_t>(stride + b)] = uniform_block(-127, d);
    blocks[static_cast<size_t>(2 * stride + b)] = uniform_block(b % 2 == 0 ? 127 : -127, d);
    blocks[static_cast<size_t>(3 * stride + b)] = uniform_block(-127, 0.0f);
  }
  return blocks;
}

// ---- References ------------------------------------------------------------------

struct Reference {
  double dot = 0;
  double magnitude = 0;  // sum of |terms|, the scale of float rounding
};

// The double-precision dot of the dequantized weights with the activation
// values a.d * a.qs. The magnitude counts the scale and min parts of Q4_1
// and Q5_1 apart, as the kernel forms them before they cancel.
Reference reference_dot(GgmlType type, const std::vector<std::byte>& row, const Q8Block32* a,
                        int64_t n_blocks) {
  std::vector<float> w(static_cast<size_t>(32 * n_blocks));
  dequantize_row(type, row, w);
  Reference ref;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = row.data() + static_cast<size_t>(b) * block_bytes(type);
    const double m = has_min(type) ? half_at(block + 2) : 0.0;
    for (int j = 0; j < 32; ++j) {
      const double x = static_cast<double>(a[b].d) * a[b].qs[j];
      const double wj = w[static_cast<size_t>(32 * b + j)];
      ref.dot += wj * x;
      ref.magnitude += (std::fabs(wj) + 2 * std::fabs(m)) * std::fabs(x);
    }
  }
  return ref;
}

// Float rounding of the kernel's order: each block adds a few relative
// errors of 2^-24 of the magnitude; subnormal scale products (MXFP4's
// smallest exponents) add an absolute error of up to half the smallest
// subnormal times the block's integer sum (at most 32 * 12 * 127 < 2^16).
double tolerance(const Reference& ref, int64_t n_blocks) {
  return 1e-6 * ref.magnitude + static_cast<double>(n_blocks) * 0x1p-133;
}

void expect_near_reference(GgmlType type, const std::vector<std::byte>& row,
                           const std::vector<Q8Block32>& a, int n_act, int64_t stride,
                           int64_t n_blocks, const std::string& what) {
  float out[4];
  scalar::quants32_row_dot(type)(row.data(), a.data(), stride, n_act, n_blocks, out);
  for (int i = 0; i < n_act; ++i) {
    const Reference ref = reference_dot(type, row, a.data() + i * stride, n_blocks);
    ASSERT_TRUE(std::isfinite(out[i])) << name_of(type) << " " << what << " act " << i;
    ASSERT_NEAR(out[i], ref.dot, tolerance(ref, n_blocks))
        << name_of(type) << " " << what << ", " << n_blocks << " blocks, act " << i;
  }
}

// The AVX2 kernel gives the scalar kernel's bits for 1..4 rows.
void expect_avx2_bits(GgmlType type, const std::vector<std::byte>& row,
                      const std::vector<Q8Block32>& a, int64_t stride, int64_t n_blocks,
                      const std::string& what) {
  for (int n_act = 1; n_act <= 4; ++n_act) {
    float expected[4] = {}, got[4] = {};
    scalar::quants32_row_dot(type)(row.data(), a.data(), stride, n_act, n_blocks, expected);
    avx2::quants32_row_dot(type)(row.data(), a.data(), stride, n_act, n_blocks, got);
    ASSERT_EQ(std::memcmp(expected, got, sizeof(float) * static_cast<size_t>(n_act)), 0)
        << name_of(type) << " " << what << ", " << n_blocks << " blocks, " << n_act
        << " rows: scalar " << expected[n_act - 1] << " avx2 " << got[n_act - 1];
  }
}

const int64_t kBlockCounts[] = {1, 3, 5, 8, 64};

// ---- Tests -----------------------------------------------------------------------

TEST(KernelQuants32Dot, KernelsForExactlyTheFiveTypes) {
  for (const GgmlType type : kTypes) {
    ASSERT_NE(scalar::quants32_row_dot(type), nullptr) << name_of(type);
    EXPECT_EQ(scalar::row_dot(type), scalar::quants32_row_dot(type)) << name_of(type);
    const RowDot expected = simd_level() >= SimdLevel::avx2 ? avx2::quants32_row_dot(type)
                                                            : scalar::quants32_row_dot(type);
    EXPECT_EQ(row_dot(type), expected) << name_of(type);
    if (cpu_features().avx2) {
      EXPECT_NE(avx2::quants32_row_dot(type), nullptr) << name_of(type);
    }
  }
  for (const GgmlType type :
       {GgmlType::F32, GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(scalar::quants32_row_dot(type), nullptr) << name_of(type);
    if (cpu_features().avx2) {
      EXPECT_EQ(avx2::quants32_row_dot(type), nullptr) << name_of(type);
    }
  }
  EXPECT_EQ(row_dot(GgmlType::Q4_K), nullptr);
}

// Quantized normal rows against quantized normal activations.
TEST(KernelQuants32Dot, ScalarMatchesTheDoubleDot) {
  for (const GgmlType type : kTypes) {
    for (const int64_t n_blocks : kBlockCounts) {
      const int64_t stride = n_blocks + 2;
      const auto seed = 100 * static_cast<uint64_t>(type) + static_cast<uint64_t>(n_blocks);
      const std::vector<Q8Block32> a = activations(4, stride, seed + 1);
      expect_near_reference(type, quantized_row(type, n_blocks, seed), a, 4, stride, n_blocks,
                            "quantized row");
      expect_near_reference(type, random_row(type, n_blocks, seed), a, 4, stride, n_blocks,
                            "random row");
    }
  }
}

// All-extreme codes, scales of every sign and size, MXFP4's smallest and
// large exponents, against extreme and ordinary activations.
TEST(KernelQuants32Dot, ScalarExtremesMatchTheDoubleDot) {
  for (const GgmlType type : kTypes) {
    for (const int64_t n_blocks : {int64_t{3}, int64_t{64}}) {
      const int64_t stride = n_blocks + 1;
      // Activation scales that keep MXFP4's 2^102 blocks finite.
      const float d = type == GgmlType::MXFP4 ? 1.0f / 4096 : 0.5f;
      const std::vector<Q8Block32> extreme = extreme_activations(n_blocks, stride, d);
      const std::vector<Q8Block32> normal = activations(4, stride, 9, 0.01);
      int index = 0;
      for (const std::vector<std::byte>& row : extreme_rows(type, n_blocks)) {
        const std::string what = "extreme row " + std::to_string(index++);
        expect_near_reference(type, row, extreme, 4, stride, n_blocks, what + ", extreme acts");
        expect_near_reference(type, row, normal, 4, stride, n_blocks, what + ", normal acts");
      }
    }
  }
}

TEST(KernelQuants32Dot, Avx2MatchesScalarBitwise) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const GgmlType type : kTypes) {
    for (const int64_t n_blocks : kBlockCounts) {
      const int64_t stride = n_blocks + 3;
      const auto seed = 300 * static_cast<uint64_t>(type) + static_cast<uint64_t>(n_blocks);
      const std::vector<Q8Block32> a = activations(4, stride, seed + 1);
      for (uint64_t k = 0; k < 3; ++k) {
        expect_avx2_bits(type, quantized_row(type, n_blocks, seed + 10 * k), a, stride, n_blocks,
                         "quantized row");
        expect_avx2_bits(type, random_row(type, n_blocks, seed + 10 * k + 5), a, stride, n_blocks,
                         "random row");
      }
      const float d = type == GgmlType::MXFP4 ? 1.0f / 4096 : 0.5f;
      const std::vector<Q8Block32> extreme = extreme_activations(n_blocks, stride, d);
      int index = 0;
      for (const std::vector<std::byte>& row : extreme_rows(type, n_blocks)) {
        const std::string what = "extreme row " + std::to_string(index++);
        expect_avx2_bits(type, row, extreme, stride, n_blocks, what + ", extreme acts");
        expect_avx2_bits(type, row, a, stride, n_blocks, what + ", normal acts");
      }
    }
  }
}

// One call over 4 activation rows gives each row's bits alone (n_act = 1 at
// that row's blocks), on every level: the batch invariance matmul promises.
TEST(KernelQuants32Dot, RowsTogetherEqualEachAlone) {
  struct Level {
    const char* name;
    RowDot (*kernel)(GgmlType);
  };
  std::vector<Level> levels = {{"scalar", scalar::quants32_row_dot}};
  if (cpu_features().avx2) levels.push_back({"avx2", avx2::quants32_row_dot});
  for (const Level& level : levels) {
    for (const GgmlType type : kTypes) {
      for (const int64_t n_blocks : kBlockCounts) {
        const int64_t stride = n_blocks + 5;
        const auto seed = 500 * static_cast<uint64_t>(type) + static_cast<uint64_t>(n_blocks);
        const std::vector<std::byte> row = quantized_row(type, n_blocks, seed);
        const std::vector<Q8Block32> a = activations(4, stride, seed + 1);
        const RowDot kernel = level.kernel(type);
        for (int n_act = 2; n_act <= 4; ++n_act) {
          float together[4];
          kernel(row.data(), a.data(), stride, n_act, n_blocks, together);
          for (int i = 0; i < n_act; ++i) {
            float alone;
            kernel(row.data(), a.data() + i * stride, stride, 1, n_blocks, &alone);
            ASSERT_EQ(std::bit_cast<uint32_t>(alone), std::bit_cast<uint32_t>(together[i]))
                << level.name << " " << name_of(type) << ", " << n_blocks << " blocks, row " << i
                << " of " << n_act;
          }
        }
      }
    }
  }
}

// The Q8_1 min correction: the double sum of m * c within float rounding,
// the AVX2 version's bits, and 1..4 rows at once equal to each alone, over
// lengths around the 8-lane steps.
TEST(KernelQuants32Dot, MinCorrectionMatchesTheDoubleSumAndAvx2Bits) {
  for (const GgmlType type : kTypes) {
    if (!has_min(type)) {
      EXPECT_EQ(scalar::q8_1_min_correction(type), nullptr) << name_of(type);
      EXPECT_EQ(q8_1_min_correction(type), nullptr) << name_of(type);
      continue;
    }
    for (const int64_t n_blocks : {1, 3, 7, 8, 9, 16, 64, 67}) {
      const int64_t stride = n_blocks + 3;
      const auto seed = 700 * static_cast<uint64_t>(type) + static_cast<uint64_t>(n_blocks);
      const std::vector<float> c = normal_values(seed, static_cast<size_t>(4 * stride), 1e-3);
      for (const std::vector<std::byte>& row :
           {quantized_row(type, n_blocks, seed), random_row(type, n_blocks, seed + 1)}) {
        // out starts at a kernel result; the correction is added to it.
        const std::vector<float> start = normal_values(seed + 2, 4);
        std::vector<float> got = start;
        scalar::q8_1_min_correction(type)(row.data(), c.data(), stride, 4, n_blocks, got.data());
        for (int i = 0; i < 4; ++i) {
          double sum = 0, magnitude = std::fabs(start[static_cast<size_t>(i)]);
          for (int64_t b = 0; b < n_blocks; ++b) {
            const double term =
                double(half_at(row.data() + static_cast<size_t>(b) * block_bytes(type) + 2)) *
                c[static_cast<size_t>(i * stride + b)];
            sum += term;
            magnitude += std::fabs(term);
          }
          EXPECT_NEAR(got[static_cast<size_t>(i)], start[static_cast<size_t>(i)] + sum,
                      1e-6 * magnitude)
              << name_of(type) << ", " << n_blocks << " blocks, row " << i;
        }
        std::vector<std::pair<const char*, MinCorrection>> levels = {
            {"scalar", scalar::q8_1_min_correction(type)}};
        if (cpu_features().avx2) levels.emplace_back("avx2", avx2::q8_1_min_correction(type));
        for (const auto& [level, correction] : levels) {
          for (int n_act = 1; n_act <= 4; ++n_act) {
            std::vector<float> together = start;
            correction(row.data(), c.data(), stride, n_act, n_blocks, together.data());
            for (int i = 0; i < n_act; ++i) {
              float alone = start[static_cast<size_t>(i)];
              correction(row.data(), c.data() + i * stride, stride, 1, n_blocks, &alone);
              ASSERT_EQ(std::bit_cast<uint32_t>(together[static_cast<size_t>(i)]),
                        std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]))
                  << level << " " << name_of(type) << ", " << n_blocks << " blocks, row " << i
                  << " of " << n_act;
              ASSERT_EQ(std::bit_cast<uint32_t>(alone),
                        std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]))
                  << level << " " << name_of(type) << ", " << n_blocks << " blocks, row " << i
                  << " alone";
            }
          }
        }
      }
    }
  }
}

// A weight matrix of quantized normal rows and its view.
struct Matrix {
  std::vector<std::byte> bytes;
  WeightView view;
};

Matrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_blocks, uint64_t seed) {
  Matrix m;
  for (int64_t o = 0; o < n_rows; ++o) {
    const std::vector<std::byte> row =
        quantized_row(type, n_blocks, seed + static_cast<uint64_t>(o));
    m.bytes.insert(m.bytes.end(), row.begin(), row.end());
  }
  const size_t row_bytes = m.bytes.size() / static_cast<size_t>(n_rows);
  m.view = {type, n_rows, 32 * n_blocks, row_bytes, m.bytes.data(), "blk.0.q32.weight"};
  return m;
}

// matmul over these types is the row kernel (plus the Q8_1 correction for
// Q4_1/Q5_1) on the activations quantized to Q8Block32, bit for bit, for a
// row count that is no multiple of 8, in a batch and alone.
TEST(KernelQuants32Dot, MatmulIsTheRowKernelsBatchInvariant) {
  ThreadPool pool(2);
  const int64_t n_rows = 13, n_cols = 256, n_x = 6, n_blocks = n_cols / 32;
  for (const GgmlType type : kTypes) {
    const Matrix matrix = make_matrix(type, n_rows, n_blocks, 40);
    const WeightView& w = matrix.view;
    const std::vector<std::byte>& bytes = matrix.bytes;
    const size_t row_bytes = w.row_bytes;
    const std::vector<float> x = normal_values(77, static_cast<size_t>(n_x * n_cols));
    std::vector<Q8Block32> a(static_cast<size_t>(n_x * n_blocks));
    quantize_q8_0(x.data(), a.data(), n_x * n_cols);
    MatmulScratch scratch;
    std::vector<float> y(static_cast<size_t>(n_x * n_rows));
    matmul(w, x, n_x, y, n_rows, pool, scratch);
    for (int64_t r = 0; r < n_x; ++r) {
      // The Q8_1 corrections of row r, as matmul makes them.
      std::vector<float> c(static_cast<size_t>(n_blocks));
      for (int64_t b = 0; b < n_blocks; ++b) {
        const float* xb = x.data() + r * n_cols + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const Q8Block32& block = a[static_cast<size_t>(r * n_blocks + b)];
        const auto sum = static_cast<float>(block.sum);
        c[static_cast<size_t>(b)] = fp16_to_fp32(fp32_to_fp16(amax / 127.0f * sum)) - block.d * sum;
      }
      std::vector<float> alone(static_cast<size_t>(n_rows));
      matmul(w, std::span(x).subspan(static_cast<size_t>(r * n_cols), n_cols), 1, alone, n_rows,
             pool, scratch);
      for (int64_t o = 0; o < n_rows; ++o) {
        const std::byte* row = bytes.data() + static_cast<size_t>(o) * row_bytes;
        float expected;
        row_dot(type)(row, a.data() + r * n_blocks, n_blocks, 1, n_blocks, &expected);
        if (has_min(type))
          q8_1_min_correction(type)(row, c.data(), n_blocks, 1, n_blocks, &expected);
        const float got = y[static_cast<size_t>(r * n_rows + o)];
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected))
            << name_of(type) << " row " << r << " output " << o;
        ASSERT_EQ(std::bit_cast<uint32_t>(alone[static_cast<size_t>(o)]),
                  std::bit_cast<uint32_t>(got))
            << name_of(type) << " row " << r << " output " << o << " alone vs in the batch";
      }
    }
  }
}

// One input against Q4_1 (with its block-sum corrections), Q5_0 and
// MXFP4 at once: the same bits as separate calls, for decode and a batch.
TEST(KernelQuants32Dot, SharedInputWithQ4_1EqualsSeparateCalls) {
  ThreadPool pool(2);
  const int64_t n_blocks = 8;
  const Matrix set[] = {make_matrix(GgmlType::Q5_0, 9, n_blocks, 1),
                        make_matrix(GgmlType::Q4_1, 16, n_blocks, 2),
                        make_matrix(GgmlType::MXFP4, 5, n_blocks, 3)};
  for (const int64_t n_x : {1, 7}) {
    const std::vector<float> x = normal_values(12, static_cast<size_t>(n_x * 32 * n_blocks));
    MatmulScratch scratch;
    std::vector<std::vector<float>> shared, separate;
    std::vector<MatmulOutput> outputs;
    for (const Matrix& m : set) {
      shared.emplace_back(static_cast<size_t>(n_x * m.view.n_rows), -1.0f);
      separate.push_back(shared.back());
      matmul(m.view, x, n_x, separate.back(), m.view.n_rows, pool, scratch);
    }
    for (size_t i = 0; i < std::size(set); ++i) {
      outputs.push_back({&set[i].view, shared[i], set[i].view.n_rows});
    }
    matmul_shared_input(outputs, x, n_x, pool, scratch);
    for (size_t i = 0; i < std::size(set); ++i) {
      EXPECT_EQ(std::memcmp(shared[i].data(), separate[i].data(), shared[i].size() * sizeof(float)),
                0)
          << name_of(set[i].view.type) << ", " << n_x << " rows";
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels
