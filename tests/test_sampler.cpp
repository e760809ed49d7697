// The sampler: option validation, the chain's order, each filter against a
// hand-worked distribution, the seeded draw against SplitMix64, a reference
// implementation on a large vocabulary, and no allocation once warm.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/random.hpp"
#include "runtime/sampler.hpp"
#include "test_support.hpp"

// Counts the allocations of the current thread while armed, to check that a
// warm sampler does not allocate. Replacing the global operator new is legal
// C++ and harmless for the other tests (it only counts when armed).
namespace {
thread_local bool g_count_allocations = false;
thread_local size_t g_allocations = 0;
// Out of line, so the compiler does not see free() meet operator new.
[[gnu::noinline]] void release_memory(void* p) noexcept {
  std::free(p);
}
}  // namespace

void* operator new(std::size_t size) {
  if (g_count_allocations) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too: the library (std::stable_sort's buffer) allocates
// with them, and a sanitizer's own nothrow new freed by the delete above
// would be a mismatch.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (g_count_allocations) ++g_allocations;
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  release_memory(p);
}
void operator delete(void* p) noexcept {
  release_memory(p);
}
void operator delete(void* p, std::size_t) noexcept {
  release_memory(p);
}

namespace cortiq {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax is exactly the given probabilities (up to rounding).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (const double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// Plain random sampling: every filter off.
SamplingParams plain(float temperature = 1.0f, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.typical_p = 1.0f;
  p.seed = seed;
  return p;
}

// Greedy: temperature 0, nothing else.
SamplingParams greedy() {
  return plain(0.0f);
}

std::map<TokenId, int> histogram(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<TokenId, int> h;
  for (int i = 0; i < n; ++i) ++h[s.sample(logits)];
  return h;
}

std::set<TokenId> support(Sampler& s, const std::vector<float>& logits, int n = 2000) {
  std::set<TokenId> out;
  for (const auto& [id, count] : histogram(s, logits, n)) out.insert(id);
  return out;
}

std::string validate_message(const SamplingParams& p, int64_t n_vocab = 10) {
  try {
    p.validate(n_vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Sampler, ValidateNamesTheOption) {
  EXPECT_EQ(validate_message(SamplingParams{}), "");
  SamplingParams p;
  p.temperature = -1;
  EXPECT_EQ(validate_message(p), "temperature must be >= 0, got -1");
  p = {};
  p.temperature = kInf;
  EXPECT_EQ(validate_message(p), "temperature must be finite, got inf");
  p = {};
  p.temperature = std::nanf("");
  EXPECT_NE(validate_message(p).find("temperature must be >= 0"), std::string::npos);
  p = {};
  p.top_p = 1.5f;
  EXPECT_EQ(validate_message(p), "top_p must be in (0, 1], got 1.5");
  p.top_p = 0.0f;
  EXPECT_EQ(validate_message(p), "top_p must be in (0, 1], got 0");
  p = {};
  p.min_p = -0.5f;
  EXPECT_EQ(validate_message(p), "min_p must be in [0, 1], got -0.5");
  p.min_p = 2.0f;
  EXPECT_EQ(validate_message(p), "min_p must be in [0, 1], got 2");
  p = {};
  p.typical_p = 0.0f;
  EXPECT_EQ(validate_message(p), "typical_p must be in (0, 1], got 0");
  p = {};
  p.repeat_penalty = 0.0f;
  EXPECT_EQ(validate_message(p), "repeat_penalty must be > 0, got 0");
  p = {};
  p.presence_penalty = std::nanf("");
  EXPECT_EQ(validate_message(p), "presence_penalty must be finite, got nan");
  p = {};
  p.frequency_penalty = -kInf;
  EXPECT_EQ(validate_message(p), "frequency_penalty must be finite, got -inf");
  p = {};
  p.penalty_last_n = -2;
  EXPECT_EQ(validate_message(p), "penalty_last_n must be >= -1, got -2");
  p = {};
  p.logit_bias = {{3, 1.0f}, {10, 1.0f}};
  EXPECT_EQ(validate_message(p), "logit_bias token id 10 is out of range [0, 10)");
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_EQ(validate_message(p), "logit_bias token id -1 is out of range [0, 10)");
  p.logit_bias = {{4, std::nanf("")}};
  EXPECT_EQ(validate_message(p), "logit_bias value for token 4 is NaN");
  p.logit_bias = {{4, -kInf}, {5, kInf}};
  EXPECT_EQ(validate_message(p), "");
  p = {};
  p.suppressed = {0, 12};
  EXPECT_EQ(validate_message(p), "suppressed token id 12 is out of range [0, 10)");

  // The constructor and reset() validate too.
  p = {};
  p.top_p = 1.5f;
  EXPECT_THROW(Sampler(p, 10), Error);
  Sampler s(SamplingParams{}, 10);
  EXPECT_THROW(s.reset(p), Error);
  EXPECT_THROW(Sampler(SamplingParams{}, 0), Error);
}

TEST(Sampler, RejectsBadRowsAndIds) {
  Sampler s(greedy(), 4);
  const std::vector<float> short_row = {1, 2, 3};
  EXPECT_THROW(s.sample(short_row), Error);
  EXPECT_THROW(s.accept(4), Error);
  EXPECT_THROW(s.accept(-1), Error);
}

TEST(Sampler, GreedyIsArgmaxWithTiesToTheLowestId) {
  Sampler s(greedy(), 6);
  EXPECT_EQ(s.sample(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 2.0f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{-3.0f, -2.0f, -2.0f, -5.0f, -2.5f, -9.0f}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{1, 1, 1, 1, 1, 1}), 0);
  // NaN counts as -inf; -inf tokens are never chosen.
  const float nan = std::nanf("");
  EXPECT_EQ(s.sample(std::vector<float>{nan, -kInf, -100.0f, nan, -kInf, -kInf}), 2);
  // Greedy does not depend on the seed.
  SamplingParams p = greedy();
  p.seed = 12345;
  Sampler t(p, 6);
  EXPECT_EQ(t.sample(std::vector<float>{0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 2.0f}), 1);
}

TEST(Sampler, EveryTokenBannedThrows) {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  for (const float temperature : {0.0f, 1.0f}) {
    SamplingParams p = plain(temperature);
    p.suppressed = {0, 1};
    p.logit_bias = {{2, -kInf}};
    try {
      // Refused when the parameters are set (validate), before any sampling.
      Sampler s(p, 3);
      s.sample(row);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("every token is banned"), std::string::npos) << e.what();
    }
  }
  const float nan = std::nanf("");
  Sampler s(plain(), 3);
  EXPECT_THROW(s.sample(std::vector<float>{nan, nan, -kInf}), Error);
}

TEST(Sampler, LogitBiasAndSuppressedTokens) {
  const std::vector<float> row = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplingParams p = greedy();
  p.logit_bias = {{3, 2.5f}, {3, 1.0f}};  // added, each entry: 0 + 3.5
  Sampler a(p, 4);
  EXPECT_EQ(a.sample(row), 3);
  p.logit_bias = {{0, -kInf}};
  Sampler b(p, 4);
  EXPECT_EQ(b.sample(row), 1);
  p.logit_bias = {};
  p.suppressed = {0, 1};
  Sampler c(p, 4);
  EXPECT_EQ(c.sample(row), 2);
  // Suppression wins over a bias; a +inf bias forces the token.
  p.logit_bias = {{0, 100.0f}};
  p.suppressed = {0};
  Sampler d(p, 4);
  EXPECT_EQ(d.sample(row), 1);
  SamplingParams q = plain(1.0f, 9);
  q.logit_bias = {{2, kInf}};
  Sampler e(q, 4);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(e.sample(row), 2);
  // Suppressed tokens never come out of random sampling.
  SamplingParams r = plain(1.0f, 5);
  r.suppressed = {1, 3};
  Sampler f(r, 4);
  EXPECT_EQ(support(f, std::vector<float>{0, 0, 0, 0}), (std::set<TokenId>{0, 2}));
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = greedy();
  p.repeat_penalty = 1.5f;
  Sampler s(p, 3);
  s.accept(0);
  // 2 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.5f, -1.0f}), 1);
  // 2 / 1.5 = 1.33 > 1.3
  EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.3f, -1.0f}), 0);
  // -1 * 1.5 = -1.5 < -1.2
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.2f, -9.0f}), 1);
  // Once per distinct token, however often it occurs: 2 / 1.5, not 2 / 1.5^3.
  s.accept(0);
  s.accept(0);
  EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.3f, -1.0f}), 0);
  // clear_history() forgets.
  s.clear_history();
  EXPECT_EQ(s.sample(std::vector<float>{2.0f, 1.9f, -1.0f}), 0);
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  SamplingParams p = greedy();
  p.frequency_penalty = 0.3f;
  Sampler f(p, 2);
  f.accept(0);
  f.accept(0);
  EXPECT_EQ(f.sample(std::vector<float>{2.0f, 1.3f}), 0);  // 2 - 0.6 = 1.4
  EXPECT_EQ(f.sample(std::vector<float>{2.0f, 1.5f}), 1);
  f.accept(0);
  EXPECT_EQ(f.sample(std::vector<float>{2.0f, 1.3f}), 1);  // 2 - 0.9 = 1.1

  p = greedy();
  p.presence_penalty = 0.5f;
  Sampler q(p, 2);
  for (int i = 0; i < 5; ++i) q.accept(0);
  EXPECT_EQ(q.sample(std::vector<float>{2.0f, 1.4f}), 0);  // 2 - 0.5, once
  EXPECT_EQ(q.sample(std::vector<float>{2.0f, 1.6f}), 1);
}

