// Follows an output through a grammar byte by byte: every parse the text so
// far allows is kept as a stack of grammar positions (a pushdown automaton
// run on all parses at once, as llama.cpp's grammar sampler does), so the
// question "may this byte come next?" is answered for all of them at once.
// Bytes are UTF-8; a character split across tokens is followed part by
// part, and a partial character is alive while some character that starts
// with it can still be matched.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.hpp"

namespace cortiq::grammar {

// Where an output stands in a grammar.
struct MatchState {
  // Grammar positions (CompiledGrammar slots), innermost last; the top of
  // each is a character set. An empty stack: the grammar is complete. Sorted
  // and unique; no stack at all: the output has left the grammar.
  std::vector<std::vector<uint32_t>> stacks;
  uint32_t partial = 0;  // the bits of a partly read UTF-8 character
  uint8_t pending = 0;   // its continuation bytes still to come (0: none)
  uint8_t length = 0;    // its length in bytes

  bool alive() const { return !stacks.empty(); }
  bool operator==(const MatchState&) const = default;
};

// The grammar with each symbol at a numbered slot (an alternative's symbols,
// then an end slot), so a parse position is one number and moving past a
// symbol adds one.
class CompiledGrammar {
 public:
  explicit CompiledGrammar(Grammar grammar);

  // The stacks before any output.
  MatchState initial() const;
  // Moves the state past one output byte; false (the state then holds no
  // stacks) when the byte leaves the grammar.
  bool advance(MatchState& state, uint8_t byte) const;
  // The output so far is a whole sentence of the grammar.
  bool can_end(const MatchState& state) const;
  const Grammar& grammar() const { return grammar_; }

 private:
  enum class SlotKind : uint8_t { chars, rule, end };
  struct Slot {
    SlotKind kind;
    uint32_t index;  // the char set or the rule
  };

  // Appends the stacks that `stack` stands for once the rules at its top
  // are opened down to a character set (or it is complete). Throws
  // cortiq::Error past a bound on the parses at once (too ambiguous).
  void expand(std::vector<uint32_t> stack, std::vector<std::vector<uint32_t>>& out,
              size_t depth = 0) const;
  // Moves every stack past a whole character.
  void step(MatchState& state, uint32_t cp) const;
  // Whether some character that begins with the partial bytes can be matched.
  bool partial_possible(const MatchState& state) const;

  Grammar grammar_;
  std::vector<Slot> slots_;
  std::vector<std::vector<uint32_t>> starts_;  // per rule, the first slot of each alternative
};

// One output's walk through a grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Feeds output bytes. When they leave the grammar: false, and the state
  // is as it was before the call.
  bool accept(std::string_view bytes);
  bool can_end() const { return grammar_->can_end(state_); }
  void reset() { state_ = grammar_->initial(); }
  const MatchState& state() const { return state_; }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  MatchState state_;
};

}  // namespace cortiq::grammar
