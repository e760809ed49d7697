// Loop stop: ends a generation whose tail keeps repeating one block of
// tokens, keeping a single copy of the block.
//
// A loop is a block of p tokens (1 <= p <= max_period) that occurs
// min_repeats times in a row at the end of the generated tokens, spanning at
// least min_tokens tokens. Tokens that repeat the block just before them are
// held back (not released to the user) until the repetition breaks — then
// they are released — or a loop is confirmed — then they are dropped, so
// the output holds one copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cortiq/loop_stop.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {

class LoopDetector {
 public:
  // Throws cortiq::Error unless max_period >= 1 and min_repeats >= 2
  // (min_tokens <= 0: no minimum).
  explicit LoopDetector(LoopStopParams params = {});

  struct Step {
    size_t release = 0;  // how many more generated tokens may now be released
    bool loop = false;   // a loop was confirmed: stop; held tokens are dropped
    size_t keep = 0;     // on a loop: how many generated tokens to keep (through one copy)
  };
  // Adds the next generated token. After a loop, further pushes change
  // nothing and return {0, true, keep} again.
  Step push(TokenId id);
  // At the end of a generation that did not loop: how many held tokens to release.
  size_t flush();
  void reset();

 private:
  LoopStopParams params_;
  std::vector<TokenId> tokens_;
  size_t released_ = 0;
  // runs_[p - 1]: how many tokens at the end each equal the token p before
  // (the run of period p beyond its first copy).
  std::vector<size_t> runs_;
  bool looped_ = false;
  size_t keep_ = 0;
};

}  // namespace cortiq
