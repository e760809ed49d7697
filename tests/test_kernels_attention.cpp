// attention_row against a naive double-precision attention, with grouped
// KV heads, scattered cache cells, padded rows and an f16 cache; then the
// variants of the model families (windows with a first position per row,
// the logit softcap, sinks, ALiBi): against a double-precision reference,
// AVX2 against scalar bit for bit, rows together against rows alone, and no
// read of the cache cells below the first position of every row.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_simd.hpp"
#include "kernels/cpu/matmul.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

// A cache of n_cells rows of n_head_kv * head_dim elements, each row padded
// by 16 bytes so that row_bytes, not the element count, steps the rows.
struct Cache {
  std::vector<float> values;  // the exact values stored, f32 or rounded to f16
  std::vector<std::byte> bytes;
  size_t row_bytes = 0;

  Cache(uint64_t seed, int64_t n_cells, int64_t row_elems, bool f16) {
    values = normal_values(seed, static_cast<size_t>(n_cells * row_elems));
    const size_t element = f16 ? 2 : 4;
    row_bytes = static_cast<size_t>(row_elems) * element + 16;
    bytes.resize(row_bytes * static_cast<size_t>(n_cells));
    for (int64_t c = 0; c < n_cells; ++c) {
      for (int64_t i = 0; i < row_elems; ++i) {
        float& v = values[c * row_elems + i];
        std::byte* at = bytes.data() + c * row_bytes + i * element;
        if (f16) {
          const uint16_t h = fp32_to_fp16(v);
          v = fp16_to_fp32(h);
          std::memcpy(at, &h, 2);
        } else {
          std::memcpy(at, &v, 4);
        }
      }
    }
  }
  float at(int32_t cell, int64_t row_elems, int64_t i) const {
    return values[cell * row_elems + i];
  }
};

// Double-precision attention; with round_q the query is rounded to f16 as
// the f16 path does (the probabilities are left exact).
std::vector<double> naive_attention(const std::vector<float>& q, const Cache& k, const Cache& v,
                                    const std::vector<int32_t>& cells, int64_t n_kv,
                                    const AttentionShape& s, bool round_q) {
  std::vector<double> out(static_cast<size_t>(s.n_head * s.head_dim_v), 0.0);
  const int64_t group = s.n_head / s.n_head_kv;
  for (int64_t h = 0; h < s.n_head; ++h) {
    const int64_t kh = h / group;
    std::vector<double> scores(static_cast<size_t>(n_kv));
    for (int64_t p = 0; p < n_kv; ++p) {
      double dot = 0;
      for (int64_t d = 0; d < s.head_dim_k; ++d) {
        const float qd = q[h * s.head_dim_k + d];
        const double qv = round_q ? fp16_to_fp32(fp32_to_fp16(qd)) : qd;
        dot += qv * k.at(cells[p], s.n_head_kv * s.head_dim_k, kh * s.head_dim_k + d);
      }
      scores[p] = dot * s.scale;
    }
    const double max = *std::max_element(scores.begin(), scores.end());
    double sum = 0;
    for (double& x : scores) sum += (x = std::exp(x - max));
    for (int64_t p = 0; p < n_kv; ++p) {
      for (int64_t d = 0; d < s.head_dim_v; ++d) {
        out[h * s.head_dim_v + d] +=
            scores[p] / sum * v.at(cells[p], s.n_head_kv * s.head_dim_v, kh * s.head_dim_v + d);
      }
    }
  }
  return out;
}

void check_attention(bool f16, int64_t n_head, int64_t n_head_kv, double tolerance) {
  const AttentionShape shape{n_head, n_head_kv, 32, 24, 1.0f / std::sqrt(32.0f)};
  const int64_t n_cells = 12, n_kv = 9;
  const Cache k(1, n_cells, n_head_kv * shape.head_dim_k, f16);
  const Cache v(2, n_cells, n_head_kv * shape.head_dim_v, f16);
  // Positions live in scattered cells; the last cells are never read.
  const std::vector<int32_t> cells = {7, 2, 0, 11, 5, 1, 9, 3, 4, 6, 8, 10};
  // Large enough queries that the softmax is far from uniform.
  const std::vector<float> q =
      normal_values(3, static_cast<size_t>(n_head * shape.head_dim_k), 2.0);
  const KvRowsView keys{k.bytes.data(), k.row_bytes, f16, cells};
  const KvRowsView values{v.bytes.data(), v.row_bytes, f16, cells};
  std::vector<float> out(static_cast<size_t>(n_head * shape.head_dim_v), 99.0f);
  std::vector<float> scratch(attention_scratch_floats(shape, 1, n_kv));
  attention_row(q, keys, values, n_kv, shape, out, scratch);
  const std::vector<double> expected = naive_attention(q, k, v, cells, n_kv, shape, f16);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], expected[i], tolerance)
        << "f16 " << f16 << " heads " << n_head << "/" << n_head_kv << " element " << i;
  }
}

TEST(KernelAttention, MatchesNaiveF32) {
  check_attention(false, 4, 4, 2e-6);
}
TEST(KernelAttention, MatchesNaiveGroupedHeads) {
  check_attention(false, 6, 2, 2e-6);
  check_attention(false, 4, 1, 2e-6);
}
// With an f16 cache the probabilities are rounded to f16 (relative 2^-11)
// before the V sum, so agreement is to about 1e-3 of |v|.
TEST(KernelAttention, MatchesNaiveF16Cache) {
  check_attention(true, 6, 3, 2e-3);
}

// The f16 path rounds the query: a query that f16 cannot hold exactly gives
// the same result as its rounded copy.
TEST(KernelAttention, F16CacheRoundsTheQuery) {
  const AttentionShape shape{2, 1, 16, 16, 0.25f};
  const Cache k(5, 4, 16, true), v(6, 4, 16, true);
  const std::vector<int32_t> cells = {0, 1, 2, 3};
  const KvRowsView keys{k.bytes.data(), k.row_bytes, true, cells};
  const KvRowsView values{v.bytes.data(), v.row_bytes, true, cells};
  std::vector<float> q = normal_values(7, 32);
  for (float& x : q) x += 1e-5f;
  std::vector<float> rounded = q;
  for (float& x : rounded) x = fp16_to_fp32(fp32_to_fp16(x));
  std::vector<float> a(32), b(32), scratch(attention_scratch_floats(shape, 1, 4));
  attention_row(q, keys, values, 4, shape, a, scratch);
  attention_row(rounded, keys, values, 4, shape, b, scratch);
  EXPECT_EQ(a, b);
}

