// Speculative sampling (Sampler::sample_speculative and generate() with a
// sampling draft model): the tokens it returns are distributed as plain
// sampling's, whatever distribution the drafts come from. Checked with
// Pearson's chi-squared test against the exact distribution, over many
// seeded draws, at the 0.1 % level (the seeds are fixed, so a pass or a
// failure repeats; a sampler that drew from p instead of the residual after
// a rejection fails every case where q differs from p).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "base/random.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "runtime/sampler.hpp"

namespace cortiq {
namespace {

// Pearson's chi-squared statistic of counts against probabilities, with the
// bins whose expected count is under 5 merged into one; `outside` counts
// draws of something the distribution gives probability 0.
template <class Key>
struct ChiSquare {
  double statistic = 0;
  int64_t degrees = 0;
  int64_t outside = 0;
  // The upper 0.1 % point of the chi-squared distribution (Wilson-Hilferty:
  // within 1 % of the exact quantile for 3 degrees and up).
  double threshold() const {
    const double k = static_cast<double>(degrees);
    const double z = 3.0902;  // the normal's upper 0.1 % point
    const double c = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
    return k * c * c * c;
  }
  bool passes() const { return outside == 0 && degrees >= 1 && statistic < threshold(); }
};

template <class Key>
ChiSquare<Key> chi_square(const std::map<Key, int64_t>& observed,
                          const std::map<Key, double>& expected, int64_t n) {
  ChiSquare<Key> r;
  double merged_expected = 0, merged_observed = 0;
  int64_t bins = 0;
  for (const auto& [key, p] : expected) {
    const double e = p * static_cast<double>(n);
    const auto it = observed.find(key);
    const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
    if (e < 5) {
      merged_expected += e;
      merged_observed += o;
      continue;
    }
    r.statistic += (o - e) * (o - e) / e;
    ++bins;
  }
  if (merged_expected >= 5) {
    r.statistic +=
        (merged_observed - merged_expected) * (merged_observed - merged_expected) / merged_expected;
    ++bins;
  }
  r.degrees = bins - 1;
  for (const auto& [key, count] : observed) {
    const auto it = expected.find(key);
    if (it == expected.end() || it->second <= 0) r.outside += count;
  }
  return r;
}

// A draw from q with an independent stream.
TokenId draw_from(const TokenDistribution& q, SplitMix64& rng) {
  const double u = rng.uniform();
  double cum = 0;
  for (const auto& [id, p] : q.probs) {
    cum += p;
    if (u < cum) return id;
  }
  return q.probs.back().first;
}

SamplingParams sampling(float temperature, int32_t top_k, float min_p, uint64_t seed) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = 1.0f;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

TEST(SpeculativeSampling, TheDistributionIsWhatSampleDrawsFrom) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, -1.0f, 3.0f, 0.5f};
  Sampler s(sampling(0.7f, 3, 0.0f, 5), 6);
  TokenDistribution d;
  Sampler twin(sampling(0.7f, 3, 0.0f, 5), 6);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(s.sample(logits, d), twin.sample(logits));
  // top-k 3 keeps tokens 1, 4 and 2, listed in id order, softmax at 0.7.
  ASSERT_EQ(d.probs.size(), 3u);
  EXPECT_EQ(d.probs[0].first, 1);
  EXPECT_EQ(d.probs[1].first, 2);
  EXPECT_EQ(d.probs[2].first, 4);
  const double t = 0.7f;
  const double z = 2 + std::exp(-1 / t);
  EXPECT_NEAR(d.prob(1), 1 / z, 1e-12);
  EXPECT_NEAR(d.prob(2), std::exp(-1 / t) / z, 1e-12);
  EXPECT_EQ(d.prob(0), 0.0);
  // Greedy: the best token alone, and a draft is kept exactly when it is
  // that token.
  Sampler greedy(sampling(0.0f, 0, 0.0f, 5), 6);
  EXPECT_EQ(greedy.sample(logits, d), 1);
  ASSERT_EQ(d.probs.size(), 1u);
  EXPECT_EQ(d.probs[0], (std::pair<TokenId, double>{1, 1.0}));
  EXPECT_EQ(greedy.sample_speculative(logits, 4, d), 1);
  EXPECT_EQ(greedy.sample_speculative(logits, 1, d), 1);
}

