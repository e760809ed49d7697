// The sampling chain. Every step works on candidates_ (logit, id) in a
// canonical order — either ascending id (as built) or descending logit with
// ties to the lower id — so sums run in the same order on every platform, and
// sorting is lazy: a walk in descending order sorts only as far as it goes.
#include "runtime/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"

namespace cortiq {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

using Candidate = std::pair<float, TokenId>;
using Candidates = std::vector<Candidate>;

// Descending logit, ties to the lower id: a strict total order, so the sorted
// order (and what nth_element puts first) is unique.
struct Better {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.first != b.first) return a.first > b.first;
    return a.second < b.second;
  }
};

// Visits the candidates in descending order, calling stop(i) for each until
// it returns true; returns that index, or c.size() when none stopped. Sorts
// in growing chunks (nth_element, then sort of the chunk), so a walk that
// stops among the first tokens of a large vocabulary does not sort it all.
// On return c[0, i] is sorted; after a full walk `sorted` becomes true.
template <class Stop>
size_t walk_descending(Candidates& c, bool& sorted, Stop&& stop) {
  size_t done = 0;
  size_t chunk = 64;
  while (done < c.size()) {
    size_t to = c.size();
    if (!sorted) {
      to = std::min(c.size(), done + chunk);
      const auto first = c.begin() + static_cast<std::ptrdiff_t>(done);
      const auto mid = c.begin() + static_cast<std::ptrdiff_t>(to);
      if (to < c.size()) std::nth_element(first, mid, c.end(), Better{});
      std::sort(first, mid, Better{});
      chunk *= 8;
    }
    for (; done < to; ++done) {
      if (stop(done)) return done;
    }
  }
  sorted = true;
  return c.size();
}

float max_logit(const Candidates& c, bool sorted) {
  if (sorted) return c.front().first;
  float m = c.front().first;
  for (const Candidate& x : c) m = std::max(m, x.first);
  return m;
}

}  // namespace

void SamplingParams::validate(int64_t n_vocab) const {
  if (!(temperature >= 0)) throw Error(strfmt("temperature must be >= 0, got %g", temperature));
  if (!std::isfinite(temperature))
    throw Error(strfmt("temperature must be finite, got %g", temperature));
  if (!(top_p > 0 && top_p <= 1)) throw Error(strfmt("top_p must be in (0, 1], got %g", top_p));
  if (!(min_p >= 0 && min_p <= 1)) throw Error(strfmt("min_p must be in [0, 1], got %g", min_p));
  if (!(typical_p > 0 && typical_p <= 1))
    throw Error(strfmt("typical_p must be in (0, 1], got %g", typical_p));
  if (!(repeat_penalty > 0))
    throw Error(strfmt("repeat_penalty must be > 0, got %g", repeat_penalty));
  if (!std::isfinite(repeat_penalty))
    throw Error(strfmt("repeat_penalty must be finite, got %g", repeat_penalty));
  if (!std::isfinite(presence_penalty))
    throw Error(strfmt("presence_penalty must be finite, got %g", presence_penalty));
  if (!std::isfinite(frequency_penalty))
    throw Error(strfmt("frequency_penalty must be finite, got %g", frequency_penalty));
  if (penalty_last_n < -1)
    throw Error(strfmt("penalty_last_n must be >= -1, got %d", penalty_last_n));
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= n_vocab)
      throw Error(strfmt("logit_bias token id %d is out of range [0, %lld)", id,
                         static_cast<long long>(n_vocab)));
    if (std::isnan(bias)) throw Error(strfmt("logit_bias value for token %d is NaN", id));
  }
  for (const TokenId id : suppressed) {
    if (id < 0 || id >= n_vocab)
      throw Error(strfmt("suppressed token id %d is out of range [0, %lld)", id,
                         static_cast<long long>(n_vocab)));
  }
  // Refused here, before any work, rather than at the first sample.
  if (static_cast<int64_t>(suppressed.size() + logit_bias.size()) >= n_vocab) {
    std::vector<bool> banned(static_cast<size_t>(n_vocab), false);
    for (const TokenId id : suppressed) banned[static_cast<size_t>(id)] = true;
    for (const auto& [id, bias] : logit_bias) {
      if (bias == -std::numeric_limits<float>::infinity()) banned[static_cast<size_t>(id)] = true;
    }
    if (std::all_of(banned.begin(), banned.end(), [](bool b) { return b; })) {
      throw Error("every token is banned (suppressed or logit_bias -inf): nothing can be sampled");
    }
  }
}

