// The reference matmul: every weight type against a double-precision dot of
// the dequantized weights with the rounded activations, the activation
// rounding itself, batch invariance, scratch reuse, get_rows and the errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/error.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dequantize_fast.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq::kernels {
namespace {

using test::normal_values;

// A weight matrix and the bytes it views.
struct Weights {
  std::vector<std::byte> bytes;
  WeightView view;
};

Weights make_weights(GgmlType type, int64_t n_rows, int64_t n_cols, uint64_t seed) {
  Weights w;
  const size_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(n_cols));
  w.bytes.resize(row_bytes * static_cast<size_t>(n_rows));
  if (type == GgmlType::IQ4_XS) {
    // No reference quantizer: random codes and scales are all valid blocks,
    // once each block scale (the first two bytes) is a sane fp16.
    SplitMix64 bits(seed);
    for (std::byte& b : w.bytes) b = static_cast<std::byte>(bits.next() & 0xff);
    for (size_t at = 0; at < w.bytes.size(); at += 136) {
      const uint16_t d = fp32_to_fp16(0.002f + 0.001f * static_cast<float>(at % 7));
      std::memcpy(w.bytes.data() + at, &d, sizeof(d));
    }
  } else {
    for (int64_t r = 0; r < n_rows; ++r) {
      const std::vector<float> row = normal_values(seed + static_cast<uint64_t>(r), n_cols, 0.05);
      quantize_row(type, row,
                   std::span(w.bytes).subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
    }
  }
  w.view = {type, n_rows, n_cols, row_bytes, w.bytes.data(), "blk.0.test.weight"};
  return w;
}

std::vector<float> dequantized_row(const WeightView& w, int64_t r) {
  std::vector<float> row(static_cast<size_t>(w.n_cols));
  dequantize_row(w.type, w.row(r), row);
  return row;
}

std::string name_of(GgmlType type) {
  return std::string(ggml_type_name(type));
}

// Q4_1/Q5_1 against Q8_1: the peer multiplies each weight block's min by the
// activation block's stored sum s = fp16(d * sum of codes), d = amax / 127
// unrounded, where the dequantized dot has fp16(d) * sum of codes.
double q8_1_min_terms(const WeightView& w, int64_t o, std::span<const float> x,
                      std::span<const float> rounded) {
  const size_t block_bytes = ggml_type_traits(w.type).block_bytes;
  double total = 0;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    const float d16 = fp16_to_fp32(fp32_to_fp16(d));
    double dequantized_sum = 0;
    for (size_t j = 0; j < 32; ++j) dequantized_sum += rounded[b * 32 + j];
    const float codes = d16 == 0 ? 0.0f : static_cast<float>(std::round(dequantized_sum / d16));
    const float s = fp16_to_fp32(fp32_to_fp16(d * codes));
    uint16_t m;  // the min follows the fp16 scale in both block layouts
    std::memcpy(&m, w.row(o).data() + b * block_bytes + 2, sizeof(m));
    total += static_cast<double>(fp16_to_fp32(m)) * (s - dequantized_sum);
  }
  return total;
}

const GgmlType kMatmulTypes[] = {
    GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,
    GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,   GgmlType::Q5_1,
    GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,   GgmlType::Q5_K,
    GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::MXFP4,
};

class KernelMatmulTypes : public testing::TestWithParam<GgmlType> {};