// One position: the output is that position's value row, exactly.
TEST(KernelAttention, SinglePositionReturnsItsValues) {
  const AttentionShape shape{2, 2, 8, 8, 0.35f};
  const Cache k(8, 3, 16, false), v(9, 3, 16, false);
  const std::vector<int32_t> cells = {2};
  const KvRowsView keys{k.bytes.data(), k.row_bytes, false, cells};
  const KvRowsView values{v.bytes.data(), v.row_bytes, false, cells};
  const std::vector<float> q = normal_values(10, 16);
  std::vector<float> out(16), scratch(attention_scratch_floats(shape, 1, 1));
  attention_row(q, keys, values, 1, shape, out, scratch);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], v.at(2, 16, i)) << i;
}

// The SIMD levels' loops this CPU runs (AVX2, and AVX-512's where it has
// them).
std::vector<const AttentionLoops*> simd_loops() {
  std::vector<const AttentionLoops*> out;
  if (cpu_features().avx2) out.push_back(&attention_loops_of(SimdLevel::avx2));
  if (simd_level() >= SimdLevel::avx512) out.push_back(&attention_loops_of(SimdLevel::avx512));
  return out;
}

// The AVX2 inner loops give the scalar loops' bits: key tiles transposed
// (f32 and f16 rows, full and short tiles), tiles of scores (plain and, for
// fp16 operands, fused; query blocks of 4 and the 1..3 left over), the
// weighted sums of value rows (f32 and f16, one to four heads of different
// lengths, head sizes with and without a whole register block), and the
// exponentials with their sum (including the overflow and underflow ranges
// of exp_approx and a short last group).
TEST(KernelAttention, SimdLoopsMatchScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const AttentionLoops& s = scalar::kAttentionLoops;
  for (const AttentionLoops* level : simd_loops()) {
    const AttentionLoops& v = *level;
    auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    // Key rows in scattered cells, at an offset inside the row.
    const int64_t n_cells = 16, row_elems = 160;
    const std::vector<int32_t> cells = {9, 4, 0, 15, 8, 2, 6, 1, 13, 7, 3, 11, 5, 10, 14, 12};
    for (const bool f16 : {false, true}) {
      const Cache keys(1, n_cells, row_elems, f16);
      const HeadRows rows{keys.bytes.data(), keys.row_bytes, cells.data(), 16 * (f16 ? 2u : 4u)};
      for (const int64_t dim : {8, 64, 128}) {
        for (const int64_t n : {1, 7, 8, 16}) {
          std::vector<float> ks(static_cast<size_t>(dim * kKeyTile), 5.0f), kv(ks);
          (f16 ? s.transpose_keys_f16 : s.transpose_keys_f32)(rows, n, dim, ks.data());
          (f16 ? v.transpose_keys_f16 : v.transpose_keys_f32)(rows, n, dim, kv.data());
          EXPECT_TRUE(same_bits(ks, kv)) << f16 << " " << dim << " " << n;
          EXPECT_EQ(ks[3 * kKeyTile + 0], keys.at(cells[0], row_elems, 16 + 3));
          EXPECT_EQ(ks[5 * kKeyTile + n - 1], keys.at(cells[n - 1], row_elems, 16 + 5));
          if (n < kKeyTile) {
            EXPECT_EQ(ks[kKeyTile + n], 0.0f);
          }
        }
      }
    }
    for (const bool halves : {false, true}) {
      std::vector<float> kt = normal_values(2, 128 * kKeyTile, 2.0);
      std::vector<float> queries = normal_values(4, 9 * 128, 2.0);
      if (halves) {
        for (float& f : kt) f = fp16_to_fp32(fp32_to_fp16(f));
        for (float& f : queries) f = fp16_to_fp32(fp32_to_fp16(f));
      }
      for (const int64_t dim : {8, 64, 128}) {
        for (const int64_t n_q : {1, 2, 3, 4, 5, 9}) {
          const int64_t stride = 21;
          std::vector<float> ss(static_cast<size_t>(n_q * stride), 3.0f), sv(ss);
          (halves ? s.score_tile_f16 : s.score_tile)(kt.data(), queries.data(), n_q, dim, 0.125f,
                                                     ss.data(), stride);
          (halves ? v.score_tile_f16 : v.score_tile)(kt.data(), queries.data(), n_q, dim, 0.125f,
                                                     sv.data(), stride);
          EXPECT_TRUE(same_bits(ss, sv)) << halves << " " << dim << " " << n_q;
          // Query n_q - 1, position 11: one chain over d.
          float chain = 0.0f;
          for (int64_t d = 0; d < dim; ++d)
            chain += queries[(n_q - 1) * dim + d] * kt[d * kKeyTile + 11];
          EXPECT_EQ(ss[(n_q - 1) * stride + 11], chain * 0.125f);
        }
      }
    }
    // Value rows in scattered cells; heads of different lengths, in any order.
    const int64_t n_pos_max = 16;
    for (const bool f16 : {false, true}) {
      const Cache values(7, n_cells, row_elems, f16);
      const HeadRows rows{values.bytes.data(), values.row_bytes, cells.data(),
                          16 * (f16 ? 2u : 4u)};
      std::vector<float> probs = normal_values(8, 4 * n_pos_max);
      for (float& p : probs) p = fp16_to_fp32(fp32_to_fp16(p));
      const std::vector<std::vector<int64_t>> lengths = {
          {9}, {16, 3}, {5, 5, 0}, {7, 16, 2, 7}, {1, 2, 3, 4}, {16, 16, 16, 16}};
      for (const auto& n_pos : lengths) {
        const int n_units = static_cast<int>(n_pos.size());
        for (const int64_t n : {8, 40, 128}) {
          std::vector<float> ws(static_cast<size_t>(4 * n), 5.0f), wv(ws);
          const float* a[4];
          float* os[4];
          float* ov[4];
          for (int u = 0; u < n_units; ++u) {
            a[u] = probs.data() + u * n_pos_max;
            os[u] = ws.data() + u * n;
            ov[u] = wv.data() + u * n;
          }
          (f16 ? s.weighted_f16 : s.weighted_f32)(a, n_pos.data(), n_units, rows, os, n);
          (f16 ? v.weighted_f16 : v.weighted_f32)(a, n_pos.data(), n_units, rows, ov, n);
          EXPECT_TRUE(same_bits(ws, wv)) << (f16 ? "f16 " : "f32 ") << n_units << " " << n;
          const int last = n_units - 1;
          float expected0 = 0.0f;
          for (int64_t p = 0; p < n_pos[last]; ++p)
            expected0 += a[last][p] * values.at(cells[p], row_elems, 16);
          EXPECT_EQ(ws[last * n], expected0);
        }
      }
    }
    // Softmax: ordinary scores, and scores whose exponentials underflow to 0
    // (exp_approx's lower range) beside one that dominates.
    std::vector<float> ordinary = normal_values(3, 77, 4.0);
    std::vector<float> extreme = normal_values(5, 77, 40.0);
    extreme[5] = -200.0f;
    extreme[9] = 150.0f;
    extreme[13] = -130.0f;
    for (const auto* scores : {&ordinary, &extreme}) {
      for (const bool round : {false, true}) {
        for (const int64_t n : {1, 7, 8, 23, 77}) {
          std::vector<float> a(scores->begin(), scores->begin() + n), b = a;
          s.softmax(a.data(), n, round);
          v.softmax(b.data(), n, round);
          EXPECT_TRUE(same_bits(a, b)) << n << " " << round;
          // The scalar loop is the documented formula.
          const float max = *std::max_element(scores->begin(), scores->begin() + n);
          std::vector<float> e(static_cast<size_t>(n));
          double sum = 0.0;
          for (int64_t i = 0; i < n; i += 8) {
            float g[8] = {};
            for (int64_t j = 0; j < 8 && i + j < n; ++j)
              g[j] = e[i + j] = exp_approx((*scores)[i + j] - max);
            sum += static_cast<double>(((g[0] + g[4]) + (g[2] + g[6])) +
                                       ((g[1] + g[5]) + (g[3] + g[7])));
          }
          const auto inv = static_cast<float>(1.0 / sum);
          for (int64_t i = 0; i < n; ++i) {
            const float p = e[i] * inv;
            ASSERT_EQ(a[i], round ? fp16_to_fp32(fp32_to_fp16(p)) : p) << n << " " << i;
          }
        }
      }
    }
  }
}

