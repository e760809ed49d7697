// The K-quant x Q8_K integer dot products (kernels/cpu/dot_kquants.hpp):
// the scalar kernels against a double-precision dot of the dequantized
// weights with the activation codes, the AVX2 kernels bit for bit against the
// scalar ones for 1..4 activation rows, and extreme codes and scales.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "kernels/cpu/dot_kquants.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

const GgmlType kTypes[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};

std::string name_of(GgmlType type) {
  return std::string(ggml_type_name(type));
}

size_t block_bytes(GgmlType type) {
  return ggml_type_traits(type).block_bytes;
}

// Offsets of the fp16 scale fields (d, and dmin where there is one) in a
// block of each type.
std::vector<size_t> half_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208};
    case GgmlType::IQ4_XS:
      return {0};
    default:
      return {};
  }
}

void set_halves(GgmlType type, std::vector<std::byte>& bytes, float value) {
  const size_t bb = block_bytes(type);
  for (size_t at = 0; at < bytes.size(); at += bb) {
    for (size_t off : half_offsets(type)) {
      const uint16_t h = fp32_to_fp16(value * (1.0f + 0.25f * static_cast<float>((at / bb) % 3)));
      std::memcpy(bytes.data() + at + off, &h, sizeof(h));
    }
  }
}

// A row of n_blocks super-blocks: quantized normal values where the type has
// a quantizer (IQ4_XS has none), else random bytes with sane fp16 scales.
std::vector<std::byte> quantized_row(GgmlType type, int64_t n_blocks, uint64_t seed) {
  const auto n = static_cast<size_t>(n_blocks * 256);
  std::vector<std::byte> bytes(*ggml_row_bytes(type, n));
  if (can_quantize(type)) {
    quantize_row(type, normal_values(seed, n, 0.05), bytes);
  } else {
    SplitMix64 bits(seed);
    for (std::byte& b : bytes) b = static_cast<std::byte>(bits.next() & 0xff);
    set_halves(type, bytes, 0.003f);
  }
  return bytes;
}

// Every bit pattern is a valid block apart from the fp16 scales: random
// bytes reach scale and code combinations the quantizer rarely produces.
std::vector<std::byte> random_row(GgmlType type, int64_t n_blocks, uint64_t seed) {
  std::vector<std::byte> bytes(*ggml_row_bytes(type, static_cast<size_t>(n_blocks * 256)));
  SplitMix64 bits(seed);
  for (std::byte& b : bytes) b = static_cast<std::byte>(bits.next() & 0xff);
  set_halves(type, bytes, 0.01f);
  return bytes;
}

std::vector<Q8BlockK> activations(int64_t n_blocks, uint64_t seed) {
  const std::vector<float> x = normal_values(seed, static_cast<size_t>(n_blocks * 256));
  std::vector<Q8BlockK> a(static_cast<size_t>(n_blocks));
  quantize_q8_k(x.data(), a.data(), n_blocks * 256);
  return a;
}

// sum_i dequant(w)_i * (a.d * qs_i) in double, and sum_i |that term|.
struct Reference {
  double dot = 0;
  double magnitude = 0;
};

Reference reference_dot(GgmlType type, const std::vector<std::byte>& row, const Q8BlockK* a,
                        int64_t n_blocks) {
  std::vector<float> w(static_cast<size_t>(n_blocks * 256));
  dequantize_row(type, row, w);
  Reference ref;
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (int i = 0; i < 256; ++i) {
      const double term = static_cast<double>(w[static_cast<size_t>(b * 256 + i)]) *
                          (static_cast<double>(a[b].d) * a[b].qs[i]);
      ref.dot += term;
      ref.magnitude += std::fabs(term);
    }
  }
  return ref;
}

void expect_near_reference(GgmlType type, const std::vector<std::byte>& row, const Q8BlockK* a,
                           int64_t n_blocks, float got, const std::string& what) {
  const Reference ref = reference_dot(type, row, a, n_blocks);
  EXPECT_NEAR(got, ref.dot, 1e-5 * ref.magnitude + 1e-30)
      << name_of(type) << " " << what << " n_blocks " << n_blocks;
}

TEST(KernelKQuantDot, EveryKQuantTypeHasAKernel) {
  for (GgmlType type : kTypes) {
    EXPECT_NE(scalar::kquant_dot(type), nullptr) << name_of(type);
    EXPECT_NE(kquant_dot(type), nullptr) << name_of(type);
  }
  EXPECT_EQ(kquant_dot(GgmlType::F32), nullptr);
  EXPECT_EQ(kquant_dot(GgmlType::Q8_0), nullptr);
  EXPECT_EQ(scalar::kquant_dot(GgmlType::Q4_0), nullptr);
}

TEST(KernelKQuantDot, ScalarMatchesDoubleDotOfDequantizedWeights) {
  for (GgmlType type : kTypes) {
    const KQuantDot dot = scalar::kquant_dot(type);
    for (int64_t n_blocks : {1, 2, 3, 8}) {
      for (uint64_t seed : {1u, 2u, 3u}) {
        const uint64_t s = seed * 1000 + static_cast<uint64_t>(n_blocks);
        const std::vector<Q8BlockK> a = activations(n_blocks, s + 77);
        for (bool random : {false, true}) {
          const std::vector<std::byte> row =
              random ? random_row(type, n_blocks, s) : quantized_row(type, n_blocks, s);
          float out = 0;
          dot(row.data(), a.data(), n_blocks, 1, n_blocks, &out);
          expect_near_reference(type, row, a.data(), n_blocks, out,
                                random ? "random bytes" : "quantized");
        }
      }
    }
  }
}

