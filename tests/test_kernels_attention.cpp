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

// The AVX2 inner loops give the scalar loops' bits: the dots of one cache
// row with several queries (plain and, for fp16 operands, fused), the
// weighted sums of value rows (f32 and f16, head sizes with and without a
// 32-wide part), and the exponentials with their sum (including the
// overflow and underflow ranges of exp_approx and a short last group).
TEST(KernelAttention, SimdLoopsMatchScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const AttentionLoops& s = scalar::kAttentionLoops;
  const AttentionLoops& v = avx2::kAttentionLoops;
  std::vector<float> x = normal_values(2, 128, 2.0);
  std::vector<float> queries = normal_values(4, 3 * 128, 2.0);
  for (const bool halves : {false, true}) {
    if (halves) {
      for (float& f : x) f = fp16_to_fp32(fp32_to_fp16(f));
      for (float& f : queries) f = fp16_to_fp32(fp32_to_fp16(f));
    }
    for (const int64_t n : {16, 64, 128}) {
      float ds[3 * 5], dv[3 * 5];
      (halves ? s.dot_rows_f16 : s.dot_rows)(x.data(), queries.data(), 3, n, 0.125f, ds, 5);
      (halves ? v.dot_rows_f16 : v.dot_rows)(x.data(), queries.data(), 3, n, 0.125f, dv, 5);
      for (int u = 0; u < 3; ++u) {
        EXPECT_EQ(std::bit_cast<uint32_t>(ds[u * 5]), std::bit_cast<uint32_t>(dv[u * 5])) << n;
        EXPECT_EQ(
            std::bit_cast<uint32_t>(ds[u * 5]),
            std::bit_cast<uint32_t>(scalar::dot_f32(queries.data() + u * n, x.data(), n) * 0.125f));
      }
    }
  }
  // Value rows in scattered cells, at an offset inside the row.
  const int64_t n_pos = 9, row_elems = 200;
  for (const bool f16 : {false, true}) {
    const Cache values(7, n_pos, row_elems, f16);
    const std::vector<int32_t> cells = {4, 0, 8, 2, 6, 1, 7, 3, 5};
    std::vector<float> probs = normal_values(8, n_pos);
    for (float& p : probs) p = fp16_to_fp32(fp32_to_fp16(p));
    const size_t offset = 16 * (f16 ? 2 : 4);
    for (const int64_t n : {8, 40, 128}) {
      std::vector<float> ws(static_cast<size_t>(n), 5.0f), wv(ws);
      (f16 ? s.weighted_f16 : s.weighted_f32)(probs.data(), n_pos, values.bytes.data(),
                                              values.row_bytes, cells.data(), offset, ws.data(), n);
      (f16 ? v.weighted_f16 : v.weighted_f32)(probs.data(), n_pos, values.bytes.data(),
                                              values.row_bytes, cells.data(), offset, wv.data(), n);
      EXPECT_EQ(ws, wv) << (f16 ? "f16 " : "f32 ") << n;
      float expected0 = 0.0f;
      for (int64_t p = 0; p < n_pos; ++p)
        expected0 += probs[p] * values.at(cells[p], row_elems, 16);
      EXPECT_EQ(ws[0], expected0);
    }
  }
  std::vector<float> scores = normal_values(3, 77, 40.0);
  scores[5] = -200.0f;  // 2^n below the exponent range: 0
  scores[9] = 150.0f;   // far above the max below: saturates in exp(s - max)
  scores[13] = -130.0f;
  for (const int64_t n : {1, 7, 8, 23, 77}) {
    std::vector<float> a(scores.begin(), scores.begin() + n), b = a;
    const float max = 60.0f;
    const double sa = s.exp_sum(a.data(), n, max);
    const double sb = v.exp_sum(b.data(), n, max);
    EXPECT_EQ(std::bit_cast<uint64_t>(sa), std::bit_cast<uint64_t>(sb)) << n;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << n << " " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]),
                std::bit_cast<uint32_t>(exp_approx(scores[i] - max)));
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