// A whole attention row with a head size the SIMD loops take: the same bits
// at the scalar level and at AVX2.
TEST(KernelAttention, RowIsTheSameAtEverySimdLevel) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const bool f16 : {false, true}) {
    const AttentionShape shape{4, 2, 64, 64, 0.125f};
    const int64_t n_kv = 37;
    const Cache k(11, n_kv, 2 * 64, f16), v(12, n_kv, 2 * 64, f16);
    std::vector<int32_t> cells(static_cast<size_t>(n_kv));
    for (int32_t i = 0; i < n_kv; ++i) cells[static_cast<size_t>(i)] = (i * 7) % n_kv;
    const KvRowsView keys{k.bytes.data(), k.row_bytes, f16, cells};
    const KvRowsView values{v.bytes.data(), v.row_bytes, f16, cells};
    const std::vector<float> q = normal_values(13, 4 * 64, 2.0);
    std::vector<float> scratch(attention_scratch_floats(shape, 1, n_kv));
    std::vector<float> simd(4 * 64), plain(4 * 64);
    const SimdLevel level = simd_level();
    attention_row(q, keys, values, n_kv, shape, simd, scratch);
    set_simd_level(SimdLevel::scalar);
    attention_row(q, keys, values, n_kv, shape, plain, scratch);
    set_simd_level(level);
    EXPECT_EQ(simd, plain) << (f16 ? "f16" : "f32");
  }
}

// Rows computed together (different lengths, GQA groups of 3) give each
// row's bits computed alone.
TEST(KernelAttention, RowsTogetherEqualRowsAlone) {
  for (const bool f16 : {false, true}) {
    const AttentionShape shape{6, 2, 32, 16, 0.2f};
    const int64_t n_cells = 20;
    const Cache k(21, n_cells, 2 * 32, f16), v(22, n_cells, 2 * 16, f16);
    std::vector<int32_t> cells(static_cast<size_t>(n_cells));
    for (int32_t i = 0; i < n_cells; ++i) cells[static_cast<size_t>(i)] = (i * 3) % n_cells;
    const KvRowsView keys{k.bytes.data(), k.row_bytes, f16, cells};
    const KvRowsView values{v.bytes.data(), v.row_bytes, f16, cells};
    const std::vector<int64_t> n_kv = {17, 20, 0, 5};
    const std::vector<float> q = normal_values(23, 4 * 6 * 32, 2.0);
    std::vector<float> together(4 * 6 * 16, 9.0f);
    std::vector<float> scratch(attention_scratch_floats(shape, 4, 20));
    // Computed one KV head at a time, as threads split it.
    attention_rows(q, n_kv, keys, values, shape, together, scratch, 0, 1);
    attention_rows(q, n_kv, keys, values, shape, together, scratch, 1, 2);
    for (size_t r = 0; r < 4; ++r) {
      std::vector<float> alone(6 * 16, 7.0f);
      attention_row(std::span(q).subspan(r * 6 * 32, 6 * 32), keys, values, n_kv[r], shape, alone,
                    scratch);
      EXPECT_EQ(alone,
                std::vector<float>(together.begin() + r * 96, together.begin() + (r + 1) * 96))
          << (f16 ? "f16 " : "f32 ") << "row " << r;
    }
  }
}

// Bidirectional attention (encoders): every row of a sequence reads all of
// its positions, so rows at positions 0..7 all get n_kv = 37. The SIMD loops
// give the scalar loops' bits, and each row its bits computed alone.
TEST(KernelAttention, BidirectionalRowsMatchScalarBitForBit) {
  for (const bool f16 : {false, true}) {
    const AttentionShape shape{4, 2, 64, 64, 0.125f};
    const int64_t n_cells = 37, n_rows = 8;
    const Cache k(31, n_cells, 2 * 64, f16), v(32, n_cells, 2 * 64, f16);
    std::vector<int32_t> cells(static_cast<size_t>(n_cells));
    for (int32_t i = 0; i < n_cells; ++i) cells[static_cast<size_t>(i)] = (i * 5) % n_cells;
    const KvRowsView keys{k.bytes.data(), k.row_bytes, f16, cells};
    const KvRowsView values{v.bytes.data(), v.row_bytes, f16, cells};
    const std::vector<int64_t> n_kv(n_rows, n_cells);
    const std::vector<float> q = normal_values(33, n_rows * 4 * 64, 2.0);
    std::vector<float> scratch(attention_scratch_floats(shape, n_rows, n_cells));
    std::vector<float> simd(n_rows * 4 * 64), plain(n_rows * 4 * 64);
    const SimdLevel level = simd_level();
    attention_rows(q, n_kv, keys, values, shape, simd, scratch, 0, 2);
    set_simd_level(SimdLevel::scalar);
    attention_rows(q, n_kv, keys, values, shape, plain, scratch, 0, 2);
    set_simd_level(level);
    EXPECT_EQ(simd, plain) << (f16 ? "f16" : "f32");
    for (size_t r = 0; r < static_cast<size_t>(n_rows); ++r) {
      std::vector<float> alone(4 * 64);
      attention_row(std::span(q).subspan(r * 256, 256), keys, values, n_cells, shape, alone,
                    scratch);
      EXPECT_EQ(alone, std::vector<float>(simd.begin() + r * 256, simd.begin() + (r + 1) * 256))
          << (f16 ? "f16 " : "f32 ") << "row " << r;
    }
  }
}

