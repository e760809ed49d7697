#include "runtime/speculation.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/random.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "runtime/sampler.hpp"

namespace cortiq {

std::vector<TokenId> propose_drafts(Drafter& drafter, std::span<const TokenId> context,
                                    const DraftRequest& request, const SamplingParams& sampling,
                                    std::vector<TokenDistribution>& q) {
  q.clear();
  if (request.room <= 0) return {};
  const auto room = static_cast<size_t>(request.room);
  const bool sampled = sampling.temperature > 0 && drafter.samples() && !request.same_draws;
  std::vector<TokenId> draft;
  if (sampled) {
    SampledDraft d = drafter.draft_sampled(context, room, sampling);
    if (d.distributions.size() != d.tokens.size()) {
      throw Error(strfmt("the drafter gave %zu tokens but %zu distributions", d.tokens.size(),
                         d.distributions.size()));
    }
    draft = std::move(d.tokens);
    q = std::move(d.distributions);
  } else {
    draft = drafter.draft(context, room);
  }
  draft.resize(std::min(draft.size(), room));
  const auto bad = std::ranges::find_if(
      draft, [&](TokenId t) { return t < 0 || t >= static_cast<TokenId>(request.n_vocab); });
  draft.erase(bad, draft.end());
  if (static_cast<int64_t>(draft.size()) < std::max<int64_t>(request.draft_min, 1)) draft.clear();
  if (sampled) q.resize(draft.size());
  return draft;
}

Sampler draft_sampler(const SamplingParams& params, std::span<const TokenId> context,
                      int64_t n_vocab) {
  SamplingParams own = params;
  own.seed = SplitMix64::mix(params.seed ^ SplitMix64::mix(context.size()));
  Sampler sampler(std::move(own), n_vocab);
  const size_t window = params.penalty_last_n < 0
                            ? context.size()
                            : std::min(context.size(), static_cast<size_t>(params.penalty_last_n));
  for (const TokenId id : context.last(window)) sampler.accept(id);
  return sampler;
}

int64_t next_draft_depth(int64_t kept, int64_t drafted, int64_t depth, int64_t draft_max) {
  return kept == drafted ? std::min(draft_max, 2 * depth) : kept + 1;
}

}  // namespace cortiq