TEST(Sampler, PenaltyWindow) {
  const std::vector<float> row = {2.0f, 1.9f, 0.0f};
  SamplingParams p = greedy();
  p.repeat_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s(p, 3);
  s.accept(0);
  EXPECT_EQ(s.sample(row), 1);
  s.accept(2);
  EXPECT_EQ(s.sample(row), 1);
  s.accept(2);  // 0 has left the window of 2
  EXPECT_EQ(s.sample(row), 0);

  p.penalty_last_n = 0;  // off
  Sampler off(p, 3);
  off.accept(0);
  EXPECT_EQ(off.sample(row), 0);

  p.penalty_last_n = -1;  // every accepted token
  Sampler all(p, 3);
  all.accept(0);
  for (int i = 0; i < 1000; ++i) all.accept(2);
  EXPECT_EQ(all.sample(row), 1);

  // reset() clears the history.
  all.reset(p);
  EXPECT_EQ(all.sample(row), 0);
}

TEST(Sampler, DrawFollowsTheSplitMix64Stream) {
  // Probabilities 0.5 / 0.3 / 0.2, walked in that order: the token is the
  // first whose cumulative probability reaches u.
  const std::vector<float> row = logits_of({0.2, 0.5, 0.3});
  for (const uint64_t seed : {0ull, 1ull, 42ull, 0xDEADBEEFull}) {
    Sampler s(plain(1.0f, seed), 3);
    SplitMix64 rng(seed);
    for (int i = 0; i < 500; ++i) {
      const double u = rng.uniform();
      // Stay away from the boundaries, where float logits round.
      const TokenId expected = u <= 0.5 - 1e-6 ? 1 : u <= 0.8 - 1e-6 ? 2 : 0;
      const TokenId got = s.sample(row);
      if (std::fabs(u - 0.5) > 1e-6 && std::fabs(u - 0.8) > 1e-6) {
        ASSERT_EQ(got, expected) << "seed " << seed << " draw " << i << " u " << u;
      }
    }
  }
  // Equal logits walk in id order.
  Sampler s(plain(1.0f, 7), 2);
  SplitMix64 rng(7);
  for (int i = 0; i < 200; ++i) {
    const double u = rng.uniform();
    ASSERT_EQ(s.sample(std::vector<float>{0.0f, 0.0f}), u <= 0.5 ? 0 : 1);
  }
}