// ---------------------------------------------------------------------------
// Variants: windows (kv_start), softcap, sinks, ALiBi.

struct Variant {
  const char* name;
  bool window = false;
  float softcap = 0.0f;
  float alibi_max_bias = 0.0f;
  bool sinks = false;
  float softcap_scale = 0.0f;  // 0: 1/softcap
};

const Variant kVariants[] = {
    {"plain"},
    {"window", true},
    {"softcap", false, 20.0f},
    {"sinks", false, 0.0f, 0.0f, true},
    {"alibi", false, 0.0f, 8.0f},
    {"all", true, 20.0f, 8.0f, true},
    {"grok softcap", false, 30.0f, 0.0f, false, 0.0884f / 30.0f},
};

struct HeadShape {
  int64_t n_head, n_head_kv, head_dim_k, head_dim_v;
};

// Head sizes the SIMD loops take and sizes they leave to the scalar ones;
// 6 and 5 query heads are not powers of two (ALiBi's second slope series).
const HeadShape kHeadShapes[] = {{6, 2, 64, 64}, {5, 1, 20, 12}};

// Rows of one tile: consecutive query positions 38..43 of one sequence
// with different first positions (not multiples of 16 or 8, one row
// without positions, one starting at 0), and the same rows as a sliding
// window of 13 positions (Gemma-style: starts 26..31).
const std::vector<int64_t> kTileEnds = {39, 40, 41, 42, 43, 44};
const std::vector<int64_t> kMixedStarts = {19, 3, 41, 29, 0, 33};
const std::vector<int64_t> kWindowStarts = {26, 27, 28, 29, 30, 31};
constexpr int64_t kCells = 48;

// Cache contents, query rows and sinks for one head shape.
struct VariantCase {
  HeadShape heads;
  bool f16;
  Cache k, v;
  std::vector<int32_t> cells;
  std::vector<float> q;  // kTileEnds.size() rows
  std::vector<float> sinks;

  VariantCase(const HeadShape& h, bool f16_cache)
      : heads(h),
        f16(f16_cache),
        k(31, kCells, h.n_head_kv * h.head_dim_k, f16_cache),
        v(32, kCells, h.n_head_kv * h.head_dim_v, f16_cache) {
    for (int32_t i = 0; i < kCells; ++i) cells.push_back((i * 7) % kCells);
    q = normal_values(33, kTileEnds.size() * static_cast<size_t>(h.n_head * h.head_dim_k), 2.0);
    sinks = normal_values(34, static_cast<size_t>(h.n_head), 2.0);
    sinks[1] = 6.0f;  // a sink that takes most of its head's mass
  }
  AttentionShape shape(const Variant& variant) const {
    AttentionShape s{heads.n_head, heads.n_head_kv, heads.head_dim_k, heads.head_dim_v,
                     1.0f / std::sqrt(static_cast<float>(heads.head_dim_k))};
    s.softcap = variant.softcap;
    s.softcap_scale = variant.softcap_scale;
    if (variant.softcap_scale != 0.0f) s.scale = 1.0f;  // Grok scales only inside the cap
    s.alibi_max_bias = variant.alibi_max_bias;
    if (variant.sinks) s.sinks = sinks;
    return s;
  }
  KvRowsView keys() const { return {k.bytes.data(), k.row_bytes, f16, cells}; }
  KvRowsView values() const { return {v.bytes.data(), v.row_bytes, f16, cells}; }
  size_t q_width() const { return static_cast<size_t>(heads.n_head * heads.head_dim_k); }
  size_t out_width() const { return static_cast<size_t>(heads.n_head * heads.head_dim_v); }
};

const std::vector<int64_t>& starts_of(const Variant& variant, bool mixed) {
  static const std::vector<int64_t> none;
  if (!variant.window) return none;
  return mixed ? kMixedStarts : kWindowStarts;
}

// Scratch for the rows' span, followed by a canary the kernel must not touch.
struct ScratchWithCanary {
  static constexpr size_t kCanary = 64;
  std::vector<float> floats;
  size_t size;
  ScratchWithCanary(const AttentionShape& shape, int64_t n_rows, int64_t positions)
      : size(attention_scratch_floats(shape, n_rows, positions)) {
    floats.assign(size + kCanary, 1234.5f);
  }
  std::span<float> span() { return std::span(floats).first(size); }
  bool canary_intact() const {
    return std::all_of(floats.begin() + static_cast<std::ptrdiff_t>(size), floats.end(),
                       [](float x) { return x == 1234.5f; });
  }
};

// The positions the rows span together: max end - min start of the rows
// with positions.
int64_t span_of(std::span<const int64_t> starts, std::span<const int64_t> ends) {
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (size_t r = 0; r < ends.size(); ++r) {
    const int64_t begin = starts.empty() ? 0 : starts[r];
    if (begin == ends[r]) continue;
    first = std::min(first, begin);
    last = std::max(last, ends[r]);
  }
  return last == 0 ? 0 : last - first;
}

// Every row of the tile computed together, one KV head per call (as the
// threads split them), in a scratch sized for the rows' span.
std::vector<float> rows_together(const VariantCase& c, const AttentionShape& shape,
                                 std::span<const int64_t> starts) {
  const auto n_rows = static_cast<int64_t>(kTileEnds.size());
  std::vector<float> out(kTileEnds.size() * c.out_width(), 77.0f);
  ScratchWithCanary scratch(shape, n_rows, span_of(starts, kTileEnds));
  for (int64_t kh = 0; kh < shape.n_head_kv; ++kh) {
    attention_rows(c.q, starts, kTileEnds, c.keys(), c.values(), shape, out, scratch.span(), kh,
                   kh + 1);
  }
  EXPECT_TRUE(scratch.canary_intact());
  return out;
}

// ALiBi's slope of head h in double: ggml's formula without its roundings.
double alibi_slope_reference(double max_bias, int64_t n_head, int64_t h) {
  int64_t n_head_log2 = 1;
  while (n_head_log2 * 2 <= n_head) n_head_log2 *= 2;
  const double m0 = std::pow(2.0, -max_bias / static_cast<double>(n_head_log2));
  const double m1 = std::pow(2.0, -max_bias / 2.0 / static_cast<double>(n_head_log2));
  return h < n_head_log2 ? std::pow(m0, static_cast<double>(h + 1))
                         : std::pow(m1, static_cast<double>(2 * (h - n_head_log2) + 1));
}