Sampler::Sampler(SamplingParams params, int64_t n_vocab) : n_vocab_(n_vocab) {
  if (n_vocab <= 0)
    throw Error(strfmt("sampler: n_vocab must be > 0, got %lld", static_cast<long long>(n_vocab)));
  params.validate(n_vocab);
  params_ = std::move(params);
  rng_state_ = params_.seed;
  counts_.assign(static_cast<size_t>(n_vocab), 0);
  work_logits_.reserve(static_cast<size_t>(n_vocab));
  candidates_.reserve(static_cast<size_t>(n_vocab));
}

void Sampler::reset(SamplingParams params) {
  params.validate(n_vocab_);
  params_ = std::move(params);
  rng_state_ = params_.seed;
  clear_history();
}

void Sampler::accept(TokenId id) {
  if (id < 0 || id >= n_vocab_)
    throw Error(strfmt("sampler: accepted token id %d is out of range [0, %lld)", id,
                       static_cast<long long>(n_vocab_)));
  if (params_.penalty_last_n == 0) return;  // no window: nothing to remember
  history_.push_back(id);
  ++counts_[static_cast<size_t>(id)];
  if (params_.penalty_last_n > 0 && history_.size() > static_cast<size_t>(params_.penalty_last_n)) {
    --counts_[static_cast<size_t>(history_.front())];
    history_.pop_front();
  }
}

void Sampler::clear_history() {
  for (const TokenId id : history_) counts_[static_cast<size_t>(id)] = 0;
  history_.clear();
}

// SplitMix64 (base/random.hpp) kept as a bare state: the same numbers as
// SplitMix64(seed).uniform(), one per non-greedy sample.
double Sampler::next_uniform() {
  rng_state_ += 0x9E3779B97F4A7C15ull;
  return static_cast<double>(SplitMix64::mix(rng_state_) >> 11) * 0x1.0p-53;
}

// Repetition, frequency and presence penalties, once per distinct token of
// the window, in float like the peer. A count is negated while its token is
// done, then restored, so the pass needs no set.
void Sampler::apply_penalties(float* logits) {
  const SamplingParams& p = params_;
  if (p.penalty_last_n == 0 || history_.empty()) return;
  if (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f) return;
  for (const TokenId id : history_) {
    int32_t& count = counts_[static_cast<size_t>(id)];
    if (count <= 0) continue;
    float& l = logits[id];
    if (l > 0) {
      l /= p.repeat_penalty;
    } else {
      l *= p.repeat_penalty;
    }
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
    count = -count;
  }
  for (const TokenId id : history_) {
    int32_t& count = counts_[static_cast<size_t>(id)];
    if (count < 0) count = -count;
  }
}

// Locally typical sampling (Meister et al.): rank the tokens by how far their
// surprise -log p is from the entropy, keep the closest ones until their mass
// exceeds typical_p. Ties keep the higher-probability token first. The kept
// tokens stay in descending-logit order.
void Sampler::apply_typical(bool& sorted) {
  Candidates& c = candidates_;
  if (!sorted) {
    std::sort(c.begin(), c.end(), Better{});
    sorted = true;
  }
  const double maxl = c.front().first;
  double denom = 0;
  for (const Candidate& x : c) denom += std::exp(static_cast<double>(x.first) - maxl);
  typical_.clear();
  double entropy = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const double prob = std::exp(static_cast<double>(c[i].first) - maxl) / denom;
    if (prob > 0) entropy -= prob * std::log(prob);
    typical_.push_back({0.0, prob, static_cast<uint32_t>(i)});
  }
  for (Typical& t : typical_) {
    t.key = t.prob > 0 ? std::fabs(-std::log(t.prob) - entropy)
                       : std::numeric_limits<double>::infinity();
  }
  std::sort(typical_.begin(), typical_.end(), [](const Typical& a, const Typical& b) {
    if (a.key != b.key) return a.key < b.key;
    return a.rank < b.rank;
  });
  size_t keep = typical_.size();
  double cum = 0;
  for (size_t i = 0; i < typical_.size(); ++i) {
    cum += typical_[i].prob;
    if (cum > static_cast<double>(params_.typical_p)) {
      keep = i + 1;
      break;
    }
  }
  // Back to rank order, then compact in place (rank >= position, so a
  // forward copy never overwrites a candidate still to be read).
  std::sort(typical_.begin(), typical_.begin() + static_cast<std::ptrdiff_t>(keep),
            [](const Typical& a, const Typical& b) { return a.rank < b.rank; });
  for (size_t i = 0; i < keep; ++i) c[i] = c[typical_[i].rank];
  c.resize(keep);
}

