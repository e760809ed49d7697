// Properties of quantize_row / dequantize_row that hold for any input:
// bounded round-trip error, zero rows stay zero, rows are independent of
// their alignment and of how they are split into blocks, and bad arguments
// are refused with an error that names the type.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "quant/blocks.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

struct RoundTrip {
  GgmlType type;
  // Largest |dequantized - input| allowed, as a fraction of the row's max |x|.
  double max_error;
};

// Keeps ctest's test list readable ("Q4_K, max error 0.12").
void PrintTo(const RoundTrip& r, std::ostream* os) {
  *os << ggml_type_name(r.type) << ", max error " << r.max_error;
}

// Bounds from the formats' resolutions (half a step of the coarsest grid a
// block can get, plus the clamped end code of the symmetric types), with
// some margin; each is well above what the reference quantizers reach.
const RoundTrip kRoundTrips[] = {
    {GgmlType::F32, 0.0},   {GgmlType::F16, 1e-3},    {GgmlType::BF16, 5e-3},
    {GgmlType::Q8_0, 0.01}, {GgmlType::Q4_0, 0.14},   {GgmlType::Q4_1, 0.08},
    {GgmlType::Q5_0, 0.07}, {GgmlType::Q5_1, 0.04},   {GgmlType::Q2_K, 0.5},
    {GgmlType::Q3_K, 0.3},  {GgmlType::Q4_K, 0.12},   {GgmlType::Q5_K, 0.06},
    {GgmlType::Q6_K, 0.03}, {GgmlType::IQ4_NL, 0.15}, {GgmlType::MXFP4, 0.26},
};

std::vector<std::byte> quantize(GgmlType type, std::span<const float> x) {
  std::vector<std::byte> bytes(*ggml_row_bytes(type, x.size()));
  quantize_row(type, x, bytes);
  return bytes;
}

std::vector<float> dequantize(GgmlType type, std::span<const std::byte> bytes, size_t n) {
  std::vector<float> y(n);
  dequantize_row(type, bytes, y);
  return y;
}

// A row of normal-ish values (sum of uniforms) at the given scale.
std::vector<float> random_row(test::SplitMix64& rng, size_t n, double scale) {
  std::vector<float> x(n);
  for (float& v : x) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += rng.uniform() - 0.5;
    v = static_cast<float>(sum * scale);
  }
  return x;
}

std::string name_of(GgmlType type) {
  return std::string(ggml_type_name(type));
}

class QuantRoundTripTest : public testing::TestWithParam<RoundTrip> {};

TEST_P(QuantRoundTripTest, ErrorStaysWithinTheFormatsResolution) {
  const auto [type, max_error] = GetParam();
  test::SplitMix64 rng(1234 + static_cast<uint64_t>(type));
  // Magnitudes where the fp16 block scales are normal numbers: far below
  // these (|x| ~ 1e-3 for Q6_K) the scales go subnormal and lose precision,
  // a property of the formats rather than of the quantizers.
  for (const double scale : {0.5, 1.0, 37.0, 1000.0}) {
    for (int trial = 0; trial < 8; ++trial) {
      const size_t n = 256 * static_cast<size_t>(1 + trial % 3);
      const std::vector<float> x = random_row(rng, n, scale);
      const std::vector<float> y = dequantize(type, quantize(type, x), n);
      double amax = 0;
      for (const float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
      for (size_t i = 0; i < n; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), max_error * amax)
            << name_of(type) << " element " << i << " of " << n << ", scale " << scale;
      }
    }
  }
}

TEST_P(QuantRoundTripTest, ZeroRowStaysZero) {
  const GgmlType type = GetParam().type;
  const std::vector<float> zeros(512, 0.0f);
  for (const float v : dequantize(type, quantize(type, zeros), zeros.size())) {
    ASSERT_EQ(v, 0.0f) << name_of(type);
  }
}

// Blocks are independent: quantizing a row in one call or block by block,
// at any byte alignment, writes the same bytes.
TEST_P(QuantRoundTripTest, RowsAreBlockwiseAndAlignmentFree) {
  const GgmlType type = GetParam().type;
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  test::SplitMix64 rng(99);
  const size_t n = 512;
  const std::vector<float> x = random_row(rng, n, 3.0);
  const std::vector<std::byte> whole = quantize(type, x);

  std::vector<std::byte> pieces;
  for (size_t at = 0; at < n; at += traits.block_elems) {
    const std::vector<std::byte> block =
        quantize(type, std::span(x).subspan(at, traits.block_elems));
    pieces.insert(pieces.end(), block.begin(), block.end());
  }
  EXPECT_EQ(pieces, whole) << name_of(type);

  std::vector<std::byte> unaligned(whole.size() + 1);
  const std::span<std::byte> shifted = std::span(unaligned).subspan(1);
  quantize_row(type, x, shifted);
  EXPECT_TRUE(std::equal(shifted.begin(), shifted.end(), whole.begin())) << name_of(type);
  std::vector<float> from_shifted(n);
  dequantize_row(type, shifted, from_shifted);
  EXPECT_EQ(from_shifted, dequantize(type, whole, n)) << name_of(type);
}