// One row in double precision over positions [begin, end): softcap, scale,
// ALiBi, softmax with the sink, value sum. The query is rounded to f16 for
// an f16 cache (the probabilities are left exact).
std::vector<double> reference_row(const VariantCase& c, const AttentionShape& s,
                                  std::span<const float> q, int64_t begin, int64_t end) {
  std::vector<double> out(c.out_width(), 0.0);
  if (begin == end) return out;
  const int64_t group = s.n_head / s.n_head_kv;
  for (int64_t h = 0; h < s.n_head; ++h) {
    const int64_t kh = h / group;
    std::vector<double> scores;
    for (int64_t p = begin; p < end; ++p) {
      double dot = 0;
      for (int64_t d = 0; d < s.head_dim_k; ++d) {
        const float qd = q[static_cast<size_t>(h * s.head_dim_k + d)];
        const double qv = c.f16 ? fp16_to_fp32(fp32_to_fp16(qd)) : qd;
        dot += qv * c.k.at(c.cells[p], s.n_head_kv * s.head_dim_k, kh * s.head_dim_k + d);
      }
      if (s.softcap > 0) {
        const double inside = s.softcap_scale != 0 ? s.softcap_scale : 1.0 / s.softcap;
        dot = std::tanh(dot * inside) * s.softcap;
      }
      double x = dot * s.scale;
      if (s.alibi_max_bias > 0) {
        x -=
            alibi_slope_reference(s.alibi_max_bias, s.n_head, h) * static_cast<double>(end - 1 - p);
      }
      scores.push_back(x);
    }
    double max = *std::max_element(scores.begin(), scores.end());
    const bool sink = !s.sinks.empty();
    if (sink) max = std::max(max, static_cast<double>(s.sinks[static_cast<size_t>(h)]));
    double sum = sink ? std::exp(s.sinks[static_cast<size_t>(h)] - max) : 0.0;
    for (double& x : scores) sum += (x = std::exp(x - max));
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t d = 0; d < s.head_dim_v; ++d) {
        out[static_cast<size_t>(h * s.head_dim_v + d)] +=
            scores[static_cast<size_t>(p - begin)] / sum *
            c.v.at(c.cells[p], s.n_head_kv * s.head_dim_v, kh * s.head_dim_v + d);
      }
    }
  }
  return out;
}

std::string describe(const Variant& variant, const VariantCase& c, bool mixed) {
  return std::string(variant.name) + (c.f16 ? " f16" : " f32") + " dk " +
         std::to_string(c.heads.head_dim_k) + (mixed ? " mixed starts" : " window");
}

// Every variant, f32 and f16 caches, both head shapes: each row of a tile
// computed together agrees with the double-precision reference. With an
// f16 cache the probabilities are rounded to f16 (relative 2^-11).
TEST(KernelAttentionVariants, MatchReference) {
  for (const HeadShape& heads : kHeadShapes) {
    for (const bool f16 : {false, true}) {
      const VariantCase c(heads, f16);
      for (const Variant& variant : kVariants) {
        for (const bool mixed : {false, true}) {
          if (mixed && !variant.window) continue;  // no starts to mix
          const AttentionShape shape = c.shape(variant);
          const auto& starts = starts_of(variant, mixed);
          const std::vector<float> out = rows_together(c, shape, starts);
          for (size_t r = 0; r < kTileEnds.size(); ++r) {
            const std::vector<double> expected =
                reference_row(c, shape, std::span(c.q).subspan(r * c.q_width(), c.q_width()),
                              starts.empty() ? 0 : starts[r], kTileEnds[r]);
            for (size_t i = 0; i < expected.size(); ++i) {
              ASSERT_NEAR(out[r * c.out_width() + i], expected[i], f16 ? 3e-3 : 2e-5)
                  << describe(variant, c, mixed) << " row " << r << " element " << i;
            }
          }
        }
      }
    }
  }
}

// The same bits at the scalar level and at AVX2, rows together and alone.
TEST(KernelAttentionVariants, SameBitsAtEverySimdLevel) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const SimdLevel level = simd_level();
  for (const HeadShape& heads : kHeadShapes) {
    for (const bool f16 : {false, true}) {
      const VariantCase c(heads, f16);
      for (const Variant& variant : kVariants) {
        for (const bool mixed : {false, true}) {
          if (mixed && !variant.window) continue;  // no starts to mix
          const AttentionShape shape = c.shape(variant);
          const auto& starts = starts_of(variant, mixed);
          set_simd_level(SimdLevel::avx2);
          const std::vector<float> simd = rows_together(c, shape, starts);
          set_simd_level(SimdLevel::scalar);
          const std::vector<float> plain = rows_together(c, shape, starts);
          set_simd_level(level);
          EXPECT_EQ(0, std::memcmp(simd.data(), plain.data(), simd.size() * sizeof(float)))
              << describe(variant, c, mixed);
        }
      }
    }
  }
}

// Rows with different first positions in one tile (and a row without
// positions) give each row's bits computed alone, at every SIMD level.
TEST(KernelAttentionVariants, RowsTogetherEqualRowsAlone) {
  const SimdLevel level = simd_level();
  std::vector<SimdLevel> levels = {SimdLevel::scalar};
  if (cpu_features().avx2) levels.push_back(SimdLevel::avx2);
  for (const SimdLevel at : levels) {
    set_simd_level(at);
    for (const HeadShape& heads : kHeadShapes) {
      for (const bool f16 : {false, true}) {
        const VariantCase c(heads, f16);
        for (const Variant& variant : kVariants) {
          for (const bool mixed : {false, true}) {
            if (mixed && !variant.window) continue;  // no starts to mix
            const AttentionShape shape = c.shape(variant);
            const auto& starts = starts_of(variant, mixed);
            const std::vector<float> together = rows_together(c, shape, starts);
            for (size_t r = 0; r < kTileEnds.size(); ++r) {
              const int64_t begin = starts.empty() ? 0 : starts[r];
              std::vector<float> alone(c.out_width(), 5.0f);
              ScratchWithCanary scratch(shape, 1, kTileEnds[r] - begin);
              attention_row(std::span(c.q).subspan(r * c.q_width(), c.q_width()), c.keys(),
                            c.values(), begin, kTileEnds[r], shape, alone, scratch.span());
              EXPECT_TRUE(scratch.canary_intact());
              EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + r * c.out_width(),
                                       alone.size() * sizeof(float)))
                  << describe(variant, c, mixed) << " " << simd_level_name(at) << " row " << r;
            }
          }
        }
      }
    }
  }
  set_simd_level(level);
}

