// Picks the next token from a row of logits.
//
// The chain, in the peer's order: logit bias and suppressed tokens,
// repetition / presence / frequency penalties over the last penalty_last_n
// accepted tokens, then either greedy (temperature 0: argmax, ties to the
// lowest id) or top-k -> typical-p -> top-p -> min-p -> temperature ->
// softmax -> a draw from the seeded SplitMix64 stream. The same params and
// seed give the same tokens; reset() restarts the stream.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cortiq/sampling.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {

class Sampler {
 public:
  // Validates params (see SamplingParams::validate).
  Sampler(SamplingParams params, int64_t n_vocab);

  // New parameters; the random stream restarts from params.seed and the
  // penalty history is cleared.
  void reset(SamplingParams params);
  const SamplingParams& params() const { return params_; }

  // Adds a token to the penalty history (prompt tokens and generated ones).
  void accept(TokenId id);
  void clear_history();

  // The next token for this row of n_vocab logits (not modified). Throws
  // cortiq::Error when every token is banned. NaN logits count as -inf; +inf
  // logits leave only the +inf tokens, as equals. Every non-greedy call takes
  // exactly one number from the stream (even when one token is left);
  // greedy takes none.
  TokenId sample(std::span<const float> logits);
  // The same, also writing the distribution the token was drawn from: the
  // probabilities after every penalty and filter (temperature 0: the chosen
  // token alone).
  TokenId sample(std::span<const float> logits, TokenDistribution& distribution);

  // Speculative sampling (Leviathan et al. 2023; Chen et al. 2023): `draft`
  // was drawn from q by a drafter; with p the distribution sample() draws
  // from for these logits, the draft is kept with probability
  // min(1, p(draft) / q(draft)), and otherwise a token is drawn from the
  // residual max(0, p - q), renormalised. Whatever q is, the token returned
  // is distributed as sample()'s. Takes one number from the stream, two
  // when the draft is rejected; greedy (temperature 0) takes none and keeps
  // the draft exactly when it is the best token.
  TokenId sample_speculative(std::span<const float> logits, TokenId draft,
                             const TokenDistribution& q);

 private:
  SamplingParams params_;
  int64_t n_vocab_;
  uint64_t rng_state_;  // SplitMix64 state
  std::deque<TokenId> history_;
  // Reused between calls so sampling does not allocate once warm.
  std::vector<float> work_logits_;
  std::vector<std::pair<float, TokenId>> candidates_;  // (logit, id)
  // Occurrences of each token in history_ (the penalty window), kept in step
  // with accept() so a penalty pass costs O(window), not O(n_vocab).
  std::vector<int32_t> counts_;
  // Typical-p work: (|surprise - entropy|, probability, rank) per candidate.
  struct Typical {
    double key;
    double prob;
    uint32_t rank;
  };
  std::vector<Typical> typical_;

  // Bias, suppression, penalties and the filters: returns the best token
  // for greedy sampling, else kNoToken with candidates_ holding the kept
  // tokens (sorted says in which canonical order).
  TokenId filter(std::span<const float> logits, bool& sorted);
  // exp((logit - max) / temperature) of candidate i, and their sum.
  double weight(size_t i, double max_logit) const;
  double total_weight(double max_logit) const;
  void write_distribution(bool sorted, TokenDistribution& out);
  void apply_penalties(float* logits);
  void apply_typical(bool& sorted);
  void apply_top_p_min_p(bool& sorted);
  TokenId draw(bool& sorted);
  double next_uniform();
};

// What a generation samples with: the params, the model's own suppressed
// tokens (Vocab::suppress_tokens) added, and with ignore_eos every
// end-of-generation token of the vocabulary too.
SamplingParams generation_sampling(SamplingParams params, const Vocab& vocab, bool ignore_eos);

// Softmax probability of token `id` in a row of logits divided by
// `temperature` (double precision): the per-token confidence of generation,
// with the model's calibration temperature (`cortiq calibrate --write`).
double token_probability(std::span<const float> logits, TokenId id, double temperature = 1.0);

}  // namespace cortiq
