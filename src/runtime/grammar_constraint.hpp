// Sampling under a grammar: one output's walk through it, and each step's
// logits with the tokens it does not allow masked out. Session::generate
// and the server's scheduler both sample through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cortiq/cortiq.hpp"
#include "grammar/grammar_matcher.hpp"

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
  size_t accepted() const { return accepted_; }

 private:
  const Model& model_;
  grammar::GrammarMatcher matcher_;
  std::vector<uint8_t> banned_;
  std::vector<uint8_t> allowed_;
  std::vector<float> masked_;
  size_t accepted_ = 0;
};

}  // namespace cortiq