// matmul = dot(dequantize(W row), round_activations(x row)), up to the float
// rounding of a 512-term sum.
TEST_P(KernelMatmulTypes, MatchesDoubleDotOfDequantizedWeightsAndRoundedActivations) {
  const GgmlType type = GetParam();
  const int64_t n_rows = 24, n_cols = 512, n_x = 3, y_stride = n_rows + 5;
  const Weights w = make_weights(type, n_rows, n_cols, 100 + static_cast<uint64_t>(type));
  const std::vector<float> x = normal_values(7, n_x * n_cols);
  std::vector<float> rounded(x.size());
  round_activations(type, x, rounded);

  ThreadPool pool(2);
  MatmulScratch scratch;
  std::vector<float> y(static_cast<size_t>(n_x * y_stride), -7.0f);
  matmul(w.view, x, n_x, y, y_stride, pool, scratch);

  for (int64_t o = 0; o < n_rows; ++o) {
    const std::vector<float> wr = dequantized_row(w.view, o);
    for (int64_t r = 0; r < n_x; ++r) {
      double dot = 0, magnitude = 0;
      for (int64_t i = 0; i < n_cols; ++i) {
        const double p = static_cast<double>(wr[i]) * rounded[r * n_cols + i];
        dot += p;
        magnitude += std::fabs(p);
      }
      if (activation_type(type) == GgmlType::Q8_1) {
        dot += q8_1_min_terms(w.view, o, std::span(x).subspan(r * n_cols, n_cols),
                              std::span(rounded).subspan(r * n_cols, n_cols));
      }
      ASSERT_NEAR(y[r * y_stride + o], dot, 1e-5 * magnitude + 1e-30)
          << name_of(type) << " row " << r << " output " << o;
    }
  }
  // The padding between output rows is left alone.
  for (int64_t r = 0; r < n_x; ++r) {
    for (int64_t o = n_rows; o < y_stride; ++o) ASSERT_EQ(y[r * y_stride + o], -7.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(KernelMatmul, KernelMatmulTypes, testing::ValuesIn(kMatmulTypes),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return name_of(info.param);
                         });

TEST(KernelMatmul, ActivationTypesFollowTheVecDotTypes) {
  EXPECT_EQ(activation_type(GgmlType::F32), GgmlType::F32);
  EXPECT_EQ(activation_type(GgmlType::F16), GgmlType::F16);
  EXPECT_EQ(activation_type(GgmlType::BF16), GgmlType::BF16);
  for (const GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL, GgmlType::MXFP4}) {
    EXPECT_EQ(activation_type(t), GgmlType::Q8_0) << name_of(t);
  }
  EXPECT_EQ(activation_type(GgmlType::Q4_1), GgmlType::Q8_1);
  EXPECT_EQ(activation_type(GgmlType::Q5_1), GgmlType::Q8_1);
  for (const GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                           GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(activation_type(t), GgmlType::Q8_K) << name_of(t);
  }
  for (const GgmlType t : {GgmlType::I32, GgmlType::Q8_K, GgmlType::IQ2_XXS, GgmlType::F64}) {
    EXPECT_THROW(activation_type(t), Error) << name_of(t);
  }
}

// A row's outputs are bitwise the same alone or inside batches of 7 and 64,
// on one thread or two: the dot order depends on n_cols alone.
TEST(KernelMatmul, BatchInvariant) {
  ThreadPool one(1), two(2);
  for (const auto& [type, n_cols] :
       {std::pair{GgmlType::F32, int64_t{100}}, std::pair{GgmlType::F16, int64_t{96}},
        std::pair{GgmlType::Q4_0, int64_t{256}}, std::pair{GgmlType::Q4_K, int64_t{512}}}) {
    const int64_t n_rows = 37, n_batch = 64;
    const Weights w = make_weights(type, n_rows, n_cols, 5);
    const std::vector<float> x = normal_values(11, n_batch * n_cols);
    MatmulScratch scratch;
    std::vector<float> y64(static_cast<size_t>(n_batch * n_rows));
    matmul(w.view, x, n_batch, y64, n_rows, two, scratch);
    std::vector<float> y7(static_cast<size_t>(7 * n_rows));
    matmul(w.view, std::span(x).subspan(static_cast<size_t>(20 * n_cols)), 7, y7, n_rows, one,
           scratch);
    for (int64_t r = 0; r < n_batch; ++r) {
      const std::span<const float> row = std::span(x).subspan(r * n_cols, n_cols);
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<float> y1(static_cast<size_t>(n_rows));
        matmul(w.view, row, 1, y1, n_rows, *pool, scratch);
        ASSERT_EQ(std::memcmp(y1.data(), y64.data() + r * n_rows, y1.size() * sizeof(float)), 0)
            << name_of(type) << " row " << r << " alone vs in a batch of 64";
        if (r >= 20 && r < 27) {
          ASSERT_EQ(
              std::memcmp(y1.data(), y7.data() + (r - 20) * n_rows, y1.size() * sizeof(float)), 0)
              << name_of(type) << " row " << r << " alone vs in a batch of 7";
        }
      }
    }
  }
}

