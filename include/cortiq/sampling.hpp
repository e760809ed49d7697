// The options of the sampler (runtime/sampler.hpp runs them) and the
// distributions it draws from.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "cortiq/types.hpp"

namespace cortiq {

struct SamplingParams {
  float temperature = 0.8f;        // 0: greedy; must be >= 0
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // (0, 1]; 1: off
  float min_p = 0.05f;             // [0, 1]; 0: off
  float typical_p = 1.0f;          // (0, 1]; 1: off
  float repeat_penalty = 1.0f;     // > 0; 1: off (logit > 0 divided, < 0 multiplied)
  float presence_penalty = 0.0f;   // subtracted once from every seen token
  float frequency_penalty = 0.0f;  // subtracted per occurrence
  int32_t penalty_last_n = 64;     // window of the penalties; 0: off, -1: all accepted tokens
  std::vector<std::pair<TokenId, float>> logit_bias;  // added to the logit (-inf bans)
  std::vector<TokenId> suppressed;                    // never sampled
  uint64_t seed = 0;

  // Throws cortiq::Error naming the first invalid option ("temperature must
  // be >= 0, got -1", "top_p must be in (0, 1], got 1.5", ...), and ids in
  // logit_bias / suppressed outside [0, n_vocab).
  void validate(int64_t n_vocab) const;
};

// A distribution over tokens: (id, probability) in ascending id order, the
// probabilities summing to 1 up to rounding. Tokens not listed have 0.
struct TokenDistribution {
  std::vector<std::pair<TokenId, double>> probs;
  double prob(TokenId id) const;
};

}  // namespace cortiq
