// The matcher's states met so far, numbered, with the state each byte
// leads to: a deterministic automaton built lazily over the pushdown
// matcher. The token mask walks the vocabulary's trie once per step; with
// the moves cached, a trie node costs a table lookup instead of a copy and
// a step of every parse, and most nodes (every letter inside a JSON string,
// say) lead to a state already met. Bounded: past kMaxStates it starts
// over (the caller clears it when full()).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_matcher.hpp"

namespace cortiq::grammar {

class StateCache {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr size_t kMaxStates = 4096;

  explicit StateCache(const CompiledGrammar& grammar) : grammar_(grammar) {}

  // The number of a state (a new one is added). Numbers hold until clear().
  uint32_t intern(const MatchState& state);
  // The state after `byte` from state `from`, or kDead when the byte
  // leaves the grammar.
  int32_t next(uint32_t from, uint8_t byte);
  const MatchState& state(uint32_t id) const { return states_[id]; }
  bool can_end(uint32_t id) const { return can_end_[id] != 0; }
  // Whether the cache is full (the caller starts it over between walks).
  bool full() const { return states_.size() >= kMaxStates; }
  void clear();

 private:
  struct Hash {
    size_t operator()(const MatchState& s) const;
  };
  static constexpr int32_t kUnknown = -2;

  const CompiledGrammar& grammar_;
  std::unordered_map<MatchState, uint32_t, Hash> ids_;
  std::vector<MatchState> states_;
  std::vector<uint8_t> can_end_;
  std::vector<std::array<int32_t, 256>> moves_;
};

}  // namespace cortiq::grammar
