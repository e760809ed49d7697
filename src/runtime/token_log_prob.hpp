// The most likely tokens of a row of logits and a chosen token's
// log-probability among them: what a generation reports per token
// (OpenAI's logprobs) and what `cortiq explain` shows.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "cortiq/types.hpp"
#include "kernels/cpu/log_softmax.hpp"

namespace cortiq {

struct TokenChoice {
  TokenId id = 0;
  float logit = 0.0f;
  double log_prob = 0.0;     // log-softmax in double
  double probability = 0.0;  // exp(log_prob)
};

// The k (at most the vocabulary) most likely tokens of one row of logits,
// most likely first, equal logits lower id first; their log-probabilities
// come from `stats`, the row's log-softmax.
std::vector<TokenChoice> top_tokens(std::span<const float> logits, const kernels::LogSoftmax& stats,
                                    size_t k);

// A chosen token's log-probability at temperature 1 and the `top` most
// likely tokens (ties to the lower id), as OpenAI's logprobs report them.
struct ChosenTokenLogProb {
  TokenId id = 0;
  double log_prob = 0.0;
  std::vector<TokenChoice> top;
};
ChosenTokenLogProb chosen_token_log_prob(std::span<const float> logits, TokenId id, size_t top);

}  // namespace cortiq
