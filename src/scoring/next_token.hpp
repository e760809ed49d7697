// The next-token distribution after a prompt, as `cortiq explain` shows it:
// the K most likely tokens with their logits and probabilities; and a chosen
// token's log-probability, as the server reports it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/log_softmax.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::scoring {

struct TokenChoice {
  TokenId id = 0;
  float logit = 0.0f;
  double log_prob = 0.0;     // log-softmax in double
  double probability = 0.0;  // exp(log_prob)
};

struct NextTokenDistribution {
  std::vector<TokenChoice> top;  // most likely first; equal logits: lower id first
  double entropy = 0.0;          // nats, over the whole vocabulary
};

// The k (at most the vocabulary) most likely tokens of one row of logits,
// most likely first, equal logits lower id first; their log-probabilities
// come from `stats`, the row's log-softmax.
std::vector<TokenChoice> top_tokens(std::span<const float> logits, const kernels::LogSoftmax& stats,
                                    size_t k);

// A chosen token's log-probability at temperature 1 and the `top` most
// likely tokens (ties to the lower id), as OpenAI's logprobs report them.
struct ChosenTokenLogProb {
  double log_prob = 0.0;
  std::vector<TokenChoice> top;
};
ChosenTokenLogProb chosen_token_log_prob(std::span<const float> logits, TokenId id, size_t top);

// The top k (at most the vocabulary) of one row of logits. The first is the
// greedy choice (the lowest id among equal maxima, as greedy sampling).
NextTokenDistribution next_token_distribution(std::span<const float> logits, size_t k);

}  // namespace cortiq::scoring
