// The next-token distribution after a prompt, as `cortiq explain` shows it:
// the K most likely tokens (runtime/token_log_prob.hpp) with their logits
// and probabilities, and the row's entropy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/token_log_prob.hpp"

namespace cortiq::scoring {

struct NextTokenDistribution {
  std::vector<TokenChoice> top;  // most likely first; equal logits: lower id first
  double entropy = 0.0;          // nats, over the whole vocabulary
};

// The top k (at most the vocabulary) of one row of logits. The first is the
// greedy choice (the lowest id among equal maxima, as greedy sampling).
NextTokenDistribution next_token_distribution(std::span<const float> logits, size_t k);

}  // namespace cortiq::scoring
