#include "grammar/grammar_matcher.hpp"

#include <algorithm>
#include <utility>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq::grammar {

namespace {

// The least code point of each UTF-8 length (shorter forms are overlong).
constexpr uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
// Bounds on what one step may open: an ambiguous grammar (a repetition of
// something that may be empty, ("a"?){0,5000}) keeps that many parses at
// once, and every token of the mask pays for them.
constexpr size_t kMaxStacks = 10000;
constexpr size_t kMaxDepth = 1000;

[[noreturn]] void too_ambiguous() {
  throw Error(
      strfmt("the grammar allows more than %zu parses at once (a repetition of something "
             "that may be empty?); write it so that each text has fewer readings",
             kMaxStacks));
}

void sort_unique(std::vector<std::vector<uint32_t>>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar grammar) : grammar_(std::move(grammar)) {
  if (grammar_.root >= grammar_.rules.size()) throw Error("the grammar's root rule is missing");
  // What the parser guarantees, checked again for grammars built by hand.
  for (CharSet& set : grammar_.char_sets) set.normalize();
  starts_.resize(grammar_.rules.size());
  for (size_t r = 0; r < grammar_.rules.size(); ++r) {
    for (const Alternative& alt : grammar_.rules[r].alternatives) {
      starts_[r].push_back(static_cast<uint32_t>(slots_.size()));
      for (const Symbol& s : alt) {
        const bool chars = s.kind == Symbol::Kind::chars;
        if (s.index >= (chars ? grammar_.char_sets.size() : grammar_.rules.size())) {
          throw Error("rule '" + grammar_.rules[r].name + "' refers to a symbol that is missing");
        }
        slots_.push_back({chars ? SlotKind::chars : SlotKind::rule, s.index});
      }
      slots_.push_back({SlotKind::end, 0});
    }
  }
  // A rule without alternatives matches nothing; the matcher would
  // otherwise treat it as a dead end silently.
  for (const Rule& rule : grammar_.rules) {
    if (rule.alternatives.empty()) throw Error("rule '" + rule.name + "' has no alternatives");
  }
  check_no_left_recursion(grammar_);
}

void CompiledGrammar::expand(std::vector<uint32_t> stack, std::vector<std::vector<uint32_t>>& out,
                             size_t depth) const {
  if (depth > kMaxDepth || out.size() >= kMaxStacks) too_ambiguous();
  while (!stack.empty()) {
    const uint32_t top = stack.back();
    const Slot& slot = slots_[top];
    if (slot.kind == SlotKind::chars) break;
    stack.pop_back();
    if (slot.kind == SlotKind::end) continue;  // the alternative is done: back to its caller
    // A rule: where to go on after it (left out when that is its caller's
    // end, so repetitions do not pile up finished positions), then each of
    // its alternatives opened in turn. check_no_left_recursion guarantees
    // this reaches a character set or the stack's bottom.
    if (slots_[top + 1].kind != SlotKind::end) stack.push_back(top + 1);
    const std::vector<uint32_t>& starts = starts_[slot.index];
    for (size_t a = 0; a + 1 < starts.size(); ++a) {
      std::vector<uint32_t> branch = stack;
      branch.push_back(starts[a]);
      expand(std::move(branch), out, depth + 1);
    }
    stack.push_back(starts.back());
  }
  out.push_back(std::move(stack));
}

MatchState CompiledGrammar::initial() const {
  MatchState state;
  for (const uint32_t start : starts_[grammar_.root]) expand({start}, state.stacks);
  sort_unique(state.stacks);
  return state;
}

void CompiledGrammar::step(MatchState& state, uint32_t cp) const {
  std::vector<std::vector<uint32_t>> next;
  for (const std::vector<uint32_t>& stack : state.stacks) {
    if (stack.empty()) continue;  // complete: no character may follow
    const uint32_t top = stack.back();
    if (!grammar_.char_sets[slots_[top].index].contains(cp)) continue;
    std::vector<uint32_t> moved = stack;
    moved.back() = top + 1;
    expand(std::move(moved), next);
  }
  sort_unique(next);
  state.stacks = std::move(next);
}

bool CompiledGrammar::partial_possible(const MatchState& state) const {
  // The characters that begin with the bytes so far: the unread bits free.
  const unsigned free_bits = 6u * state.pending;
  const uint32_t first = std::max(state.partial << free_bits, kLeast[state.length]);
  const uint32_t last = std::min((state.partial << free_bits) | ((1u << free_bits) - 1), 0x10FFFFu);
  if (first > last) return false;
  for (const std::vector<uint32_t>& stack : state.stacks) {
    if (stack.empty()) continue;
    const CharSet& set = grammar_.char_sets[slots_[stack.back()].index];
    // Surrogates are never characters: look at what lies around them.
    if (first < 0xD800 && set.intersects(first, std::min(last, 0xD7FFu))) return true;
    if (last > 0xDFFF && set.intersects(std::max(first, 0xE000u), last)) return true;
  }
  return false;
}

bool CompiledGrammar::advance(MatchState& state, uint8_t byte) const {
  auto die = [&state] {
    state.stacks.clear();
    return false;
  };
  if (state.pending == 0) {
    if (byte < 0x80) {
      step(state, byte);
      return state.alive();
    }
    // A lead byte: 110xxxxx, 1110xxxx, 11110xxx (C0, C1 and F5-FF start
    // nothing valid).
    if (byte >= 0xC2 && byte < 0xE0) {
      state.length = 2;
      state.partial = byte & 0x1Fu;
    } else if (byte >= 0xE0 && byte < 0xF0) {
      state.length = 3;
      state.partial = byte & 0x0Fu;
    } else if (byte >= 0xF0 && byte < 0xF5) {
      state.length = 4;
      state.partial = byte & 0x07u;
    } else {
      return die();
    }
    state.pending = static_cast<uint8_t>(state.length - 1);
    return partial_possible(state) || die();
  }
  if ((byte & 0xC0) != 0x80) return die();
  state.partial = (state.partial << 6) | (byte & 0x3Fu);
  if (--state.pending > 0) return partial_possible(state) || die();
  const uint32_t cp = state.partial;
  const uint8_t length = state.length;
  state.partial = 0;
  state.length = 0;
  if (cp < kLeast[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return die();
  step(state, cp);
  return state.alive();
}

bool CompiledGrammar::can_end(const MatchState& state) const {
  return state.pending == 0 && std::any_of(state.stacks.begin(), state.stacks.end(),
                                           [](const auto& stack) { return stack.empty(); });
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), state_(grammar_->initial()) {}

bool GrammarMatcher::accept(std::string_view bytes) {
  MatchState next = state_;
  for (const char c : bytes) {
    if (!grammar_->advance(next, static_cast<uint8_t>(c))) return false;
  }
  state_ = std::move(next);
  return true;
}

}  // namespace cortiq::grammar