// top-p (the smallest prefix whose probability reaches top_p) and min-p
// (tokens with p >= min_p * p_max), both on the untempered distribution, in
// that order. Both keep a prefix of the descending order, so min-p (a pure
// threshold on the logit) is applied first to spare the sort, and top-p
// still normalises over the set min-p has not yet cut.
void Sampler::apply_top_p_min_p(bool& sorted) {
  Candidates& c = candidates_;
  const bool use_top_p = params_.top_p < 1.0f;
  const bool use_min_p = params_.min_p > 0.0f;
  const double maxl = max_logit(c, sorted);
  double denom = 0;
  if (use_top_p) {
    for (const Candidate& x : c) denom += std::exp(static_cast<double>(x.first) - maxl);
  }
  if (use_min_p) {
    const double min_p = params_.min_p;
    // Stable, so the order stays canonical; the best token always stays
    // (exp(0) = 1 >= min_p).
    const auto end = std::remove_if(c.begin(), c.end(), [&](const Candidate& x) {
      return !(std::exp(static_cast<double>(x.first) - maxl) >= min_p);
    });
    c.erase(end, c.end());
  }
  if (use_top_p) {
    const double top_p = params_.top_p;
    double cum = 0;
    const size_t last = walk_descending(c, sorted, [&](size_t i) {
      cum += std::exp(static_cast<double>(c[i].first) - maxl) / denom;
      return cum >= top_p;
    });
    if (last < c.size()) {
      c.resize(last + 1);
      sorted = true;
    }
  }
}

double Sampler::weight(size_t i, double max_logit) const {
  return std::exp((static_cast<double>(candidates_[i].first) - max_logit) / params_.temperature);
}

double Sampler::total_weight(double max_logit) const {
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) total += weight(i, max_logit);
  return total;
}

// Temperature, softmax (double) and the draw: walk the candidates in
// descending order until the running weight reaches u * total.
TokenId Sampler::draw(bool& sorted) {
  const Candidates& c = candidates_;
  const double maxl = max_logit(c, sorted);
  const double target = next_uniform() * total_weight(maxl);
  double cum = 0;
  TokenId last_positive = kNoToken;
  const size_t at = walk_descending(candidates_, sorted, [&](size_t i) {
    const double w = weight(i, maxl);
    if (w > 0) last_positive = c[i].second;
    cum += w;
    return cum >= target;
  });
  if (at < c.size()) return c[at].second;
  // Rounding left the walk a hair short of the target: the last token with
  // any weight.
  return last_positive;
}

void Sampler::write_distribution(bool sorted, TokenDistribution& out) {
  const double maxl = max_logit(candidates_, sorted);
  const double total = total_weight(maxl);
  out.probs.clear();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    out.probs.emplace_back(candidates_[i].second, weight(i, maxl) / total);
  }
  // Unsorted candidates are in id order already.
  if (sorted) std::ranges::sort(out.probs, {}, &std::pair<TokenId, double>::first);
}

TokenId Sampler::filter(std::span<const float> logits, bool& sorted) {
  if (static_cast<int64_t>(logits.size()) != n_vocab_)
    throw Error(strfmt("sampler: expected %lld logits, got %zu", static_cast<long long>(n_vocab_),
                       logits.size()));
  work_logits_.assign(logits.begin(), logits.end());
  float* w = work_logits_.data();
  for (const auto& [id, bias] : params_.logit_bias) w[id] += bias;
  for (const TokenId id : params_.suppressed) w[id] = kNegInf;
  apply_penalties(w);

  // The best token, lowest id on ties; NaN never compares greater, so it
  // counts as -inf.
  int64_t best = -1;
  float maxl = kNegInf;
  for (int64_t i = 0; i < n_vocab_; ++i) {
    if (w[i] > maxl) {
      maxl = w[i];
      best = i;
    }
  }
  if (best < 0)
    throw Error(
        "sampler: every token is banned (logit bias, suppressed tokens, penalties or -inf/NaN "
        "logits)");
  if (params_.temperature == 0.0f) return static_cast<TokenId>(best);

  Candidates& c = candidates_;
  c.clear();
  sorted = false;
  const int32_t top_k = params_.top_k;
  if (maxl == kPosInf) {
    // +inf logits (overflow, or a +inf bias) leave only those tokens, as equals.
    for (int64_t i = 0; i < n_vocab_; ++i) {
      if (w[i] == kPosInf) c.emplace_back(0.0f, static_cast<TokenId>(i));
    }
    sorted = true;  // equal logits in id order
    if (top_k > 0 && static_cast<size_t>(top_k) < c.size()) c.resize(static_cast<size_t>(top_k));
  } else if (top_k > 0 && top_k < n_vocab_) {
    // top-k while scanning: a heap of the k best with the worst on top.
    // Ids come in ascending order, so once the heap is full a token must beat
    // the worst logit strictly (a tie loses on the id): one comparison for
    // most tokens, which also drops NaN and -inf.
    const size_t k = static_cast<size_t>(top_k);
    float floor = kNegInf;
    for (int64_t i = 0; i < n_vocab_; ++i) {
      if (!(w[i] > floor)) continue;
      if (c.size() == k) {
        std::pop_heap(c.begin(), c.end(), Better{});
        c.pop_back();
      }
      c.emplace_back(w[i], static_cast<TokenId>(i));
      std::push_heap(c.begin(), c.end(), Better{});
      if (c.size() == k) floor = c.front().first;
    }
    std::sort_heap(c.begin(), c.end(), Better{});
    sorted = true;
  } else {
    for (int64_t i = 0; i < n_vocab_; ++i) {
      if (w[i] > kNegInf) c.emplace_back(w[i], static_cast<TokenId>(i));
    }
  }
  if (params_.typical_p < 1.0f && c.size() > 1) apply_typical(sorted);
  if ((params_.top_p < 1.0f || params_.min_p > 0.0f) && c.size() > 1) apply_top_p_min_p(sorted);
  return kNoToken;
}