// Without the new fields, and with every row starting at 0, the results are
// those of the plain overloads, bit for bit.
TEST(KernelAttentionVariants, DefaultsAreThePlainKernel) {
  const VariantCase c(kHeadShapes[0], false);
  const AttentionShape shape = c.shape(kVariants[0]);
  const std::vector<int64_t> zeros(kTileEnds.size(), 0);
  const std::vector<float> empty_starts = rows_together(c, shape, {});
  const std::vector<float> zero_starts = rows_together(c, shape, zeros);
  std::vector<float> plain(empty_starts.size());
  std::vector<float> scratch(attention_scratch_floats(shape, 6, 44));
  attention_rows(c.q, kTileEnds, c.keys(), c.values(), shape, plain, scratch, 0, 2);
  EXPECT_EQ(plain, empty_starts);
  EXPECT_EQ(plain, zero_starts);
}

// The cache releases the blocks below the first position of every row: the
// cells there point at a sentinel row of NaN, which must not reach any
// output (the outputs keep their bits and stay finite). The rows start at
// a sliding window's positions, or at mixed ones (none at 0).
TEST(KernelAttentionVariants, CellsBelowEveryStartAreNotUsed) {
  const std::vector<int64_t> mixed_from_five = {19, 5, 41, 29, 11, 33};
  for (const HeadShape& heads : kHeadShapes) {
    for (const bool f16 : {false, true}) {
      const VariantCase c(heads, f16);
      for (const Variant& variant : kVariants) {
        if (!variant.window) continue;
        for (const bool mixed : {false, true}) {
          const AttentionShape shape = c.shape(variant);
          const std::vector<int64_t>& starts = mixed ? mixed_from_five : kWindowStarts;
          const std::vector<float> clean = rows_together(c, shape, starts);
          // Position 0's cell (no other position uses it) becomes the
          // sentinel, and every position below the first start uses it.
          VariantCase poisoned(heads, f16);
          const int64_t first = *std::min_element(starts.begin(), starts.end());
          const int32_t sentinel = poisoned.cells[0];
          for (int64_t p = 0; p < first; ++p) poisoned.cells[static_cast<size_t>(p)] = sentinel;
          const float nan = std::numeric_limits<float>::quiet_NaN();
          const uint16_t half_nan = fp32_to_fp16(nan);
          for (Cache* cache : {&poisoned.k, &poisoned.v}) {
            const size_t element = f16 ? 2 : 4;
            const size_t elems = (cache->row_bytes - 16) / element;
            std::byte* row = cache->bytes.data() + static_cast<size_t>(sentinel) * cache->row_bytes;
            for (size_t i = 0; i < elems; ++i) {
              std::memcpy(row + i * element, f16 ? static_cast<const void*>(&half_nan) : &nan,
                          element);
            }
          }
          const std::vector<float> out = rows_together(poisoned, shape, starts);
          EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }))
              << describe(variant, c, mixed);
          EXPECT_EQ(0, std::memcmp(out.data(), clean.data(), out.size() * sizeof(float)))
              << describe(variant, c, mixed);
        }
      }
    }
  }
}

// A cache whose rows sit before an inaccessible page: a cell index past
// the rows points into that page, so reading it faults.
struct GuardedCache {
  std::byte* base = nullptr;
  size_t mapped = 0;
  int32_t guard_cell = 0;

  GuardedCache(const Cache& cache, int64_t n_cells) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data = (cache.bytes.size() + page - 1) / page * page;
    const size_t guard = (2 * cache.row_bytes + page - 1) / page * page + page;
    mapped = data + guard;
    void* at = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return;
    base = static_cast<std::byte*>(at);
    std::memcpy(base, cache.bytes.data(), cache.bytes.size());
    mprotect(base + data, guard, PROT_NONE);
    guard_cell = static_cast<int32_t>((data + cache.row_bytes - 1) / cache.row_bytes);
    EXPECT_GE(guard_cell, n_cells);
  }
  ~GuardedCache() {
    if (base != nullptr) munmap(base, mapped);
  }
  GuardedCache(const GuardedCache&) = delete;
  GuardedCache& operator=(const GuardedCache&) = delete;
};

// The cells below the first start point into an inaccessible page, so the
// kernel must never load them (keys or values): it runs without a fault.
// The same cells inside a row's range do fault, so the guard is real.
TEST(KernelAttentionVariants, NeverReadsBelowTheFirstStart) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const bool f16 : {false, true}) {
    const VariantCase c(kHeadShapes[0], f16);
    const GuardedCache keys_at(c.k, kCells), values_at(c.v, kCells);
    ASSERT_NE(keys_at.base, nullptr);
    ASSERT_NE(values_at.base, nullptr);
    ASSERT_EQ(keys_at.guard_cell, values_at.guard_cell) << "rows of the same size";
    const AttentionShape shape = c.shape(kVariants[5]);  // everything
    // The first start is 3; the positions below it point into the guard.
    const std::vector<int64_t> starts = {19, 3, 41, 29, 5, 33};
    std::vector<int32_t> cells = c.cells;
    for (int64_t p = 0; p < 3; ++p) cells[static_cast<size_t>(p)] = keys_at.guard_cell;
    const KvRowsView keys{keys_at.base, c.k.row_bytes, f16, cells};
    const KvRowsView values{values_at.base, c.v.row_bytes, f16, cells};
    auto run = [&](std::span<const int64_t> row_starts) {
      std::vector<float> out(kTileEnds.size() * c.out_width());
      std::vector<float> scratch(attention_scratch_floats(shape, 6, 44));
      attention_rows(c.q, row_starts, kTileEnds, keys, values, shape, out, scratch, 0,
                     shape.n_head_kv);
      return std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); });
    };
    EXPECT_EXIT(
        {
          bool finite = true;
          set_simd_level(SimdLevel::scalar);
          finite = run(starts) && finite;
          set_simd_level(SimdLevel::avx2);  // clamped to what the CPU has
          finite = run(starts) && finite;
          std::_Exit(finite ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "")
        << (f16 ? "f16" : "f32");
    const std::vector<int64_t> one_from_zero = {19, 3, 41, 29, 0, 33};
    EXPECT_DEATH(run(one_from_zero), "") << (f16 ? "f16" : "f32");
  }
}

