// Prompt lookup drafting (cortiq.hpp's PromptLookupDrafter): the output of
// a model often repeats stretches of its prompt or of itself, and where the
// last few tokens occurred before, what followed them then is a cheap
// guess of what follows now.
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"

namespace cortiq {

PromptLookupDrafter::PromptLookupDrafter(int64_t ngram_min, int64_t ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
    throw Error("prompt lookup needs 1 <= n-gram min <= n-gram max <= 64 (got " +
                std::to_string(ngram_min) + " and " + std::to_string(ngram_max) + ")");
  }
}

std::shared_ptr<Drafter> PromptLookupDrafter::for_another_sequence() const {
  return std::make_shared<PromptLookupDrafter>(*this);  // it keeps no state
}

std::vector<TokenId> PromptLookupDrafter::draft(std::span<const TokenId> context,
                                                size_t max_tokens) {
  if (max_tokens == 0 || context.size() < 2) return {};
  const auto longest = std::min<size_t>(static_cast<size_t>(ngram_max_), context.size() - 1);
  for (size_t n = longest; n >= static_cast<size_t>(ngram_min_); --n) {
    const auto tail = context.last(n);
    // The latest earlier occurrence: the most recent text is the likeliest
    // to be copied again. It starts at most size - n - 1, so at least one
    // token follows it.
    for (size_t start = context.size() - n; start-- > 0;) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + static_cast<ptrdiff_t>(start))) {
        continue;
      }
      const size_t from = start + n;
      const size_t count = std::min(max_tokens, context.size() - from);
      return {context.begin() + static_cast<ptrdiff_t>(from),
              context.begin() + static_cast<ptrdiff_t>(from + count)};
    }
    if (n == 1) break;
  }
  return {};
}

}  // namespace cortiq
