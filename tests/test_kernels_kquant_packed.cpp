// The packed Q4_K / Q6_K kernels (kernels/cpu/dot_kquants_packed.hpp): the
// scalar packed kernel is the per-row kernel's bits for every row of a
// group, the AVX2 kernel is the scalar one's bits for 1..4 activation rows,
// extreme codes and scales do not overflow, and matmul over a packed matrix
// equals the unpacked one and is batch invariant.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dot_kquants.hpp"
#include "kernels/cpu/dot_kquants_packed.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

struct Case {
  GgmlType type;
  PackedLayout layout;
  size_t block_bytes;
  std::vector<size_t> halves;  // offsets of the fp16 fields in a file block
};

const Case kCases[] = {{GgmlType::Q4_K, PackedLayout::q4_Kx8, 144, {0, 2}},
                       {GgmlType::Q6_K, PackedLayout::q6_Kx8, 210, {208}}};

std::string name_of(const Case& c) {
  return std::string(ggml_type_name(c.type));
}

// n_rows rows of n_blocks super-blocks: quantized normal values, or random
// bytes with sane fp16 scales.
std::vector<std::byte> make_rows(const Case& c, int64_t n_rows, int64_t n_blocks, uint64_t seed,
                                 bool random) {
  const size_t row_bytes = c.block_bytes * static_cast<size_t>(n_blocks);
  std::vector<std::byte> bytes(row_bytes * static_cast<size_t>(n_rows));
  if (random) {
    SplitMix64 bits(seed);
    for (std::byte& b : bytes) b = static_cast<std::byte>(bits.next() & 0xff);
    for (size_t at = 0; at < bytes.size(); at += c.block_bytes) {
      for (size_t off : c.halves) {
        const auto h = fp32_to_fp16(0.002f * static_cast<float>(1 + bits.next() % 5));
        std::memcpy(bytes.data() + at + off, &h, sizeof(h));
      }
    }
    return bytes;
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row(
        c.type,
        normal_values(seed + static_cast<uint64_t>(r), static_cast<size_t>(n_blocks * 256), 0.05),
        std::span(bytes).subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
  }
  return bytes;
}

WeightView view_of(const Case& c, const std::vector<std::byte>& bytes, int64_t n_rows,
                   int64_t n_blocks) {
  return {c.type,         n_rows,
          n_blocks * 256, c.block_bytes * static_cast<size_t>(n_blocks),
          bytes.data(),   "blk.0.kpacked.weight"};
}

std::vector<std::byte> packed_copy(const WeightView& w) {
  std::vector<std::byte> packed(static_cast<size_t>(w.n_rows) * w.row_bytes);
  pack_rows(w, packed, 0, w.n_rows / kPackRows);
  return packed;
}

std::vector<Q8BlockK> activations(int64_t n_blocks, uint64_t seed) {
  const std::vector<float> x = normal_values(seed, static_cast<size_t>(n_blocks * 256));
  std::vector<Q8BlockK> a(static_cast<size_t>(n_blocks));
  quantize_q8_k(x.data(), a.data(), n_blocks * 256);
  return a;
}

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST(KernelKQuantPacked, LayoutsAndKernels) {
  EXPECT_EQ(packed_layout(GgmlType::Q4_K, 16), PackedLayout::q4_Kx8);
  EXPECT_EQ(packed_layout(GgmlType::Q6_K, 8), PackedLayout::q6_Kx8);
  EXPECT_EQ(packed_layout(GgmlType::Q6_K, 12), PackedLayout::none);
  EXPECT_EQ(packed_layout(GgmlType::Q5_K, 16), PackedLayout::none);
  EXPECT_EQ(packed_block_bytes(PackedLayout::q4_Kx8), 8u * 144u);
  EXPECT_EQ(packed_block_bytes(PackedLayout::q6_Kx8), 8u * 210u);
  EXPECT_TRUE(is_k_layout(PackedLayout::q4_Kx8));
  EXPECT_TRUE(is_k_layout(PackedLayout::q6_Kx8));
  EXPECT_FALSE(is_k_layout(PackedLayout::q4_0x8));
  EXPECT_FALSE(is_k_layout(PackedLayout::none));
  for (const Case& c : kCases) {
    EXPECT_NE(scalar::packed_kquant_dot(c.layout), nullptr);
    EXPECT_NE(packed_kquant_dot(c.layout), nullptr);
  }
  EXPECT_EQ(packed_kquant_dot(PackedLayout::q4_0x8), nullptr);
  EXPECT_EQ(scalar::packed_kquant_dot(PackedLayout::none), nullptr);
}

// Packing keeps every byte: each byte of the file occurs in the copy as
// often as before (the layout itself is pinned by the kernel tests).
TEST(KernelKQuantPacked, PackingIsAPermutation) {
  for (const Case& c : kCases) {
    const std::vector<std::byte> rows = make_rows(c, 16, 2, 5, true);
    const std::vector<std::byte> packed = packed_copy(view_of(c, rows, 16, 2));
    std::vector<int> counts(256);
    for (std::byte b : rows) ++counts[static_cast<uint8_t>(b)];
    for (std::byte b : packed) --counts[static_cast<uint8_t>(b)];
    for (int v = 0; v < 256; ++v) EXPECT_EQ(counts[v], 0) << name_of(c) << " byte " << v;
  }
}

// Scalar packed == scalar per-row kernel, bit for bit, every row of every
// group, for 1..4 activation rows.
TEST(KernelKQuantPacked, ScalarPackedMatchesPerRowKernel) {
  for (const Case& c : kCases) {
    const KQuantDot row_dot = scalar::kquant_dot(c.type);
    const PackedKDot group_dot = scalar::packed_kquant_dot(c.layout);
    for (const int64_t n_blocks : {1, 2, 3, 8}) {
      const int64_t stride = n_blocks + 1;
      for (const uint64_t seed : {1u, 2u}) {
        for (const bool random : {false, true}) {
          const uint64_t s = seed * 100 + static_cast<uint64_t>(n_blocks);
          const std::vector<std::byte> rows = make_rows(c, 16, n_blocks, s, random);
          const WeightView w = view_of(c, rows, 16, n_blocks);
          const std::vector<std::byte> packed = packed_copy(w);
          const std::vector<Q8BlockK> a = activations(4 * stride, s + 7);
          const size_t group_bytes = static_cast<size_t>(n_blocks) * packed_block_bytes(c.layout);
          for (int64_t g = 0; g < 2; ++g) {
            for (int n_act = 1; n_act <= 4; ++n_act) {
              float got[32];
              group_dot(packed.data() + g * group_bytes, a.data(), stride, n_act, n_blocks, got);
              for (int r = 0; r < 8; ++r) {
                float expected[4];
                row_dot(w.row(g * 8 + r).data(), a.data(), stride, n_act, n_blocks, expected);
                for (int i = 0; i < n_act; ++i) {
                  ASSERT_EQ(bits_of(got[i * 8 + r]), bits_of(expected[i]))
                      << name_of(c) << " n_blocks " << n_blocks << " row " << g * 8 + r << " act "
                      << i << " of " << n_act << (random ? " random" : " quantized");
                }
              }
            }
          }
        }
      }
    }
  }
}

#if defined(__x86_64__)
// AVX2 packed == scalar packed, bit for bit, and the dispatched kernel is
// the AVX2 one where the machine has it.
TEST(KernelKQuantPacked, Avx2MatchesScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const Case& c : kCases) {
    const PackedKDot ref = scalar::packed_kquant_dot(c.layout);
    const PackedKDot simd = avx2::packed_kquant_dot(c.layout);
    ASSERT_NE(simd, nullptr) << name_of(c);
    for (const int64_t n_blocks : {1, 2, 5, 8}) {
      const int64_t stride = n_blocks + 2;
      for (const uint64_t seed : {11u, 12u, 13u}) {
        for (const bool random : {false, true}) {
          const std::vector<std::byte> rows = make_rows(c, 8, n_blocks, seed, random);
          const std::vector<std::byte> packed = packed_copy(view_of(c, rows, 8, n_blocks));
          const std::vector<Q8BlockK> a = activations(4 * stride, seed + 500);
          float expected[32];
          ref(packed.data(), a.data(), stride, 4, n_blocks, expected);
          for (int n_act = 1; n_act <= 4; ++n_act) {
            float got[32];
            std::fill(std::begin(got), std::end(got), -1.0f);
            simd(packed.data(), a.data(), stride, n_act, n_blocks, got);
            for (int k = 0; k < 8 * n_act; ++k) {
              ASSERT_EQ(bits_of(got[k]), bits_of(expected[k]))
                  << name_of(c) << " n_blocks " << n_blocks << " n_act " << n_act << " out " << k
                  << ": " << got[k] << " vs " << expected[k] << (random ? " random" : "");
            }
          }
          if (simd_level() >= SimdLevel::avx2) {
            float got[8];
            packed_kquant_dot(c.layout)(packed.data(), a.data() + stride, stride, 1, n_blocks, got);
            EXPECT_EQ(std::memcmp(got, expected + 8, sizeof(got)), 0) << name_of(c);
          }
        }
      }
    }
  }
}
#endif

