// attention_row against a naive double-precision attention, with grouped
// KV heads, scattered cache cells, padded rows and an f16 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
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
  const AttentionLoops& v = avx2::kAttentionLoops;
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
    const HeadRows rows{values.bytes.data(), values.row_bytes, cells.data(), 16 * (f16 ? 2u : 4u)};
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

}  // namespace
}  // namespace cortiq::kernels