TokenId Sampler::sample(std::span<const float> logits) {
  bool sorted = false;
  const TokenId best = filter(logits, sorted);
  return best != kNoToken ? best : draw(sorted);
}

TokenId Sampler::sample(std::span<const float> logits, TokenDistribution& distribution) {
  bool sorted = false;
  const TokenId best = filter(logits, sorted);
  if (best != kNoToken) {
    distribution.probs.assign(1, {best, 1.0});
    return best;
  }
  write_distribution(sorted, distribution);
  return draw(sorted);
}

TokenId Sampler::sample_speculative(std::span<const float> logits, TokenId draft,
                                    const TokenDistribution& q) {
  bool sorted = false;
  const TokenId best = filter(logits, sorted);
  if (best != kNoToken) return best;
  const Candidates& c = candidates_;
  const double maxl = max_logit(c, sorted);
  const double total = total_weight(maxl);
  double p_draft = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (c[i].second == draft) p_draft = weight(i, maxl) / total;
  }
  // u < p / q, written without the division (q may be 0 for a drafter that
  // misreports: the ratio is then infinite and the draft kept).
  if (next_uniform() * q.prob(draft) < p_draft) return draft;
  // The residual in the canonical descending order, so its walk is the
  // draw's; the draft itself has p < q there and weighs nothing.
  double residual_total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    residual_total += std::max(0.0, weight(i, maxl) / total - q.prob(c[i].second));
  }
  // p <= q everywhere means p = q up to rounding, where a rejection is
  // only rounding too: draw from p.
  if (!(residual_total > 0)) return draw(sorted);
  const double target = next_uniform() * residual_total;
  double cum = 0;
  TokenId last_positive = kNoToken;
  const size_t at = walk_descending(candidates_, sorted, [&](size_t i) {
    const double r = std::max(0.0, weight(i, maxl) / total - q.prob(c[i].second));
    if (r > 0) last_positive = c[i].second;
    cum += r;
    return cum >= target;
  });
  return at < c.size() ? c[at].second : last_positive;
}

double TokenDistribution::prob(TokenId id) const {
  const auto it = std::ranges::lower_bound(probs, id, {}, &std::pair<TokenId, double>::first);
  return it != probs.end() && it->first == id ? it->second : 0.0;
}

double token_probability(std::span<const float> logits, TokenId id, double temperature) {
  if (id < 0 || static_cast<size_t>(id) >= logits.size())
    throw Error(
        strfmt("token_probability: token id %d is out of range [0, %zu)", id, logits.size()));
  float maxl = kNegInf;
  for (const float l : logits) {
    if (l > maxl) maxl = l;  // NaN never compares greater
  }
  const float li = logits[static_cast<size_t>(id)];
  if (!(li > kNegInf)) return 0.0;
  if (maxl == kPosInf) {
    if (li != kPosInf) return 0.0;
    const auto n_inf = std::count(logits.begin(), logits.end(), kPosInf);
    return 1.0 / static_cast<double>(n_inf);
  }
  const double beta = 1.0 / temperature;
  double denom = 0;
  for (const float l : logits) {
    if (l > kNegInf) denom += std::exp(beta * (static_cast<double>(l) - maxl));
  }
  return std::exp(beta * (static_cast<double>(li) - maxl)) / denom;
}

SamplingParams generation_sampling(SamplingParams params, const Vocab& vocab, bool ignore_eos) {
  for (const TokenId id : vocab.suppress_tokens) params.suppressed.push_back(id);
  if (ignore_eos) {
    for (const TokenId id : vocab.end_of_generation) params.suppressed.push_back(id);
  }
  return params;
}

}  // namespace cortiq