// AVX-512 pairs of groups == scalar packed on each group, bit for bit, for
// any number of activation rows (8 at a time, then 4, 2, 1 inside).
TEST(KernelKQuantPacked, Avx512PairsMatchScalarBitForBit) {
  if (simd_level() < SimdLevel::avx512) {
    GTEST_SKIP() << "no AVX-512 VNNI on this CPU (or CORTIQ_SIMD below it)";
  }
  for (const Case& c : kCases) {
    const PackedKDot ref = scalar::packed_kquant_dot(c.layout);
    const PackedKDot pair = avx512::packed_kquant_dot_pair(c.layout);
    ASSERT_NE(pair, nullptr) << name_of(c);
    for (const int64_t n_blocks : {1, 3, 8}) {
      const int64_t stride = n_blocks + 2;
      for (const bool random : {false, true}) {
        const uint64_t seed = 40 + static_cast<uint64_t>(n_blocks);
        const std::vector<std::byte> rows = make_rows(c, 16, n_blocks, seed, random);
        const std::vector<std::byte> packed = packed_copy(view_of(c, rows, 16, n_blocks));
        const int max_act = 23;
        const std::vector<Q8BlockK> a = activations(max_act * stride, seed + 500);
        const size_t group_bytes = static_cast<size_t>(n_blocks) * packed_block_bytes(c.layout);
        std::vector<float> expected(static_cast<size_t>(16 * max_act));
        for (int g = 0; g < 2; ++g) {
          std::vector<float> half(static_cast<size_t>(8 * max_act));
          for (int i = 0; i < max_act; ++i) {
            ref(packed.data() + g * group_bytes, a.data() + i * stride, stride, 1, n_blocks,
                half.data() + 8 * i);
          }
          for (int i = 0; i < max_act; ++i) {
            std::copy_n(half.data() + 8 * i, 8, expected.data() + 16 * i + 8 * g);
          }
        }
        for (const int n_act : {1, 2, 3, 4, 7, 8, 15, max_act}) {
          std::vector<float> got(static_cast<size_t>(16 * n_act), -1.0f);
          pair(packed.data(), a.data(), stride, n_act, n_blocks, got.data());
          for (int k = 0; k < 16 * n_act; ++k) {
            ASSERT_EQ(bits_of(got[k]), bits_of(expected[k]))
                << name_of(c) << " n_blocks " << n_blocks << " n_act " << n_act << " out " << k
                << (random ? " random" : "");
          }
        }
      }
    }
  }
}

