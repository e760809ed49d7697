// A context-free grammar over Unicode code points: what constrained
// decoding keeps a model's output inside. gbnf_parser.hpp reads it from
// the GBNF notation of llama.cpp's grammars; grammar_matcher.hpp follows
// an output through it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cortiq::grammar {

// A set of code points: the union of inclusive ranges, or (negated)
// everything but them. "Any character" is a negated empty set.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // [first, last], sorted, disjoint
  bool negated = false;

  bool contains(uint32_t cp) const;
  // Whether a code point of [first, last] is in the set.
  bool intersects(uint32_t first, uint32_t last) const;
  // Sorts and merges the ranges (what contains() and intersects() expect).
  void normalize();
  bool operator==(const CharSet&) const = default;
};

// One symbol of an alternative: a character from a set, or a rule.
struct Symbol {
  enum class Kind : uint8_t { chars, rule };
  Kind kind = Kind::chars;
  uint32_t index = 0;  // into Grammar::char_sets or Grammar::rules
  bool operator==(const Symbol&) const = default;
};

using Alternative = std::vector<Symbol>;  // empty: matches the empty string

struct Rule {
  // As written, or "<rule>_<n>" for the rules the parser makes of groups
  // and repetitions.
  std::string name;
  std::vector<Alternative> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<CharSet> char_sets;
  uint32_t root = 0;
};

// Throws cortiq::Error when a rule can reach itself before matching a
// character (left recursion: "expr ::= expr "+" term"), which a matcher
// that expands leftmost symbols would follow forever; the message names
// the rules of the cycle.
void check_no_left_recursion(const Grammar& grammar);

}  // namespace cortiq::grammar