// Against drafts from q = p, from a point mass (a greedy drafter), from the
// uniform distribution, from a q that favours what p does not, and from a q
// whose support misses most of p's: the kept-or-resampled token follows p,
// and the share of drafts kept is sum(min(p, q)).
TEST(SpeculativeSampling, SampleSpeculativeDrawsFromTheTargetDistribution) {
  const int64_t n_vocab = 10;
  SplitMix64 make(3);
  std::vector<float> logits(n_vocab);
  for (float& l : logits) l = static_cast<float>(4 * make.uniform() - 2);
  for (const auto& params : {sampling(1.0f, 0, 0.0f, 0), sampling(0.8f, 6, 0.05f, 0)}) {
    TokenDistribution p;
    Sampler(params, n_vocab).sample(logits, p);
    std::vector<std::pair<const char*, TokenDistribution>> drafts;
    drafts.emplace_back("q = p", p);
    drafts.emplace_back("point mass", TokenDistribution{{{p.probs.back().first, 1.0}}});
    TokenDistribution uniform, reversed, narrow;
    for (TokenId id = 0; id < n_vocab; ++id) uniform.probs.emplace_back(id, 1.0 / n_vocab);
    double z = 0;
    for (TokenId id = 0; id < n_vocab; ++id) z += std::exp(-logits[id]);
    for (TokenId id = 0; id < n_vocab; ++id)
      reversed.probs.emplace_back(id, std::exp(-logits[id]) / z);
    narrow.probs = {{0, 0.5}, {9, 0.5}};
    drafts.emplace_back("uniform", uniform);
    drafts.emplace_back("reversed", reversed);
    drafts.emplace_back("narrow", narrow);
    for (const auto& [what, q] : drafts) {
      SCOPED_TRACE(what);
      const int64_t n = 20000;
      std::map<TokenId, int64_t> counts;
      int64_t kept = 0;
      SplitMix64 drafter(17);
      for (int64_t i = 0; i < n; ++i) {
        SamplingParams seeded = params;
        seeded.seed = static_cast<uint64_t>(i);
        Sampler s(seeded, n_vocab);
        const TokenId x = draw_from(q, drafter);
        const TokenId got = s.sample_speculative(logits, x, q);
        ++counts[got];
        kept += got == x ? 1 : 0;
      }
      std::map<TokenId, double> expected;
      double overlap = 0;
      for (const auto& [id, prob] : p.probs) {
        expected[id] = prob;
        overlap += std::min(prob, q.prob(id));
      }
      const auto chi = chi_square(counts, expected, n);
      EXPECT_TRUE(chi.passes()) << "chi2 " << chi.statistic << " over " << chi.degrees
                                << " degrees (limit " << chi.threshold() << "), " << chi.outside
                                << " draws outside p";
      // Binomial: 4 standard deviations.
      const double rate = static_cast<double>(kept) / n;
      EXPECT_NEAR(rate, overlap, 4 * std::sqrt(overlap * (1 - overlap) / n) + 1e-9);
    }
  }
}

// Samples its drafts with a model at another temperature and top-k than
// the target's: q far from p, so rejections and residual draws are common.
class RetemperedDrafter final : public Drafter {
 public:
  RetemperedDrafter(std::shared_ptr<const Model> draft, const Model& target)
      : inner_(std::move(draft), target) {}
  std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) override {
    return inner_.draft(context, max_tokens);
  }
  bool samples() const override { return true; }
  SampledDraft draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                             const SamplingParams& params) override {
    SamplingParams hotter = params;
    hotter.temperature = 2.5f;
    hotter.top_k = 8;
    return inner_.draft_sampled(context, max_tokens, hotter);
  }

 private:
  DraftModelDrafter inner_;
};