// Sets the fp16 field at `offset` of every block of `rows` to `value`.
void set_half(const Case& c, std::vector<std::byte>& rows, size_t offset, float value) {
  const uint16_t h = fp32_to_fp16(value);
  for (size_t at = 0; at < rows.size(); at += c.block_bytes) {
    std::memcpy(rows.data() + at + offset, &h, sizeof(h));
  }
}

// The integer parts of one row's block against one activation block, in
// int64 from the dequantized codes: with d = 1 (and dmin = 0) a Q4_K value
// is sc * q and a Q6_K value sc * (q - 32), exactly; with d = 0, dmin = 1 a
// Q4_K value is -m.
struct IntegerParts {
  int64_t isum = 0;
  int64_t imin = 0;
};

IntegerParts integer_parts(const Case& c, const std::byte* block, const Q8BlockK& x) {
  std::vector<std::byte> copy(block, block + c.block_bytes);
  std::vector<float> w(256);
  IntegerParts parts;
  set_half(c, copy, c.halves[0], 1.0f);
  if (c.halves.size() > 1) set_half(c, copy, c.halves[1], 0.0f);
  dequantize_row(c.type, copy, w);
  for (int i = 0; i < 256; ++i) parts.isum += static_cast<int64_t>(w[i]) * x.qs[i];
  if (c.halves.size() > 1) {
    set_half(c, copy, c.halves[0], 0.0f);
    set_half(c, copy, c.halves[1], 1.0f);
    dequantize_row(c.type, copy, w);
    for (int i = 0; i < 256; ++i) parts.imin -= static_cast<int64_t>(w[i]) * x.qs[i];
  }
  return parts;
}

