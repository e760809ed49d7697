// Sampling under a grammar: one output's walk through it, and each step's
// logits with the tokens it does not allow masked out. The generation loop
// (generation.hpp) samples through it.
//
// Cost: the matcher's states are numbered as they are met, with the state
// each byte leads to (grammar/state_cache.hpp), so walking the vocabulary's
// trie is a table lookup per node; and the mask of a state met before (the
// inside of a JSON string, after every token of it) is reused whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "cortiq/cortiq.hpp"
#include "grammar/state_cache.hpp"

namespace cortiq {

class GrammarConstraint {
 public:
  // `params`: the sampling of the output, whose banned tokens (suppressed,
  // biased to -inf) do not count as a way to go on.
  GrammarConstraint(const Model& model, std::shared_ptr<const grammar::CompiledGrammar> grammar,
                    const SamplingParams& params);

  // The logits with every token the grammar does not allow next at -inf,
  // to sample from. Empty when no token may be sampled and the output is a
  // whole sentence of the grammar (the generation is complete); throws
  // cortiq::Error when none may and it is not (a dead end).
  std::span<const float> mask(std::span<const float> logits);
  // Moves past the token sampled from mask()'s logits.
  void accept(TokenId id);

 private:
  // The tokens allowed from the current state, one bit each.
  const std::vector<uint64_t>& allowed_bits(bool drop_space);

  static constexpr size_t kMaxMasks = 64;  // masks kept (16 KB each at 128k tokens)

  const Model& model_;
  std::shared_ptr<const grammar::CompiledGrammar> grammar_;
  grammar::StateCache states_;
  uint32_t state_;                                             // where the output stands
  std::unordered_map<uint64_t, std::vector<uint64_t>> masks_;  // by state and drop_space
  std::vector<uint8_t> banned_;
  std::vector<uint8_t> allowed_;
  std::vector<float> masked_;
  size_t accepted_ = 0;
};

}  // namespace cortiq