TEST_P(QuantRoundTripTest, WrongSizesThrowNamingTheType) {
  const GgmlType type = GetParam().type;
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  const size_t n = 2 * traits.block_elems;
  const std::vector<float> x(n, 1.0f);
  const size_t row_bytes = *ggml_row_bytes(type, n);
  std::vector<std::byte> short_dst(row_bytes - 1);
  std::vector<std::byte> long_dst(row_bytes + 1);
  std::vector<float> y(n);
  const auto expect_throw_naming = [&](auto&& call) {
    try {
      call();
      ADD_FAILURE() << name_of(type) << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(traits.name), std::string::npos) << e.what();
    }
  };
  expect_throw_naming([&] { quantize_row(type, x, short_dst); });
  expect_throw_naming([&] { quantize_row(type, x, long_dst); });
  expect_throw_naming([&] { dequantize_row(type, short_dst, y); });
  expect_throw_naming([&] { dequantize_row(type, long_dst, y); });
  if (traits.block_elems > 1) {
    const std::vector<float> partial(traits.block_elems + 1, 1.0f);
    std::vector<float> partial_out(traits.block_elems + 1);
    expect_throw_naming([&] { quantize_row(type, partial, long_dst); });
    expect_throw_naming([&] { dequantize_row(type, long_dst, partial_out); });
  }
}

INSTANTIATE_TEST_SUITE_P(Quant, QuantRoundTripTest, testing::ValuesIn(kRoundTrips),
                         [](const testing::TestParamInfo<RoundTrip>& info) {
                           return name_of(info.param.type);
                         });

TEST(QuantRow, UnsupportedTypesThrowNamingTheType) {
  std::vector<float> x(256, 1.0f);
  std::vector<std::byte> bytes(1024);
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlTypeTraits* traits = ggml_type_traits(id);
    if (traits == nullptr) continue;
    const size_t n_bytes = *ggml_row_bytes(traits->type, traits->block_elems);
    const std::span<std::byte> row = std::span(bytes).first(n_bytes);
    const std::span<float> values = std::span(x).first(traits->block_elems);
    if (!can_quantize(traits->type)) {
      try {
        quantize_row(traits->type, values, row);
        ADD_FAILURE() << traits->name << " quantized";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(traits->name), std::string::npos) << e.what();
      }
    }
    if (!can_dequantize(traits->type)) {
      try {
        dequantize_row(traits->type, row, values);
        ADD_FAILURE() << traits->name << " dequantized";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(traits->name), std::string::npos) << e.what();
      }
    }
  }
}

TEST(QuantRow, EmptyRowsAreFine) {
  for (const RoundTrip& rt : kRoundTrips) {
    EXPECT_NO_THROW(quantize_row(rt.type, {}, {})) << name_of(rt.type);
    EXPECT_NO_THROW(dequantize_row(rt.type, {}, {})) << name_of(rt.type);
  }
}

TEST(QuantRow, IntegerTypesDecodeToTheirValues) {
  const int8_t i8[] = {-128, -1, 0, 1, 127};
  const int16_t i16[] = {-32768, -300, 0, 7, 32767};
  const int32_t i32[] = {INT32_MIN, -70000, 0, 16777217, INT32_MAX};
  std::vector<float> y(5);
  dequantize_row(GgmlType::I8, std::as_bytes(std::span(i8)), y);
  EXPECT_EQ(y, (std::vector<float>{-128, -1, 0, 1, 127}));
  dequantize_row(GgmlType::I16, std::as_bytes(std::span(i16)), y);
  EXPECT_EQ(y, (std::vector<float>{-32768, -300, 0, 7, 32767}));
  dequantize_row(GgmlType::I32, std::as_bytes(std::span(i32)), y);
  EXPECT_EQ(y, (std::vector<float>{-2147483648.0f, -70000, 0, 16777216.0f, 2147483648.0f}));
}

// The block structs are the GGUF layouts: same sizes as the type table.
TEST(QuantRow, BlockLayoutsMatchTheTypeTable) {
  using namespace quant;
  const std::pair<GgmlType, size_t> sizes[] = {
      {GgmlType::Q4_0, sizeof(BlockQ4_0)},    {GgmlType::Q4_1, sizeof(BlockQ4_1)},
      {GgmlType::Q5_0, sizeof(BlockQ5_0)},    {GgmlType::Q5_1, sizeof(BlockQ5_1)},
      {GgmlType::Q8_0, sizeof(BlockQ8_0)},    {GgmlType::Q2_K, sizeof(BlockQ2_K)},
      {GgmlType::Q3_K, sizeof(BlockQ3_K)},    {GgmlType::Q4_K, sizeof(BlockQ4_K)},
      {GgmlType::Q5_K, sizeof(BlockQ5_K)},    {GgmlType::Q6_K, sizeof(BlockQ6_K)},
      {GgmlType::IQ4_NL, sizeof(BlockIq4Nl)}, {GgmlType::IQ4_XS, sizeof(BlockIq4Xs)},
      {GgmlType::MXFP4, sizeof(BlockMxfp4)},
  };
  for (const auto& [type, size] : sizes) {
    EXPECT_EQ(ggml_type_traits(type).block_bytes, size) << name_of(type);
  }
}

}  // namespace
}  // namespace cortiq