TEST(Sampler, SameSeedSameTokensAndResetRestarts) {
  NormalSampler normal(3);
  std::vector<float> row(50);
  for (float& x : row) x = static_cast<float>(normal.next());
  SamplingParams p;  // the defaults: top_k 40, top_p 0.95, min_p 0.05, temperature 0.8
  p.top_k = 20;
  p.min_p = 0.0f;
  p.seed = 99;
  Sampler a(p, 50), b(p, 50);
  std::vector<TokenId> first;
  for (int i = 0; i < 100; ++i) {
    first.push_back(a.sample(row));
    ASSERT_EQ(first.back(), b.sample(row));
  }
  EXPECT_GT(std::set<TokenId>(first.begin(), first.end()).size(), 3u);
  a.reset(p);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a.sample(row), first[static_cast<size_t>(i)]);
  p.seed = 100;
  a.reset(p);
  std::vector<TokenId> other;
  for (int i = 0; i < 100; ++i) other.push_back(a.sample(row));
  EXPECT_NE(other, first);
}

TEST(Sampler, TopKKeepsTheBestWithTiesToLowerIds) {
  SamplingParams p = plain(1.0f, 3);
  p.top_k = 2;
  Sampler s(p, 5);
  EXPECT_EQ(support(s, logits_of({0.1, 0.3, 0.05, 0.35, 0.2})), (std::set<TokenId>{1, 3}));
  EXPECT_EQ(support(s, std::vector<float>{1, 1, 1, 1, 1}), (std::set<TokenId>{0, 1}));
  EXPECT_EQ(support(s, std::vector<float>{0, 1, 1, 0, 1}), (std::set<TokenId>{1, 2}));
  p.top_k = 1;
  s.reset(p);
  EXPECT_EQ(support(s, std::vector<float>{0, 1, 1, 0, 1}), (std::set<TokenId>{1}));
  p.top_k = 10;  // more than the vocabulary: off
  s.reset(p);
  EXPECT_EQ(support(s, std::vector<float>{0, 0, 0, 0, 0}).size(), 5u);
  // Fewer usable tokens than k: NaN and -inf never come out.
  p.top_k = 3;
  s.reset(p);
  EXPECT_EQ(support(s, std::vector<float>{std::nanf(""), 1, -kInf, 5, std::nanf("")}),
            (std::set<TokenId>{1, 3}));
  // +inf logits: only those, as equals, top-k still keeping the lower ids.
  p.top_k = 2;
  s.reset(p);
  EXPECT_EQ(support(s, std::vector<float>{kInf, 1, kInf, 5, kInf}), (std::set<TokenId>{0, 2}));
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> row = logits_of({0.2, 0.5, 0.3});
  SamplingParams p = plain(1.0f, 4);
  p.top_p = 0.75f;
  Sampler s(p, 3);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{1, 2}));
  p.top_p = 0.45f;  // the first token alone reaches it
  s.reset(p);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{1}));
  p.top_p = 0.9f;
  s.reset(p);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{0, 1, 2}));
}

