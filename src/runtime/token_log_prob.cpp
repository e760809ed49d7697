#include "runtime/token_log_prob.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace cortiq {

std::vector<TokenChoice> top_tokens(std::span<const float> logits, const kernels::LogSoftmax& stats,
                                    size_t k) {
  std::vector<TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), TokenId{0});
  k = std::min(k, ids.size());
  auto before = [&](TokenId a, TokenId b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), before);
  std::vector<TokenChoice> top;
  for (size_t i = 0; i < k; ++i) {
    const float logit = logits[static_cast<size_t>(ids[i])];
    const double lp = stats.log_prob(logit);
    top.push_back({ids[i], logit, lp, std::exp(lp)});
  }
  return top;
}

ChosenTokenLogProb chosen_token_log_prob(std::span<const float> logits, TokenId id, size_t top) {
  const kernels::LogSoftmax stats = kernels::log_softmax(logits);
  ChosenTokenLogProb out;
  out.id = id;
  out.log_prob = stats.log_prob(logits, id);
  if (top > 0) out.top = top_tokens(logits, stats, top);
  return out;
}

}  // namespace cortiq
