#include "scoring/next_token.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/log_softmax.hpp"

namespace cortiq::scoring {

NextTokenDistribution next_token_distribution(std::span<const float> logits, size_t k) {
  const kernels::LogSoftmax stats = kernels::log_softmax(logits);
  NextTokenDistribution out;
  for (const float l : logits) {
    const double lp = stats.log_prob(l);
    if (lp > -INFINITY) out.entropy -= std::exp(lp) * lp;
  }
  out.top = top_tokens(logits, stats, k);
  return out;
}

}  // namespace cortiq::scoring
