// The delta rule's step (kernels/cpu/delta_rule.hpp): the dispatched kernel
// gives the scalar reference's bits, state and outputs, and both follow the
// formula (checked in double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/delta_rule.hpp"

namespace cortiq::kernels {
namespace {

struct StepInputs {
  std::vector<float> state, q, k, v;
  float beta, decay;
};

StepInputs random_inputs(int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.05f, 1.0f);
  StepInputs in;
  const auto n = static_cast<size_t>(d);
  in.state.resize(n * n);
  in.q.resize(n);
  in.k.resize(n);
  in.v.resize(n);
  for (float& x : in.state) x = 0.3f * normal(rng);
  for (auto* vec : {&in.q, &in.k, &in.v}) {
    for (float& x : *vec) x = normal(rng) / std::sqrt(static_cast<float>(d));
  }
  in.beta = unit(rng);
  in.decay = unit(rng);
  return in;
}

TEST(KernelDeltaRule, DispatchGivesTheScalarBitsAndTheFormula) {
  for (const int64_t d : {8, 16, 24, 128, 12}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(testing::Message() << "d " << d << " seed " << seed);
      const StepInputs in = random_inputs(d, seed);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      const auto n = static_cast<size_t>(d);
      std::vector<float> s_ref = in.state, s_fast = in.state, o_ref(n), o_fast(n);
      scalar::delta_rule_step(s_ref.data(), in.q.data(), in.k.data(), in.v.data(), in.beta,
                              in.decay, scale, o_ref.data(), d);
      delta_rule_step(s_fast.data(), in.q.data(), in.k.data(), in.v.data(), in.beta, in.decay,
                      scale, o_fast.data(), d);
      EXPECT_EQ(std::memcmp(s_ref.data(), s_fast.data(), s_ref.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(o_ref.data(), o_fast.data(), o_ref.size() * sizeof(float)), 0);
      // The formula, in double: S = decay S; S[j] += k (v_j - S[j]·k) beta; o = S q scale.
      for (size_t j = 0; j < n; ++j) {
        std::vector<double> row(in.state.begin() + static_cast<std::ptrdiff_t>(j * n),
                                in.state.begin() + static_cast<std::ptrdiff_t>((j + 1) * n));
        double sk = 0;
        for (size_t i = 0; i < n; ++i) sk += row[i] * in.decay * in.k[i];
        const double delta = (in.v[j] - sk) * in.beta;
        double o = 0;
        for (size_t i = 0; i < n; ++i) {
          row[i] = row[i] * in.decay + in.k[i] * delta;
          EXPECT_NEAR(s_ref[j * n + i], row[i], 1e-5);
          o += row[i] * in.q[i];
        }
        EXPECT_NEAR(o_ref[j], o * scale, 1e-5);
      }
    }
  }
}

// Kimi Delta Attention's step, a decay per key channel: the dispatched
// kernel gives the scalar's bits, and both follow the formula.
TEST(KernelDeltaRule, KeyedDecayGivesTheScalarBitsAndTheFormula) {
  for (const int64_t d : {8, 16, 24, 128, 12}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(testing::Message() << "d " << d << " seed " << seed);
      const StepInputs in = random_inputs(d, seed);
      const auto n = static_cast<size_t>(d);
      std::mt19937 rng(seed + 100);
      std::uniform_real_distribution<float> unit(0.05f, 1.0f);
      std::vector<float> decay(n);
      for (float& x : decay) x = unit(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> s_ref = in.state, s_fast = in.state, o_ref(n), o_fast(n);
      scalar::delta_rule_step_keyed(s_ref.data(), in.q.data(), in.k.data(), in.v.data(), in.beta,
                                    decay.data(), scale, o_ref.data(), d);
      delta_rule_step_keyed(s_fast.data(), in.q.data(), in.k.data(), in.v.data(), in.beta,
                            decay.data(), scale, o_fast.data(), d);
      EXPECT_EQ(std::memcmp(s_ref.data(), s_fast.data(), s_ref.size() * sizeof(float)), 0);
      EXPECT_EQ(std::memcmp(o_ref.data(), o_fast.data(), o_ref.size() * sizeof(float)), 0);
      // S[j][i] = decay_i S[j][i]; S[j] += k (v_j - S[j]·k) beta; o = S q scale.
      for (size_t j = 0; j < n; ++j) {
        std::vector<double> row(in.state.begin() + static_cast<std::ptrdiff_t>(j * n),
                                in.state.begin() + static_cast<std::ptrdiff_t>((j + 1) * n));
        double sk = 0;
        for (size_t i = 0; i < n; ++i) {
          row[i] *= decay[i];
          sk += row[i] * in.k[i];
        }
        const double delta = (in.v[j] - sk) * in.beta;
        double o = 0;
        for (size_t i = 0; i < n; ++i) {
          row[i] += in.k[i] * delta;
          EXPECT_NEAR(s_ref[j * n + i], row[i], 1e-5);
          o += row[i] * in.q[i];
        }
        EXPECT_NEAR(o_ref[j], o * scale, 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace cortiq::kernels