// Four activation rows a_stride blocks apart; out[i] of one call for all
// rows equals the call for row i alone.
TEST(KernelKQuantDot, ScalarRowsAreIndependent) {
  for (GgmlType type : kTypes) {
    const KQuantDot dot = scalar::kquant_dot(type);
    const int64_t n_blocks = 3;
    const int64_t stride = 5;
    const std::vector<std::byte> row = quantized_row(type, n_blocks, 9);
    const std::vector<Q8BlockK> a = activations(4 * stride, 10);
    float all[4];
    dot(row.data(), a.data(), stride, 4, n_blocks, all);
    for (int i = 0; i < 4; ++i) {
      float one = 0;
      dot(row.data(), a.data() + i * stride, stride, 1, n_blocks, &one);
      EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(all[i])) << name_of(type);
    }
  }
}

#if defined(__x86_64__)
TEST(KernelKQuantDot, Avx2MatchesScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (GgmlType type : kTypes) {
    const KQuantDot ref = scalar::kquant_dot(type);
    const KQuantDot simd = avx2::kquant_dot(type);
    ASSERT_NE(simd, nullptr) << name_of(type);
    for (int64_t n_blocks : {1, 2, 5, 8}) {
      const int64_t stride = n_blocks + 1;
      for (uint64_t seed : {11u, 12u, 13u, 14u}) {
        const std::vector<Q8BlockK> a = activations(4 * stride, seed + 500);
        for (bool random : {false, true}) {
          const std::vector<std::byte> row =
              random ? random_row(type, n_blocks, seed) : quantized_row(type, n_blocks, seed);
          float expected[4];
          ref(row.data(), a.data(), stride, 4, n_blocks, expected);
          for (int n_act = 1; n_act <= 4; ++n_act) {
            float got[4] = {-1, -1, -1, -1};
            simd(row.data(), a.data(), stride, n_act, n_blocks, got);
            for (int i = 0; i < n_act; ++i) {
              EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected[i]))
                  << name_of(type) << " n_blocks " << n_blocks << " n_act " << n_act << " row " << i
                  << ": " << got[i] << " vs " << expected[i] << (random ? " random" : "");
            }
          }
          // The dispatched kernel is the AVX2 one here.
          if (simd_level() >= SimdLevel::avx2) {
            float got = 0;
            kquant_dot(type)(row.data(), a.data() + stride, stride, 1, n_blocks, &got);
            EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected[1]));
          }
        }
      }
    }
  }
}
#endif

// A block of activation codes all equal to `code` (|code| <= 127).
Q8BlockK constant_block(int code, float d) {
  Q8BlockK block;
  block.d = d;
  for (int8_t& q : block.qs) q = static_cast<int8_t>(code);
  for (int16_t& s : block.bsums) s = static_cast<int16_t>(16 * code);
  return block;
}

// Codes alternating +127 / -127 in runs of `run`.
Q8BlockK alternating_block(int run, float d) {
  Q8BlockK block;
  block.d = d;
  for (int i = 0; i < 256; ++i) block.qs[i] = static_cast<int8_t>((i / run) % 2 ? -127 : 127);
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += block.qs[16 * g + j];
    block.bsums[g] = static_cast<int16_t>(sum);
  }
  return block;
}

// All-ones weight bytes (the largest codes and scales; Q6_K's scales -1),
// 0x80 bytes (Q6_K's scales -128) and random bytes, against activation
// codes at +-127: no int16 or int32 overflow anywhere.
TEST(KernelKQuantDot, ExtremeCodesDoNotOverflow) {
  const int64_t n_blocks = 4;
  std::vector<std::vector<Q8BlockK>> acts;
  acts.emplace_back(n_blocks, constant_block(127, 0.5f));
  acts.emplace_back(n_blocks, constant_block(-127, 0.25f));
  acts.emplace_back(n_blocks, alternating_block(1, 1.0f));
  acts.emplace_back(n_blocks, alternating_block(16, 1.0f));
  acts.emplace_back(n_blocks, alternating_block(32, 1.0f));
  acts.push_back(std::vector<Q8BlockK>(static_cast<size_t>(n_blocks)));  // all zero
  for (GgmlType type : kTypes) {
    std::vector<std::vector<std::byte>> rows;
    for (uint8_t fill : {0xFF, 0x80, 0x00, 0x7F, 0xAA}) {
      std::vector<std::byte> bytes(*ggml_row_bytes(type, n_blocks * 256),
                                   static_cast<std::byte>(fill));
      set_halves(type, bytes, 1.0f);
      rows.push_back(std::move(bytes));
    }
    rows.push_back(random_row(type, n_blocks, 99));
    const KQuantDot ref = scalar::kquant_dot(type);
    for (size_t w = 0; w < rows.size(); ++w) {
      for (size_t x = 0; x < acts.size(); ++x) {
        const std::string what =
            "weights " + std::to_string(w) + " activations " + std::to_string(x);
        float expected = 0;
        ref(rows[w].data(), acts[x].data(), n_blocks, 1, n_blocks, &expected);
        expect_near_reference(type, rows[w], acts[x].data(), n_blocks, expected, what);
#if defined(__x86_64__)
        if (cpu_features().avx2) {
          float got[4];
          // Four rows over the same activations: every row must agree.
          avx2::kquant_dot(type)(rows[w].data(), acts[x].data(), 0, 4, n_blocks, got);
          for (float g : got) {
            EXPECT_EQ(std::bit_cast<uint32_t>(g), std::bit_cast<uint32_t>(expected))
                << name_of(type) << " " << what << ": " << g << " vs " << expected;
          }
        }
#endif
      }
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels
