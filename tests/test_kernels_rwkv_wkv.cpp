// RWKV's state updates (kernels/cpu/rwkv_wkv.hpp) follow their formulas,
// checked in double over several steps, for head sizes that fill
// llama.cpp's 64 lanes and ones that do not; the dispatched kernels give
// the scalar definitions' bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/rwkv_wkv.hpp"

namespace cortiq::kernels {
namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

// S[i][j] (i key, j value): out[j] = sum_i (S[i][j] + u[i] v[j] k[i]) r[i];
// S[i][j] = S[i][j] w[i] + v[j] k[i].
TEST(KernelRwkvWkv, Wkv6FollowsTheFormula) {
  for (const int64_t d : {64, 16, 40}) {
    SCOPED_TRACE(testing::Message() << "d " << d);
    std::mt19937 rng(static_cast<uint32_t>(d));
    const auto n = static_cast<size_t>(d);
    std::vector<float> state = random_vector(n * n, rng, -0.5f, 0.5f), out(n);
    std::vector<double> s_ref(state.begin(), state.end());
    for (int step = 0; step < 4; ++step) {
      const auto r = random_vector(n, rng, -1, 1), k = random_vector(n, rng, -1, 1),
                 v = random_vector(n, rng, -1, 1), u = random_vector(n, rng, -1, 1),
                 w = random_vector(n, rng, 0.1f, 1);
      wkv6_step(state.data(), r.data(), k.data(), v.data(), u.data(), w.data(), out.data(), d);
      std::vector<double> o_ref(n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = 0; j < n; ++j) {
          const double kv = static_cast<double>(v[j]) * k[i];
          o_ref[j] += (s_ref[i * n + j] + u[i] * kv) * r[i];
          s_ref[i * n + j] = s_ref[i * n + j] * w[i] + kv;
        }
      }
      EXPECT_LT(relative_error(out, o_ref), 1e-6) << "step " << step;
      EXPECT_LT(relative_error(state, s_ref), 1e-6) << "step " << step;
    }
  }
}

// S[i][j] (i value, j key): sa = S[i] · a; S[i][j] = S[i][j] w[j] + v[i] k[j]
// + sa b[j]; out[i] = S[i] · r with the new state.
TEST(KernelRwkvWkv, Wkv7FollowsTheFormula) {
  for (const int64_t d : {64, 128, 24}) {
    SCOPED_TRACE(testing::Message() << "d " << d);
    std::mt19937 rng(static_cast<uint32_t>(d) + 100);
    const auto n = static_cast<size_t>(d);
    std::vector<float> state = random_vector(n * n, rng, -0.5f, 0.5f), out(n);
    std::vector<double> s_ref(state.begin(), state.end());
    for (int step = 0; step < 4; ++step) {
      const auto r = random_vector(n, rng, -1, 1), w = random_vector(n, rng, 0.5f, 1),
                 k = random_vector(n, rng, -1, 1), v = random_vector(n, rng, -1, 1),
                 a = random_vector(n, rng, -0.2f, 0.2f), b = random_vector(n, rng, -0.2f, 0.2f);
      wkv7_step(state.data(), r.data(), w.data(), k.data(), v.data(), a.data(), b.data(),
                out.data(), d);
      std::vector<double> o_ref(n, 0.0);
      for (size_t i = 0; i < n; ++i) {
        double sa = 0;
        for (size_t j = 0; j < n; ++j) sa += a[j] * s_ref[i * n + j];
        for (size_t j = 0; j < n; ++j) {
          double& s = s_ref[i * n + j];
          s = s * w[j] + static_cast<double>(v[i]) * k[j] + sa * b[j];
          o_ref[i] += s * r[j];
        }
      }
      EXPECT_LT(relative_error(out, o_ref), 1e-6) << "step " << step;
      EXPECT_LT(relative_error(state, s_ref), 1e-6) << "step " << step;
    }
  }
}

TEST(KernelRwkvWkv, DispatchGivesTheScalarBits) {
  for (const int64_t d : {64, 128, 24, 16, 12}) {
    SCOPED_TRACE(testing::Message() << "d " << d);
    std::mt19937 rng(static_cast<uint32_t>(d) + 200);
    const auto n = static_cast<size_t>(d);
    const auto state = random_vector(n * n, rng, -0.5f, 0.5f);
    const auto r = random_vector(n, rng, -1, 1), k = random_vector(n, rng, -1, 1),
               v = random_vector(n, rng, -1, 1), u = random_vector(n, rng, -1, 1),
               w = random_vector(n, rng, 0.1f, 1), a = random_vector(n, rng, -0.2f, 0.2f),
               b = random_vector(n, rng, -0.2f, 0.2f);
    const auto same_bits = [](const std::vector<float>& x, const std::vector<float>& y) {
      return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    };
    std::vector<float> s_ref = state, s_fast = state, o_ref(n), o_fast(n);
    scalar::wkv6_step(s_ref.data(), r.data(), k.data(), v.data(), u.data(), w.data(), o_ref.data(),
                      d);
    wkv6_step(s_fast.data(), r.data(), k.data(), v.data(), u.data(), w.data(), o_fast.data(), d);
    EXPECT_TRUE(same_bits(s_ref, s_fast) && same_bits(o_ref, o_fast)) << "wkv6";
    s_ref = state;
    s_fast = state;
    scalar::wkv7_step(s_ref.data(), r.data(), w.data(), k.data(), v.data(), a.data(), b.data(),
                      o_ref.data(), d);
    wkv7_step(s_fast.data(), r.data(), w.data(), k.data(), v.data(), a.data(), b.data(),
              o_fast.data(), d);
    EXPECT_TRUE(same_bits(s_ref, s_fast) && same_bits(o_ref, o_fast)) << "wkv7";
  }
}

}  // namespace
}  // namespace cortiq::kernels