// generate() with a sampling drafter: the first three generated tokens of
// many seeded runs are distributed as plain sampling's, computed exactly
// from the target's logits (tokens two and three are drafted and checked
// by speculative sampling in most runs) — with the same weights in Q8_0 as
// the draft (q close to p) and with a drafter whose q is far from p.
TEST(SpeculativeSampling, GenerateWithADraftModelSamplesThePlainDistribution) {
  const auto model = test::load_test_model({});
  test::TestModelSpec quantized;
  quantized.type = GgmlType::Q8_0;
  LoadOptions on_the_targets_threads;
  on_the_targets_threads.pool = model->shared_pool();
  const auto draft = Model::load(test::test_model_path(quantized), on_the_targets_threads);
  ASSERT_EQ(&draft->pool(), &model->pool());
  const std::vector<TokenId> prompt = {5, 17, 29, 41};
  GenerateOptions o;
  o.sampling = sampling(0.3f, 4, 0.0f, 0);
  o.sampling.penalty_last_n = 0;
  o.ignore_eos = true;
  o.max_tokens = 4;
  o.speculative.draft_max = 4;

  // The exact distribution of (t1, t2) and of t3, from the target's rows.
  const auto n_vocab = model->n_vocab();
  const auto row_distribution = [&](const std::vector<TokenId>& ids) {
    Session s(model);
    const std::vector<float> logits = s.evaluate(ids, 0, ids.size() - 1);
    TokenDistribution d;
    Sampler(o.sampling, n_vocab).sample(logits, d);
    return d;
  };
  std::map<std::pair<TokenId, TokenId>, double> pair_expected;
  std::map<TokenId, double> third_expected;
  for (const auto& [t1, p1] : row_distribution(prompt).probs) {
    std::vector<TokenId> with1 = prompt;
    with1.push_back(t1);
    for (const auto& [t2, p2] : row_distribution(with1).probs) {
      pair_expected[{t1, t2}] = p1 * p2;
      std::vector<TokenId> with2 = with1;
      with2.push_back(t2);
      for (const auto& [t3, p3] : row_distribution(with2).probs) third_expected[t3] += p1 * p2 * p3;
    }
  }

  const std::pair<const char*, std::shared_ptr<Drafter>> drafters[] = {
      {"Q8_0 draft", std::make_shared<DraftModelDrafter>(draft, *model)},
      {"hotter draft", std::make_shared<RetemperedDrafter>(model, *model)}};
  for (const auto& [what, drafter] : drafters) {
    SCOPED_TRACE(what);
    o.speculative.drafter = drafter;
    const int64_t n = 3000;
    std::map<std::pair<TokenId, TokenId>, int64_t> pairs;
    std::map<TokenId, int64_t> thirds;
    SpeculativeStats stats;
    Session session(model);
    for (int64_t i = 0; i < n; ++i) {
      o.sampling.seed = static_cast<uint64_t>(i);
      const GenerateResult r = session.generate(std::span<const TokenId>(prompt), o);
      ASSERT_EQ(r.tokens.size(), 4u);
      ++pairs[{r.tokens[0], r.tokens[1]}];
      ++thirds[r.tokens[2]];
      stats.passes += r.speculative.passes;
      stats.drafted += r.speculative.drafted;
      stats.accepted += r.speculative.accepted;
    }
    EXPECT_GT(stats.drafted, n);
    EXPECT_GT(stats.accepted, stats.drafted / 10);
    EXPECT_LT(stats.accepted, stats.drafted);  // both paths taken
    const auto pair_chi = chi_square(pairs, pair_expected, n);
    EXPECT_TRUE(pair_chi.passes()) << "(t1, t2): chi2 " << pair_chi.statistic << " over "
                                   << pair_chi.degrees << " degrees (limit " << pair_chi.threshold()
                                   << "), " << pair_chi.outside << " draws outside";
    const auto third_chi = chi_square(thirds, third_expected, n);
    EXPECT_TRUE(third_chi.passes())
        << "t3: chi2 " << third_chi.statistic << " over " << third_chi.degrees << " degrees (limit "
        << third_chi.threshold() << "), " << third_chi.outside << " draws outside";
  }
}

// The target as its own sampling draft: q is p bit for bit, so every draft
// is kept; a seeded run repeats; and same_draws gives plain sampling's
// tokens.
TEST(SpeculativeSampling, TheTargetAsItsOwnSampledDraftKeepsEveryDraft) {
  const auto model = test::load_test_model({});
  const std::vector<TokenId> prompt = {5, 17, 29, 41};
  GenerateOptions o;
  o.sampling = sampling(0.9f, 40, 0.05f, 21);
  o.ignore_eos = true;
  o.max_tokens = 30;
  const GenerateResult plain = Session(model).generate(std::span<const TokenId>(prompt), o);
  o.speculative.drafter = std::make_shared<DraftModelDrafter>(model, *model);
  o.speculative.draft_max = 6;
  Session session(model);
  const GenerateResult got = session.generate(std::span<const TokenId>(prompt), o);
  EXPECT_GT(got.speculative.drafted, 0);
  EXPECT_EQ(got.speculative.accepted, got.speculative.drafted);
  EXPECT_EQ(got.tokens.size(), 30u);
  // The cache holds the prompt and the tokens but the last.
  std::vector<TokenId> history = prompt;
  history.insert(history.end(), got.tokens.begin(), got.tokens.end() - 1);
  EXPECT_TRUE(std::ranges::equal(session.history(), history));
  const GenerateResult again = Session(model).generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(again.tokens, got.tokens);
  o.speculative.same_draws = true;
  const GenerateResult same = Session(model).generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(same.tokens, plain.tokens);
}

}  // namespace
}  // namespace cortiq