TEST(Sampler, MinPKeepsTokensNearTheBest) {
  const std::vector<float> row = logits_of({0.2, 0.5, 0.3});
  SamplingParams p = plain(1.0f, 5);
  p.min_p = 0.5f;  // p >= 0.25
  Sampler s(p, 3);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{1, 2}));
  p.min_p = 0.7f;  // p >= 0.35
  s.reset(p);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{1}));
  p.min_p = 1.0f;  // only the best (and its ties)
  Sampler t(p, 4);
  EXPECT_EQ(support(t, std::vector<float>{1, 3, 3, 2}), (std::set<TokenId>{1, 2}));
}

TEST(Sampler, TypicalPKeepsTheLocallyTypicalTokens) {
  // p = 1/2, 1/4, 1/8, 1/8: entropy 1.75 ln 2. |surprise - entropy| in units
  // of ln 2: 0.75, 0.25, 1.25, 1.25, so token 1 comes first, then token 0.
  const std::vector<float> row = logits_of({0.5, 0.25, 0.125, 0.125});
  SamplingParams p = plain(1.0f, 6);
  p.typical_p = 0.2f;  // 0.25 > 0.2: token 1 alone, not the most likely one
  Sampler s(p, 4);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{1}));
  p.typical_p = 0.5f;  // 0.25, then 0.75 > 0.5
  s.reset(p);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{0, 1}));
  p.typical_p = 0.8f;  // 0.25, 0.75, then 0.875 (token 2 before 3 on the tie)
  s.reset(p);
  EXPECT_EQ(support(s, row), (std::set<TokenId>{0, 1, 2}));
}