// Once sized, the scratch serves the same and smaller calls without
// allocating, and grows safely for a larger weight: the float path's
// buffers (F16), the Q4_1 block-sum corrections the integer path keeps in
// the same activations buffer, and the integer kernels' activation blocks
// (Q8_0).
TEST(KernelMatmul, ScratchIsReusedAndGrows) {
  ThreadPool pool(2);
  MatmulScratch scratch;
  const Weights big = make_weights(GgmlType::F16, 16, 256, 1);
  const Weights small = make_weights(GgmlType::Q4_1, 8, 256, 2);
  const Weights integer = make_weights(GgmlType::Q8_0, 16, 256, 1);
  const std::vector<float> x = normal_values(3, 4 * 512);
  std::vector<float> y(64);
  matmul(big.view, std::span(x).first(4 * 256), 4, y, 16, pool, scratch);
  matmul(integer.view, std::span(x).first(4 * 256), 4, y, 16, pool, scratch);
  ASSERT_EQ(scratch.weight_rows.size(), 2u);
  const float* activations = scratch.activations.data();
  const float* row0 = scratch.weight_rows[0].data();
  const float* row1 = scratch.weight_rows[1].data();
  const Q8Block32* blocks = scratch.q8_blocks.data();
  matmul(big.view, std::span(x).first(4 * 256), 4, y, 16, pool, scratch);
  matmul(small.view, std::span(x).first(2 * 256), 2, y, 8, pool, scratch);
  matmul(integer.view, std::span(x).first(2 * 256), 2, y, 16, pool, scratch);
  EXPECT_EQ(scratch.activations.data(), activations);
  EXPECT_EQ(scratch.weight_rows[0].data(), row0);
  EXPECT_EQ(scratch.weight_rows[1].data(), row1);
  EXPECT_EQ(scratch.q8_blocks.data(), blocks);

  for (const GgmlType type : {GgmlType::Q6_K, GgmlType::Q8_0}) {
    const Weights wide = make_weights(type, 5, 512, 4);
    std::vector<float> wide_y(20);
    matmul(wide.view, x, 4, wide_y, 5, pool, scratch);
    std::vector<float> fresh_y(20);
    MatmulScratch fresh;
    matmul(wide.view, x, 4, fresh_y, 5, pool, fresh);
    EXPECT_EQ(wide_y, fresh_y) << name_of(type);
  }
}

// Several matrices over one input: the same bits as separate calls, for
// sets sharing an activation format (Q8_0 blocks; Q8_K blocks), a packed
// matrix among them, and a mixed set that falls back to separate calls.
TEST(KernelMatmul, SharedInputEqualsSeparateCalls) {
  ThreadPool pool(2);
  const int64_t n_cols = 256;
  Weights packed_q4 = make_weights(GgmlType::Q4_0, 40, n_cols, 1);
  std::vector<std::byte> packed(packed_q4.bytes.size());
  pack_rows(packed_q4.view, packed, 0, 5);
  packed_q4.view.packed = packed.data();
  const Weights sets[][3] = {
      {packed_q4, make_weights(GgmlType::Q8_0, 16, n_cols, 2),
       make_weights(GgmlType::Q4_0, 13, n_cols, 3)},
      {make_weights(GgmlType::Q4_K, 24, n_cols, 4), make_weights(GgmlType::Q6_K, 8, n_cols, 5),
       make_weights(GgmlType::Q4_K, 3, n_cols, 6)},
      {make_weights(GgmlType::F16, 8, n_cols, 7), make_weights(GgmlType::Q4_0, 8, n_cols, 8),
       make_weights(GgmlType::Q6_K, 5, n_cols, 9)},
  };
  for (const auto& set : sets) {
    for (const int64_t n_rows_x : {1, 9}) {
      const std::vector<float> x = normal_values(10, static_cast<size_t>(n_rows_x * n_cols));
      MatmulScratch scratch;
      std::vector<std::vector<float>> shared(3), separate(3);
      std::vector<MatmulOutput> outputs;
      for (size_t i = 0; i < 3; ++i) {
        const WeightView& w = set[i].view;
        shared[i].assign(static_cast<size_t>(n_rows_x * w.n_rows), -1.0f);
        separate[i] = shared[i];
        outputs.push_back({&w, shared[i], w.n_rows});
        matmul(w, x, n_rows_x, separate[i], w.n_rows, pool, scratch);
      }
      matmul_shared_input(outputs, x, n_rows_x, pool, scratch);
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(
            std::memcmp(shared[i].data(), separate[i].data(), shared[i].size() * sizeof(float)), 0)
            << name_of(set[i].view.type) << " output " << i << ", " << n_rows_x << " rows";
      }
    }
  }
  const Weights narrow = make_weights(GgmlType::Q4_0, 8, 128, 1);
  const Weights wide = make_weights(GgmlType::Q4_0, 8, 256, 1);
  std::vector<float> y1(8), y2(8);
  const std::vector<float> x = normal_values(1, 256);
  MatmulScratch scratch;
  const MatmulOutput mismatched[] = {{&wide.view, y1, 8}, {&narrow.view, y2, 8}};
  EXPECT_THROW(matmul_shared_input(mismatched, x, 1, pool, scratch), Error);
}