// Codes and scales at the ends of their ranges (all-max and all-min nibbles
// and 6-bit codes, scales 63 or +-127/-128, activations +-127): the result
// is the canonical float sequence over the exact integer parts.
TEST(KernelKQuantPacked, ExtremeCodesAreExact) {
  const int64_t n_blocks = 2;
  std::vector<std::vector<Q8BlockK>> acts;
  for (const int pattern : {0, 1, 2, 3, 4}) {
    std::vector<Q8BlockK> a(static_cast<size_t>(n_blocks));
    for (Q8BlockK& block : a) {
      block.d = 0.75f;
      for (int i = 0; i < 256; ++i) {
        const int sign = pattern == 0   ? 1
                         : pattern == 1 ? -1
                         : pattern == 2 ? ((i / 4) % 2 ? -1 : 1)
                         : pattern == 3 ? ((i / 32) % 2 ? -1 : 1)
                                        : ((i % 3) ? 1 : -1);
        block.qs[i] = static_cast<int8_t>(127 * sign);
      }
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += block.qs[16 * g + j];
        block.bsums[g] = static_cast<int16_t>(sum);
      }
    }
    acts.push_back(std::move(a));
  }
  for (const Case& c : kCases) {
    // Eight rows, each filled field by field with extreme bytes.
    std::vector<std::byte> rows(8 * n_blocks * c.block_bytes);
    const uint8_t code_fills[8] = {0xFF, 0x00, 0xFF, 0x00, 0xFF, 0x00, 0xAA, 0x55};
    const uint8_t scale_fills[8] = {0xFF, 0xFF, 0x80, 0x80, 0x7F, 0x3F, 0xFF, 0x80};
    for (int r = 0; r < 8; ++r) {
      for (int64_t b = 0; b < n_blocks; ++b) {
        std::byte* block = rows.data() + (r * n_blocks + b) * c.block_bytes;
        std::memset(block, code_fills[r], c.block_bytes);
        if (c.type == GgmlType::Q4_K) {
          std::memset(block + 4, scale_fills[r], 12);
        } else {
          std::memset(block + 192, scale_fills[r], 16);
        }
      }
    }
    set_half(c, rows, c.halves[0], 1.5f);
    if (c.halves.size() > 1) set_half(c, rows, c.halves[1], 0.5f);
    const WeightView w = view_of(c, rows, 8, n_blocks);
    const std::vector<std::byte> packed = packed_copy(w);
    for (size_t x = 0; x < acts.size(); ++x) {
      float scalar_out[32];
      scalar::packed_kquant_dot(c.layout)(packed.data(), acts[x].data(), 0, 4, n_blocks,
                                          scalar_out);
      float best_out[32];
      packed_kquant_dot(c.layout)(packed.data(), acts[x].data(), 0, 4, n_blocks, best_out);
      // The pair kernel, given the group twice in a row (a 16-row matrix).
      float pair_out[64];
      std::copy(std::begin(best_out), std::end(best_out), std::begin(pair_out));
      std::copy(std::begin(best_out), std::end(best_out), std::begin(pair_out) + 32);
      if (const PackedKDot pair = packed_kquant_dot_pair(c.layout)) {
        std::vector<std::byte> twice(packed);
        twice.insert(twice.end(), packed.begin(), packed.end());
        pair(twice.data(), acts[x].data(), 0, 4, n_blocks, pair_out);
      }
      for (int r = 0; r < 8; ++r) {
        float acc = 0.0f;
        for (int64_t b = 0; b < n_blocks; ++b) {
          const Q8BlockK& xb = acts[x][static_cast<size_t>(b)];
          const IntegerParts p = integer_parts(c, w.row(r).data() + b * c.block_bytes, xb);
          ASSERT_LT(std::abs(p.isum), int64_t{1} << 31);
          acc = std::fma(xb.d * 1.5f, static_cast<float>(p.isum), acc);
          if (c.halves.size() > 1) acc = std::fma(-(xb.d * 0.5f), static_cast<float>(p.imin), acc);
        }
        for (int i = 0; i < 4; ++i) {
          EXPECT_EQ(bits_of(scalar_out[i * 8 + r]), bits_of(acc))
              << name_of(c) << " scalar row " << r << " activations " << x;
          EXPECT_EQ(bits_of(best_out[i * 8 + r]), bits_of(acc))
              << name_of(c) << " simd row " << r << " activations " << x << ": "
              << best_out[i * 8 + r] << " vs " << acc;
          for (int g = 0; g < 2; ++g) {
            EXPECT_EQ(bits_of(pair_out[i * 16 + 8 * g + r]), bits_of(acc))
                << name_of(c) << " pair row " << 8 * g + r << " activations " << x;
          }
        }
      }
    }
  }
}

