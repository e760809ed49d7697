// Which tokens may come next under a grammar. The vocabulary's pieces sit
// in a byte trie walked once per step from the matcher's state, so the
// bytes a thousand tokens share are matched once and a dead prefix cuts
// off every token below it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/byte_trie.hpp"
#include "cortiq/types.hpp"
#include "grammar/grammar_matcher.hpp"
#include "grammar/state_cache.hpp"

namespace cortiq::grammar {

class TokenMask {
 public:
  // pieces[id]: the bytes token id writes ("" for control tokens: never
  // allowed). end_tokens: the ids that end a generation, allowed exactly
  // where the grammar may end.
  TokenMask(const std::vector<std::string>& pieces, std::vector<TokenId> end_tokens);

  // allowed[id] (resized to the vocabulary): 1 for each token whose bytes
  // keep the output inside the grammar from `state`, else 0. With
  // drop_leading_space a piece's first byte, when a space, writes nothing
  // (a SentencePiece output's first token shows without its space).
  void compute(const CompiledGrammar& grammar, const MatchState& state,
               std::vector<uint8_t>& allowed, bool drop_leading_space = false) const;
  // The same from a state of `cache`, whose moves it reads and adds to:
  // what a generation uses, step after step.
  void compute(StateCache& cache, uint32_t state, std::vector<uint8_t>& allowed,
               bool drop_leading_space = false) const;
  size_t n_vocab() const { return n_vocab_; }

 private:
  ByteTrie trie_;  // the pieces of the tokens that write something (not end tokens)
  std::vector<TokenId> end_tokens_;
  size_t n_vocab_;
};

}  // namespace cortiq::grammar