// Several matrices, each over its own one-row input (a decode row's
// experts' down projections): the same bits as separate calls, for Q8_0
// blocks (a packed matrix and Q4_1's block-sum corrections among them), Q8_K
// blocks, and a mixed set that falls back to separate calls.
TEST(KernelMatmul, EachInputEqualsSeparateCalls) {
  ThreadPool pool(2);
  const int64_t n_cols = 256;
  Weights packed_q4 = make_weights(GgmlType::Q4_0, 40, n_cols, 11);
  std::vector<std::byte> packed(packed_q4.bytes.size());
  pack_rows(packed_q4.view, packed, 0, 5);
  packed_q4.view.packed = packed.data();
  const Weights sets[][3] = {
      {packed_q4, make_weights(GgmlType::Q4_1, 16, n_cols, 12),
       make_weights(GgmlType::Q8_0, 13, n_cols, 13)},
      {make_weights(GgmlType::Q4_K, 24, n_cols, 14), make_weights(GgmlType::Q6_K, 8, n_cols, 15),
       make_weights(GgmlType::Q4_K, 3, n_cols, 16)},
      {make_weights(GgmlType::F16, 8, n_cols, 17), make_weights(GgmlType::Q4_0, 8, n_cols, 18),
       make_weights(GgmlType::Q6_K, 5, n_cols, 19)},
  };
  for (const auto& set : sets) {
    std::vector<std::vector<float>> x(3), each(3), separate(3);
    std::vector<std::span<const float>> inputs;
    std::vector<MatmulOutput> outputs;
    MatmulScratch scratch;
    for (size_t i = 0; i < 3; ++i) {
      const WeightView& w = set[i].view;
      x[i] = normal_values(20 + i, static_cast<size_t>(n_cols));
      each[i].assign(static_cast<size_t>(w.n_rows), -1.0f);
      separate[i] = each[i];
      matmul(w, x[i], 1, separate[i], w.n_rows, pool, scratch);
    }
    for (size_t i = 0; i < 3; ++i) {
      inputs.emplace_back(x[i]);
      outputs.push_back({&set[i].view, each[i], set[i].view.n_rows});
    }
    matmul_each_input(outputs, inputs, pool, scratch);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(std::memcmp(each[i].data(), separate[i].data(), each[i].size() * sizeof(float)), 0)
          << name_of(set[i].view.type) << " output " << i;
    }
  }
  std::vector<float> y(40);
  MatmulScratch scratch;
  const std::vector<float> x = normal_values(1, 256);
  const MatmulOutput one[] = {{&packed_q4.view, y, 40}};
  const std::span<const float> two_inputs[] = {x, x};
  EXPECT_THROW(matmul_each_input(one, two_inputs, pool, scratch), Error);
}