// matmul over a packed matrix: equal to the same matrix unpacked, and a
// row's outputs are the same bits alone or in a batch of 37 on 1 or 2
// threads.
TEST(KernelKQuantPacked, MatmulPackedIsBatchInvariantAndEqualsUnpacked) {
  ThreadPool one(1), two(2), seven(7);
  for (const Case& c : kCases) {
    for (const bool random : {false, true}) {
      for (const int64_t n_rows : {40, 48}) {  // 5 groups; 6 (pairs at AVX-512)
        const int64_t n_blocks = 2, n_cols = 256 * n_blocks, n_batch = 37;
        const std::vector<std::byte> rows = make_rows(c, n_rows, n_blocks, 21, random);
        WeightView unpacked = view_of(c, rows, n_rows, n_blocks);
        const std::vector<std::byte> packed = packed_copy(unpacked);
        WeightView w = unpacked;
        w.packed = packed.data();
        const std::vector<float> x = normal_values(2, static_cast<size_t>(n_batch * n_cols));
        MatmulScratch scratch;
        std::vector<float> batch(static_cast<size_t>(n_batch * n_rows));
        std::vector<float> plain(batch.size());
        matmul(w, x, n_batch, batch, n_rows, two, scratch);
        matmul(unpacked, x, n_batch, plain, n_rows, one, scratch);
        std::vector<float> crowded(batch.size());  // more threads than cores
        matmul(w, x, n_batch, crowded, n_rows, seven, scratch);
        ASSERT_EQ(std::memcmp(crowded.data(), batch.data(), batch.size() * sizeof(float)), 0)
            << name_of(c) << " on 7 threads";
        ASSERT_EQ(std::memcmp(batch.data(), plain.data(), batch.size() * sizeof(float)), 0)
            << name_of(c);
        for (int64_t r = 0; r < n_batch; ++r) {
          std::vector<float> alone(static_cast<size_t>(n_rows));
          matmul(w, std::span(x).subspan(static_cast<size_t>(r * n_cols), n_cols), 1, alone, n_rows,
                 r % 2 ? one : two, scratch);
          ASSERT_EQ(
              std::memcmp(alone.data(), batch.data() + r * n_rows, alone.size() * sizeof(float)), 0)
              << name_of(c) << " row " << r;
        }
      }
    }
  }
}

// A store packs Q4_K / Q6_K matrices with 8k rows and leaves others alone.
TEST(KernelKQuantPacked, StorePacksKMatrices) {
  for (const Case& c : kCases) {
    const std::vector<std::byte> rows = make_rows(c, 16, 1, 3, false);
    PackedWeightStore store;
    const WeightView w = store.pack(view_of(c, rows, 16, 1));
    ASSERT_NE(w.packed, nullptr);
    EXPECT_EQ(store.bytes(), rows.size());
    EXPECT_TRUE(store.holds(rows.data()));
    const WeightView odd = store.pack(view_of(c, rows, 12, 1));
    EXPECT_EQ(odd.packed, nullptr);
  }
}

}  // namespace
}  // namespace cortiq::kernels