TEST(Sampler, ChainOrder) {
  const std::vector<float> four = logits_of({0.4, 0.3, 0.2, 0.1});
  // top-k before top-p: top-p sees 0.57 / 0.43 and keeps the first only.
  SamplingParams p = plain(1.0f, 8);
  p.top_k = 2;
  p.top_p = 0.5f;
  Sampler s(p, 4);
  EXPECT_EQ(support(s, four), (std::set<TokenId>{0}));
  // top-p before min-p: top-p on 0.4 / 0.3 / ... keeps {0, 1}; had min-p
  // (>= 0.24: {0, 1}) come first, top-p would see 0.57 and keep {0}.
  p = plain(1.0f, 8);
  p.top_p = 0.55f;
  p.min_p = 0.6f;
  s.reset(p);
  EXPECT_EQ(support(s, four), (std::set<TokenId>{0, 1}));
  // The filters see the untempered distribution: a high temperature does not
  // let min-p keep more.
  p = plain(100.0f, 8);
  p.min_p = 0.5f;
  s.reset(p);
  const auto h = histogram(s, four, 4000);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_GT(h.at(1), 1800);  // nearly uniform over {0, 1} at temperature 100
  // Penalties come after the bias.
  p = greedy();
  p.logit_bias = {{0, 1.0f}};
  p.repeat_penalty = 2.0f;
  Sampler g(p, 2);
  g.accept(0);
  // (1 + 1) / 2 = 1 < 1.2; penalty first would give 1 / 2 + 1 = 1.5 > 1.2.
  EXPECT_EQ(g.sample(std::vector<float>{1.0f, 1.2f}), 1);
}

TEST(Sampler, TemperatureShapesTheDistribution) {
  const std::vector<float> row = logits_of({0.5, 0.3, 0.2});
  const int n = 40000;
  for (const float t : {1.0f, 2.0f, 0.5f}) {
    Sampler s(plain(t, 11), 3);
    const auto h = histogram(s, row, n);
    double z = 0;
    for (const double q : {0.5, 0.3, 0.2}) z += std::pow(q, 1.0 / t);
    const double want[3] = {std::pow(0.5, 1.0 / t) / z, std::pow(0.3, 1.0 / t) / z,
                            std::pow(0.2, 1.0 / t) / z};
    for (TokenId id = 0; id < 3; ++id) {
      const double got = h.count(id) ? static_cast<double>(h.at(id)) / n : 0.0;
      EXPECT_NEAR(got, want[id], 0.01) << "temperature " << t << " token " << id;
    }
  }
}

// A straightforward implementation of the same chain (full sort, no lazy
// walks, min-p after top-p as written): the final candidates in walk order
// with their probabilities.
struct Distribution {
  std::vector<TokenId> ids;
  std::vector<double> probs;

  TokenId draw(double u) const {
    double cum = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += probs[i];
      if (cum >= u) return ids[i];
    }
    return ids.back();
  }
};

Distribution reference_distribution(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<std::pair<float, TokenId>> c;
  for (size_t i = 0; i < logits.size(); ++i) c.emplace_back(logits[i], static_cast<TokenId>(i));
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size())
    c.resize(static_cast<size_t>(p.top_k));
  auto probs = [&](double temp) {
    std::vector<double> w;
    double z = 0;
    for (const auto& x : c) {
      w.push_back(std::exp((static_cast<double>(x.first) - c[0].first) / temp));
      z += w.back();
    }
    for (double& x : w) x /= z;
    return w;
  };
  if (p.top_p < 1) {
    const auto w = probs(1.0);
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      cum += w[i];
      if (cum >= p.top_p) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0) {
    const auto w = probs(1.0);
    size_t keep = 1;
    while (keep < c.size() && w[keep] >= p.min_p * w[0]) ++keep;
    c.resize(keep);
  }
  Distribution d;
  for (const auto& x : c) d.ids.push_back(x.second);
  d.probs = probs(p.temperature);
  return d;
}