// Rows of F32 at an odd address are copied, not read misaligned.
TEST(KernelMatmul, MisalignedF32Rows) {
  const Weights w = make_weights(GgmlType::F32, 6, 40, 9);
  std::vector<std::byte> shifted(w.bytes.size() + 1);
  std::memcpy(shifted.data() + 1, w.bytes.data(), w.bytes.size());
  WeightView view = w.view;
  view.data = shifted.data() + 1;
  const std::vector<float> x = normal_values(4, 40);
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> expected(6), got(6);
  matmul(w.view, x, 1, expected, 6, pool, scratch);
  matmul(view, x, 1, got, 6, pool, scratch);
  EXPECT_EQ(got, expected);
}

TEST(KernelMatmul, RefusesBadArgumentsNamingTheTensor) {
  ThreadPool pool(1);
  MatmulScratch scratch;
  std::vector<float> x(64), y(64);
  const Weights w = make_weights(GgmlType::Q8_0, 2, 32, 1);
  auto message_of = [&](const WeightView& view, int64_t n_x, int64_t stride) {
    try {
      matmul(view, x, n_x, y, stride, pool, scratch);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  WeightView ints = w.view;
  ints.type = GgmlType::I32;
  ints.n_cols = 17;
  ints.row_bytes = 68;
  EXPECT_NE(message_of(ints, 1, 2).find("blk.0.test.weight"), std::string::npos);
  EXPECT_NE(message_of(ints, 1, 2).find("I32"), std::string::npos);
  WeightView wrong_bytes = w.view;
  wrong_bytes.row_bytes = 33;
  EXPECT_NE(message_of(wrong_bytes, 1, 2).find("blk.0.test.weight"), std::string::npos);
  EXPECT_NE(message_of(w.view, 3, 2).find("blk.0.test.weight"), std::string::npos);  // x short
  EXPECT_NE(message_of(w.view, 2, 1).find("stride"), std::string::npos);
  EXPECT_EQ(message_of(w.view, 2, 2), "no error");
}

// Q8_0 (and Q8_1): d = amax / 127 as fp16, every value a multiple of it in
// [-127, 127], within about half a step of the input, and rounding twice
// changes nothing.
TEST(KernelRoundActivations, Q8_0BlocksWithinHalfAStepAndIdempotent) {
  for (const GgmlType weight : {GgmlType::Q4_0, GgmlType::Q4_1}) {
    const std::vector<float> x = normal_values(21, 32 * 40, 3.0);
    std::vector<float> once(x.size()), twice(x.size());
    round_activations(weight, x, once);
    round_activations(weight, once, twice);
    EXPECT_EQ(once, twice) << name_of(weight);
    for (size_t b = 0; b < x.size(); b += 32) {
      float amax = 0;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
      const float d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
      for (size_t j = 0; j < 32; ++j) {
        const float q = once[b + j] / d;
        ASSERT_NEAR(q, std::round(q), 1e-4) << b + j;
        ASSERT_LE(std::fabs(q), 127.0f);
        // Half a step, plus the fp16 rounding of d over up to 127 steps.
        ASSERT_LE(std::fabs(once[b + j] - x[b + j]), (amax / 127.0f) * 0.5625f) << b + j;
      }
    }
  }
}

// Agrees with the stored Q8_0 format: dequantize(quantize_row(x)) matches
// except where the reference's roundf and 1/d break a tie differently.
TEST(KernelRoundActivations, Q8_0AgreesWithTheQuantizer) {
  const std::vector<float> x = normal_values(22, 32 * 64);
  std::vector<float> rounded(x.size()), stored(x.size());
  round_activations(GgmlType::Q8_0, x, rounded);
  std::vector<std::byte> bytes(*ggml_row_bytes(GgmlType::Q8_0, x.size()));
  quantize_row(GgmlType::Q8_0, x, bytes);
  dequantize_row(GgmlType::Q8_0, bytes, stored);
  size_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) differ += rounded[i] != stored[i];
  EXPECT_LE(differ, 2u);
}

// Q8_K: the value of largest magnitude keeps its sign and maps to code
// -127 of d = -max / 127, codes stay in [-127, 127] (max 127 even where
// rounding would reach 128), and each value is within half a step.
TEST(KernelRoundActivations, Q8_KBlocks) {
  std::vector<float> x = normal_values(23, 256 * 6, 2.0);
  x[256 + 17] = -9.0f;                                // a negative maximum in block 1
  std::fill(x.begin() + 512, x.begin() + 768, 0.0f);  // an all-zero block 2
  std::vector<float> once(x.size()), twice(x.size());
  round_activations(GgmlType::Q4_K, x, once);
  EXPECT_NEAR(once[256 + 17], -9.0f, 1e-5f);
  for (size_t j = 512; j < 768; ++j) ASSERT_EQ(once[j], 0.0f);
  for (size_t b = 0; b < x.size(); b += 256) {
    float max = 0, amax = 0;
    for (size_t j = 0; j < 256; ++j) {
      if (std::fabs(x[b + j]) > amax) {
        amax = std::fabs(x[b + j]);
        max = x[b + j];
      }
    }
    if (amax == 0) continue;
    const float d = 1.0f / (-127.0f / max);
    for (size_t j = 0; j < 256; ++j) {
      const float q = once[b + j] / d;
      ASSERT_NEAR(q, std::round(q), 1e-4) << b + j;
      ASSERT_LE(std::fabs(q), 127.0f + 1e-4f);
      ASSERT_LE(std::fabs(once[b + j] - x[b + j]), std::fabs(d) * 0.5f * (1 + 1e-5f)) << b + j;
    }
  }
  // Rounding again moves values by at most an ulp or two of d's rounding.
  round_activations(GgmlType::Q6_K, once, twice);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(twice[i], once[i], 1e-6f * std::fabs(once[i])) << i;
  }
}