// The documented numerics, bit for bit: value rows that are unit vectors
// make the outputs the probabilities themselves (each output's chain adds
// one product by 1 and zeros), which are computed here from the formulas
// of llama.cpp's graph (build_attn_mha: scale by 1/softcap, tanhf, scale by
// softcap) and ggml's soft_max_ext (scale, then the ALiBi mask as one FMA
// with slope = powf(m0, h + 1) or powf(m1, 2 (h - n_head_log2) + 1), the
// sink in the max and as expf(sink - max) in the double sum).
TEST(KernelAttentionVariants, ProbabilitiesFollowTheDocumentedFormulas) {
  constexpr int64_t n_head = 6, dim = 16, n_pos = 16, start = 3;
  AttentionShape shape{n_head, n_head, dim, dim, 0.3f};
  shape.softcap = 7.0f;
  shape.alibi_max_bias = 5.0f;  // slopes that are not powers of two
  const std::vector<float> sinks = normal_values(73, n_head);
  shape.sinks = sinks;
  const Cache k(71, n_pos, n_head * dim, false);
  std::vector<float> unit(static_cast<size_t>(n_pos * n_head * dim), 0.0f);
  for (int64_t p = 0; p < n_pos; ++p) {
    for (int64_t h = 0; h < n_head; ++h) unit[static_cast<size_t>((p * n_head + h) * dim + p)] = 1;
  }
  std::vector<int32_t> cells(n_pos);
  for (int32_t i = 0; i < n_pos; ++i) cells[static_cast<size_t>(i)] = i;
  const KvRowsView keys{k.bytes.data(), k.row_bytes, false, cells};
  const KvRowsView values{reinterpret_cast<const std::byte*>(unit.data()), n_head * dim * 4, false,
                          cells};
  const std::vector<float> q = normal_values(72, n_head * dim, 3.0);
  std::vector<float> out(n_head * dim), scratch(attention_scratch_floats(shape, 1, n_pos));
  attention_row(q, keys, values, start, n_pos, shape, out, scratch);
  // n_head_log2 = 4: m0 = 2^(-max_bias / 4), m1 = 2^(-max_bias / 2 / 4).
  const float m0 = powf(2.0f, -5.0f / 4.0f), m1 = powf(2.0f, -2.5f / 4.0f);
  int fused_differs = 0;  // scores where the FMA is not multiply-then-add
  for (int64_t h = 0; h < n_head; ++h) {
    const float slope =
        h < 4 ? powf(m0, static_cast<float>(h + 1)) : powf(m1, static_cast<float>(2 * (h - 4) + 1));
    float s[n_pos] = {};
    for (int64_t p = start; p < n_pos; ++p) {
      float dot = 0.0f;
      for (int64_t d = 0; d < dim; ++d) dot += q[h * dim + d] * k.at(p, n_head * dim, h * dim + d);
      const float capped = (tanhf(dot * (1.0f / shape.softcap)) * shape.softcap) * shape.scale;
      const auto mask = static_cast<float>(-(n_pos - 1 - p));
      s[p] = std::fma(slope, mask, capped);
      const float product = slope * mask;
      fused_differs += s[p] != capped + product;
    }
    float max = *std::max_element(s + start, s + n_pos);
    max = max > sinks[h] ? max : sinks[h];
    float e[n_pos] = {};  // lanes 0..2 stay 0: the positions before the window
    for (int64_t p = start; p < n_pos; ++p) e[p] = exp_approx(s[p] - max);
    double sum = 0.0;
    for (int64_t g = 0; g < n_pos; g += 8) {
      const float* v = e + g;
      sum += static_cast<double>(((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7])));
    }
    sum += static_cast<double>(expf(sinks[h] - max));
    const auto inv = static_cast<float>(1.0 / sum);
    for (int64_t p = 0; p < n_pos; ++p) {
      EXPECT_EQ(out[h * dim + p], p < start ? 0.0f : e[p] * inv) << "head " << h << " pos " << p;
    }
  }
  EXPECT_GT(fused_differs, 0) << "the case must tell the FMA from multiply-then-add";
}

// The loops' definitions of a window: softmax_window over a row's own
// scores is the plain softmax over scores from the group's start with -inf
// before the window (llama.cpp's mask), and weighted_range is the plain sum
// with probability 0 before the window; at every level, bit for bit, with
// and without a sink.
TEST(KernelAttentionVariants, WindowLoopsAreTheMaskedPlainLoops) {
  std::vector<const AttentionLoops*> levels = {&scalar::kAttentionLoops};
  for (const AttentionLoops* simd : simd_loops()) levels.push_back(simd);
  const std::vector<float> scores = normal_values(41, 80, 4.0);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_approx(-inf), 0.0f);
  for (const AttentionLoops* loops : levels) {
    for (const bool round : {false, true}) {
      for (const int64_t start : {0, 1, 5, 7, 8, 13, 21}) {
        for (const int64_t end : {start + 1, start + 3, start + 8, start + 11, int64_t{80}}) {
          if (end > 80 || end <= start) continue;
          const int64_t aligned = start - start % 8;
          std::vector<float> masked(scores.begin() + aligned, scores.begin() + end);
          for (int64_t p = aligned; p < start; ++p) masked[p - aligned] = -inf;
          loops->softmax(masked.data(), end - aligned, round);
          std::vector<float> window(scores.begin() + start, scores.begin() + end);
          loops->softmax_window(window.data(), end - start, start % 8, nullptr, round);
          EXPECT_EQ(0, std::memcmp(window.data(), masked.data() + (start - aligned),
                                   window.size() * sizeof(float)))
              << start << ".." << end << " round " << round;
          for (int64_t p = aligned; p < start; ++p) EXPECT_EQ(masked[p - aligned], 0.0f);
        }
      }
    }
  }
  // Values: probabilities 0 before the window add nothing.
  const int64_t n_cells = 16, row_elems = 40;
  const std::vector<int32_t> cells = {9, 4, 0, 15, 8, 2, 6, 1, 13, 7, 3, 11, 5, 10, 14, 12};
  for (const AttentionLoops* loops : levels) {
    for (const bool f16 : {false, true}) {
      const Cache values(43, n_cells, row_elems, f16);
      const HeadRows rows{values.bytes.data(), values.row_bytes, cells.data(), 0};
      std::vector<float> probs = normal_values(44, 16);
      for (float& p : probs) p = fp16_to_fp32(fp32_to_fp16(p));
      for (const int64_t begin : {0, 3, 9}) {
        std::vector<float> zeroed = probs;
        std::fill_n(zeroed.begin(), begin, 0.0f);
        const float* a[] = {probs.data()};
        const float* z[] = {zeroed.data()};
        const int64_t b[] = {begin}, e[] = {16};
        std::vector<float> ranged(row_elems), plain(row_elems);
        float* o1[] = {ranged.data()};
        float* o2[] = {plain.data()};
        (f16 ? loops->weighted_range_f16 : loops->weighted_range_f32)(a, b, e, 1, rows, o1,
                                                                      row_elems);
        (f16 ? loops->weighted_f16 : loops->weighted_f32)(z, e, 1, rows, o2, row_elems);
        EXPECT_EQ(0, std::memcmp(ranged.data(), plain.data(), ranged.size() * sizeof(float)))
            << "begin " << begin << " f16 " << f16;
      }
    }
  }
}