TEST(Sampler, MatchesAReferenceOnALargeVocabulary) {
  const int64_t n_vocab = 5000;
  NormalSampler normal(17);
  std::vector<float> row(static_cast<size_t>(n_vocab));
  // Quarter steps give many ties; 5000 normals give a long tail.
  for (float& x : row) x = std::round(static_cast<float>(normal.next()) * 4.0f) / 4.0f;
  struct Case {
    int32_t top_k;
    float top_p, min_p, temperature;
  };
  const Case cases[] = {{0, 1.0f, 0.0f, 1.0f},   {0, 0.9f, 0.0f, 0.7f},    {0, 1.0f, 0.05f, 1.3f},
                        {0, 0.95f, 0.1f, 1.0f},  {40, 0.95f, 0.05f, 0.8f}, {100, 1.0f, 0.0f, 2.0f},
                        {3000, 0.5f, 0.0f, 1.0f}};
  for (const Case& k : cases) {
    SamplingParams p = plain(k.temperature, 1234);
    p.top_k = k.top_k;
    p.top_p = k.top_p;
    p.min_p = k.min_p;
    const Distribution want = reference_distribution(row, p);
    Sampler s(p, n_vocab);
    SplitMix64 rng(1234);
    std::set<TokenId> seen;
    for (int i = 0; i < 300; ++i) {
      const TokenId got = s.sample(row);
      seen.insert(got);
      ASSERT_EQ(got, want.draw(rng.uniform()))
          << "top_k " << k.top_k << " top_p " << k.top_p << " min_p " << k.min_p << " draw " << i;
    }
    EXPECT_GT(seen.size(), 5u) << "top_k " << k.top_k << " top_p " << k.top_p;
  }
}

TEST(Sampler, NoAllocationOnceWarm) {
  const int64_t n_vocab = 3000;
  NormalSampler normal(5);
  std::vector<float> row(static_cast<size_t>(n_vocab));
  for (float& x : row) x = static_cast<float>(normal.next()) * 3.0f;
  SamplingParams configs[4] = {SamplingParams{}, plain(1.0f), greedy(), SamplingParams{}};
  configs[0].repeat_penalty = 1.1f;
  configs[0].frequency_penalty = 0.1f;
  configs[0].logit_bias = {{5, 2.0f}};
  configs[0].suppressed = {7};
  configs[1].top_p = 0.9f;
  configs[3].typical_p = 0.9f;
  configs[3].top_k = 0;
  for (const SamplingParams& p : configs) {
    Sampler s(p, n_vocab);
    for (TokenId id = 0; id < 100; ++id) s.accept(id);
    for (int i = 0; i < 3; ++i) s.sample(row);  // warm up
    g_allocations = 0;
    g_count_allocations = true;
    for (int i = 0; i < 20; ++i) s.sample(row);
    g_count_allocations = false;
    EXPECT_EQ(g_allocations, 0u);
  }
}

TEST(Sampler, TokenProbability) {
  const std::vector<float> row = {0.0f, static_cast<float>(std::log(3.0)), -kInf};
  EXPECT_NEAR(token_probability(row, 0), 0.25, 1e-7);
  EXPECT_NEAR(token_probability(row, 1), 0.75, 1e-7);
  EXPECT_EQ(token_probability(row, 2), 0.0);
  EXPECT_THROW(token_probability(row, 3), Error);
  EXPECT_THROW(token_probability(row, -1), Error);
  // Large logits do not overflow; NaN counts as -inf.
  const std::vector<float> big = {1000.0f, 1000.0f, std::nanf("")};
  EXPECT_DOUBLE_EQ(token_probability(big, 0), 0.5);
  EXPECT_EQ(token_probability(big, 2), 0.0);
  // Probabilities sum to one.
  NormalSampler normal(1);
  std::vector<float> r(100);
  for (float& x : r) x = static_cast<float>(normal.next()) * 5.0f;
  double sum = 0;
  for (TokenId id = 0; id < 100; ++id) sum += token_probability(r, id);
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

}  // namespace
}  // namespace cortiq