TEST(KernelRoundActivations, HalfFormatsAndAliasing) {
  const std::vector<float> x = normal_values(24, 96, 100.0);
  std::vector<float> out(x.size());
  round_activations(GgmlType::F16, x, out);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], fp16_to_fp32(fp32_to_fp16(x[i])));
  round_activations(GgmlType::BF16, x, out);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], bf16_to_fp32(fp32_to_bf16(x[i])));
  round_activations(GgmlType::F32, x, out);
  EXPECT_EQ(out, x);
  // In place gives what out of place does.
  std::vector<float> q8(x.begin(), x.begin() + 64), expected(64);
  round_activations(GgmlType::IQ4_NL, q8, expected);
  round_activations(GgmlType::IQ4_NL, q8, q8);
  EXPECT_EQ(q8, expected);
  // Not a whole number of blocks.
  std::vector<float> odd(48);
  EXPECT_THROW(round_activations(GgmlType::Q8_0, odd, odd), Error);
  std::vector<float> part(256);
  EXPECT_THROW(
      round_activations(GgmlType::Q4_K, std::span(part).first(128), std::span(part).first(128)),
      Error);
}

TEST(KernelDot, FixedLaneOrderMatchesDoubleAndHandlesTails) {
  for (const int64_t n : {0, 1, 15, 16, 17, 100, 4096}) {
    const std::vector<float> a = normal_values(30, static_cast<size_t>(n) + 1);
    const std::vector<float> b = normal_values(31, static_cast<size_t>(n) + 1);
    double dot = 0, magnitude = 0;
    for (int64_t i = 0; i < n; ++i) {
      dot += static_cast<double>(a[i]) * b[i];
      magnitude += std::fabs(static_cast<double>(a[i]) * b[i]);
    }
    EXPECT_NEAR(dot_f32(a.data(), b.data(), n), dot, 1e-6 * magnitude) << n;
  }
  // Lane i % 16, then the pairwise fold: exact with representable sums.
  std::vector<float> ones(33, 1.0f), idx(33);
  for (int i = 0; i < 33; ++i) idx[i] = static_cast<float>(i);
  EXPECT_EQ(dot_f32(ones.data(), idx.data(), 33), 528.0f);
}

TEST(KernelGetRows, DequantizesTheRequestedRows) {
  for (const GgmlType type :
       {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::IQ4_XS}) {
    const Weights table = make_weights(type, 10, 256, 40);
    const std::vector<int32_t> ids = {3, 0, 9, 3};
    std::vector<float> out(ids.size() * 256);
    get_rows(table.view, ids, out);
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::vector<float> row = dequantized_row(table.view, ids[i]);
      ASSERT_TRUE(std::equal(row.begin(), row.end(), out.begin() + i * 256)) << name_of(type);
    }
  }
}

