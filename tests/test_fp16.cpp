// fp16/bf16 conversions: the scalar reference against the hardware's IEEE
// conversion where the CPU has it, and every SIMD row kernel against the
// scalar reference over all 65,536 half values and random floats.
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/fp16.hpp"
#include "kernels/cpu/convert.hpp"
#include "test_support.hpp"

namespace cortiq {

// gtest prints parameters through ADL: name the level instead of its bytes.
void PrintTo(SimdLevel level, std::ostream* os) {
  *os << simd_level_name(level);
}

namespace {

std::vector<uint16_t> all_halves() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = static_cast<uint16_t>(i);
  return v;
}

// Random floats over the whole range plus the awkward ones: ties, subnormal
// boundaries, overflow edges, infinities, NaNs.
std::vector<float> interesting_floats(size_t n_random) {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          1e10f,
                          -1e10f,
                          6.1035156e-05f,
                          5.9604645e-08f,
                          2.9802322e-08f,
                          2.9802326e-08f,
                          1.0009765625f /* tie */,
                          1.00048828125f,
                          INFINITY,
                          -INFINITY,
                          NAN,
                          -NAN,
                          std::bit_cast<float>(0x7f800001u),
                          std::bit_cast<float>(0xffc00123u),
                          3.3895314e38f,
                          1e-45f};
  test::SplitMix64 rng(42);
  for (size_t i = 0; i < n_random; ++i)
    v.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng.next())));
  for (size_t i = 0; i < n_random; ++i)
    v.push_back(static_cast<float>(rng.uniform() * 200.0 - 100.0));
  return v;
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    if (std::isnan(f)) {
      const uint16_t back = fp32_to_fp16(f);
      EXPECT_EQ(back & 0x8000, h & 0x8000);
      EXPECT_EQ(back & 0x7fff, 0x7e00) << "NaN becomes the canonical quiet NaN";
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << i;
  }
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1.0p-24f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7c00)));
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00) << "rounds to inf";
  EXPECT_EQ(fp32_to_fp16(1.00048828125f), 0x3c00) << "tie to even";
  EXPECT_EQ(fp32_to_fp16(1.00146484375f), 0x3c02) << "tie to even (up)";
  EXPECT_EQ(fp32_to_fp16(0x1.0p-25f), 0x0000) << "half of the smallest subnormal ties to zero";
}

TEST(Bf16, KnownValues) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80) << "tie to even";
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82) << "tie to even (up)";
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0) << "NaN stays NaN";
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80) << "max float rounds to inf";
}

class ConvertKernels : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    const SimdLevel level = GetParam();
    const CpuFeatures& f = cpu_features();
    if (level == SimdLevel::avx2 && !(f.avx2 && f.fma && f.f16c))
      GTEST_SKIP() << "no AVX2 on this CPU";
    if (level == SimdLevel::avx512 &&
        !(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni))
      GTEST_SKIP() << "no AVX-512 on this CPU";
    saved_ = simd_level();
    set_simd_level(level);
    ASSERT_EQ(simd_level(), level);
  }
  void TearDown() override { set_simd_level(saved_); }
  SimdLevel saved_ = SimdLevel::scalar;
};

TEST_P(ConvertKernels, MatchScalarReference) {
  const std::vector<uint16_t> halves = all_halves();
  std::vector<float> got(halves.size()), want(halves.size());
  kernels::fp16_to_fp32_row(halves, got);
  kernels::scalar::fp16_to_fp32_row(halves.data(), want.data(),
                                    static_cast<int64_t>(halves.size()));
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "fp16 -> fp32";
  kernels::bf16_to_fp32_row(halves, got);
  kernels::scalar::bf16_to_fp32_row(halves.data(), want.data(),
                                    static_cast<int64_t>(halves.size()));
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "bf16 -> fp32";

  // Odd lengths exercise the scalar tails after the vector loop.
  const std::vector<float> floats = interesting_floats(100003);
  std::vector<uint16_t> got16(floats.size()), want16(floats.size());
  kernels::fp32_to_fp16_row(floats, got16);
  kernels::scalar::fp32_to_fp16_row(floats.data(), want16.data(),
                                    static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(got16[i], want16[i])
        << "fp32 -> fp16 of 0x" << std::hex << std::bit_cast<uint32_t>(floats[i]);
  }
  kernels::fp32_to_bf16_row(floats, got16);
  kernels::scalar::fp32_to_bf16_row(floats.data(), want16.data(),
                                    static_cast<int64_t>(floats.size()));
  for (size_t i = 0; i < floats.size(); ++i) {
    ASSERT_EQ(got16[i], want16[i])
        << "fp32 -> bf16 of 0x" << std::hex << std::bit_cast<uint32_t>(floats[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Levels, ConvertKernels,
                         ::testing::Values(SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

}  // namespace
}  // namespace cortiq
