// What the generation loop (generation.hpp) asks of speculative decoding:
// a drafter's drafts for a round, and the adaptive depth.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/sampler.hpp"

namespace cortiq {

class Drafter;

struct DraftRequest {
  int64_t room = 0;         // drafts at most (depth, budget and context already applied)
  int64_t draft_min = 0;    // fewer than this: none
  bool same_draws = false;  // sampling: draft greedily (see SpeculativeOptions)
  int64_t n_vocab = 0;
};

// The drafts to forward after `context` (whose last token is the one just
// sampled). When the drafter samples them (a sampling temperature, a
// drafter that samples, !same_draws), `q` receives the distribution of
// each; otherwise `q` is left empty. A guess outside the vocabulary ends
// the draft there.
std::vector<TokenId> propose_drafts(Drafter& drafter, std::span<const TokenId> context,
                                    const DraftRequest& request, const SamplingParams& sampling,
                                    std::vector<TokenDistribution>& q);

// The depth of the next round after one that forwarded `drafted` drafts and
// kept `kept`: as many as it kept plus one, or twice `depth` (at most
// draft_max) after a round kept whole — so a drafter that is seldom right
// costs about one extra row per pass.
// The sampler a drafter samples its drafts with: the target's settings on a
// stream of its own, fixed by the seed and the context's length (a seeded
// run drafts the same tokens however often the drafter was used before),
// its penalty window holding what the target's sampler holds.
Sampler draft_sampler(const SamplingParams& params, std::span<const TokenId> context,
                      int64_t n_vocab);

int64_t next_draft_depth(int64_t kept, int64_t drafted, int64_t depth, int64_t draft_max);

}  // namespace cortiq