TEST(KernelGetRows, RefusesIdsOutsideTheTable) {
  const Weights table = make_weights(GgmlType::Q8_0, 10, 64, 41);
  std::vector<float> out(64);
  for (const int32_t id : {10, -1, 1 << 30}) {
    const std::vector<int32_t> ids = {id};
    try {
      get_rows(table.view, ids, out);
      FAIL() << "id " << id << " was accepted";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("blk.0.test.weight"), std::string::npos) << message;
      EXPECT_NE(message.find(std::to_string(id)), std::string::npos) << message;
    }
  }
  std::vector<float> too_small(63);
  EXPECT_THROW(get_rows(table.view, std::vector<int32_t>{1}, too_small), Error);
}

}  // namespace
}  // namespace cortiq::kernels

namespace cortiq::kernels {
namespace {

// Every SIMD variant of dot_f32 gives the scalar reference's bits, for every
// length (full 16-lane blocks and every tail) and for special values.
#if defined(__x86_64__)
TEST(KernelDotSimd, Avx2MatchesScalarBitForBit) {
  if (!cpu_features().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  NormalSampler normal(11);
  for (int64_t n = 0; n <= 300; ++n) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (auto& v : a) v = static_cast<float>(normal.next() * 1e3);
    for (auto& v : b) v = static_cast<float>(normal.next() * 1e-3);
    const float s = scalar::dot_f32(a.data(), b.data(), n);
    const float v = avx2::dot_f32(a.data(), b.data(), n);
    EXPECT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(v)) << "n = " << n;
  }
  std::vector<float> inf(40, 1.0f), x(40, 2.0f);
  inf[17] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(avx2::dot_f32(inf.data(), x.data(), 40), scalar::dot_f32(inf.data(), x.data(), 40));
}
#endif

}  // namespace
}  // namespace cortiq::kernels

namespace cortiq::kernels {
namespace {

// The hot-path dequantization gives the reference's bits for random blocks
// (every nibble and byte pattern, finite scales), at every SIMD level.
TEST(KernelDequantizeFast, MatchesTheReferenceBitForBit) {
  SplitMix64 rng(5);
  for (const GgmlType type : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16,
                              GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const size_t n = 512;
    const size_t bytes = *ggml_row_bytes(type, n);
    std::vector<std::byte> row(bytes);
    for (int trial = 0; trial < 20; ++trial) {
      for (auto& b : row) b = static_cast<std::byte>(rng.next());
      // Keep 16-bit scales and values finite (exponent bits not all ones).
      const size_t stride = type == GgmlType::Q4_0 ? 18 : type == GgmlType::Q8_0 ? 34 : 0;
      for (size_t off = 0; stride != 0 && off < bytes; off += stride)
        row[off + 1] &= std::byte{0x3B};
      if (type == GgmlType::Q4_K || type == GgmlType::Q6_K) {
        // d and dmin (Q4_K) / d (Q6_K, last 2 bytes of each 210-byte block).
        const size_t block = type == GgmlType::Q4_K ? 144 : 210;
        for (size_t off = 0; off < bytes; off += block) {
          if (type == GgmlType::Q4_K) {
            row[off + 1] &= std::byte{0x3B};
            row[off + 3] &= std::byte{0x3B};
          } else {
            row[off + block - 1] &= std::byte{0x3B};
          }
        }
      }
      if (type == GgmlType::F16 || type == GgmlType::BF16) {
        for (size_t off = 1; off < bytes; off += 2) row[off] &= std::byte{0x3B};
      }
      std::vector<float> expected(n), actual(n);
      dequantize_row(type, row, expected);
      dequantize_row_fast(type, row, actual);
      ASSERT_EQ(std::memcmp(expected.data(), actual.data(), n * sizeof(float)), 0);
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels

namespace cortiq::kernels {
namespace {}  // namespace
}  // namespace cortiq::kernels