// The new AVX2 loops give the scalar loops' bits: softmax_window at every
// lead, short and long rows, with no sink, an ordinary sink and one that
// dominates (and one far below); weighted_range with heads whose ranges
// nest, overlap, touch, are disjoint or empty.
TEST(KernelAttentionVariants, SimdWindowLoopsMatchScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const AttentionLoops& s = scalar::kAttentionLoops;
  for (const AttentionLoops* level : simd_loops()) {
    const AttentionLoops& v = *level;
    const std::vector<float> scores = normal_values(51, 77, 4.0);
    for (const float* sink : {static_cast<const float*>(nullptr), &scores[3]}) {
      for (const float sink_value : {0.0f, 40.0f, -90.0f}) {
        const float shifted = sink == nullptr ? 0.0f : *sink + sink_value;
        const float* use = sink == nullptr ? nullptr : &shifted;
        for (const bool round : {false, true}) {
          for (int64_t lead = 0; lead < 8; ++lead) {
            for (const int64_t n : {1, 2, 7, 8, 9, 15, 16, 23, 77}) {
              std::vector<float> a(scores.begin(), scores.begin() + n), b = a;
              s.softmax_window(a.data(), n, lead, use, round);
              v.softmax_window(b.data(), n, lead, use, round);
              EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
                  << "lead " << lead << " n " << n << " round " << round;
            }
          }
        }
      }
    }
    // With a sink, the scalar loop is ggml's formula.
    {
      const int64_t n = 21, lead = 5;
      const float sink = 1.5f;
      std::vector<float> a(scores.begin(), scores.begin() + n);
      s.softmax_window(a.data(), n, lead, &sink, false);
      float max = *std::max_element(scores.begin(), scores.begin() + n);
      max = max > sink ? max : sink;
      double sum = 0.0;
      std::vector<float> e(static_cast<size_t>(n));
      for (int64_t i = -lead; i < n; i += 8) {
        float g[8] = {};
        for (int64_t j = 0; j < 8 && i + j < n; ++j) {
          if (i + j >= 0) g[j] = e[i + j] = exp_approx(scores[i + j] - max);
        }
        sum +=
            static_cast<double>(((g[0] + g[4]) + (g[2] + g[6])) + ((g[1] + g[5]) + (g[3] + g[7])));
      }
      sum += static_cast<double>(std::exp(sink - max));
      const auto inv = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], e[i] * inv) << i;
    }
    const int64_t n_cells = 24, row_elems = 136;
    std::vector<int32_t> cells;
    for (int32_t i = 0; i < n_cells; ++i) cells.push_back((i * 5) % n_cells);
    const std::vector<std::vector<std::pair<int64_t, int64_t>>> ranges = {
        {{3, 9}},
        {{0, 24}, {5, 17}},
        {{2, 10}, {6, 20}, {10, 12}},
        {{0, 4}, {8, 12}, {7, 7}, {1, 23}},
        {{5, 5}, {9, 9}},
        {{11, 24}, {13, 24}, {17, 24}, {23, 24}},
        {{0, 16}, {0, 16}, {4, 16}, {0, 9}}};
    for (const bool f16 : {false, true}) {
      const Cache values(52, n_cells, row_elems, f16);
      const HeadRows rows{values.bytes.data(), values.row_bytes, cells.data(), 8 * (f16 ? 2u : 4u)};
      std::vector<float> probs = normal_values(53, 4 * n_cells);
      for (float& p : probs) p = fp16_to_fp32(fp32_to_fp16(p));
      for (const auto& units : ranges) {
        const int n_units = static_cast<int>(units.size());
        for (const int64_t n : {8, 48, 128}) {
          std::vector<float> ws(static_cast<size_t>(4 * n), 5.0f), wv(ws);
          const float* a[4];
          float* os[4];
          float* ov[4];
          int64_t begin[4], end[4];
          for (int u = 0; u < n_units; ++u) {
            a[u] = probs.data() + u * n_cells;
            os[u] = ws.data() + u * n;
            ov[u] = wv.data() + u * n;
            begin[u] = units[u].first;
            end[u] = units[u].second;
          }
          (f16 ? s.weighted_range_f16 : s.weighted_range_f32)(a, begin, end, n_units, rows, os, n);
          (f16 ? v.weighted_range_f16 : v.weighted_range_f32)(a, begin, end, n_units, rows, ov, n);
          EXPECT_EQ(0, std::memcmp(ws.data(), wv.data(), ws.size() * sizeof(float)))
              << (f16 ? "f16 " : "f32 ") << n_units << " units, n " << n;
          // The last head's first output: one chain over its own positions.
          const int last = n_units - 1;
          float expected = 0.0f;
          for (int64_t p = begin[last]; p < end[last]; ++p)
            expected += a[last][p] * values.at(cells[p], row_elems, 8);
          EXPECT_EQ(ws[last * n], expected);
        }
      }
    }
  }
}

// A sliding window over a long sequence reads and computes only the window:
// the scratch for the window's span suffices, whatever the position.
TEST(KernelAttentionVariants, LongSequenceWindowNeedsOnlyTheWindowsScratch) {
  const AttentionShape shape{4, 2, 32, 32, 0.2f};
  const int64_t n_cells = 4096, window = 40;
  const Cache k(61, n_cells, 2 * 32, true), v(62, n_cells, 2 * 32, true);
  std::vector<int32_t> cells(static_cast<size_t>(n_cells));
  for (int32_t i = 0; i < n_cells; ++i) cells[static_cast<size_t>(i)] = (i * 11) % n_cells;
  const KvRowsView keys{k.bytes.data(), k.row_bytes, true, cells};
  const KvRowsView values{v.bytes.data(), v.row_bytes, true, cells};
  const std::vector<float> q = normal_values(63, 2 * 4 * 32, 2.0);
  const std::vector<int64_t> ends = {n_cells - 1, n_cells};
  const std::vector<int64_t> starts = {ends[0] - window, ends[1] - window};
  ScratchWithCanary scratch(shape, 2, window + 1);
  std::vector<float> out(2 * 4 * 32);
  attention_rows(q, starts, ends, keys, values, shape, out, scratch.span(), 0, 2);
  EXPECT_TRUE(scratch.canary_intact());
  EXPECT_LT(scratch.size, attention_scratch_floats(shape, 2, n_cells) / 10);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
  for (size_t r = 0; r < 2; ++r) {
    std::vector<float> alone(4 * 32);
    ScratchWithCanary own(shape, 1, window);
    attention_row(std::span(q).subspan(r * 128, 128), keys, values, starts[r], ends[r], shape,
                  alone, own.span());
    EXPECT_EQ(alone, std::vector<float>(out.begin() + r * 128, out.begin() + (r + 1) * 128));
  }
}

}  // namespace
}  // namespace cortiq::kernels
