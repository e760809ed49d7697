#include "grammar/grammar.hpp"

#include <algorithm>

#include "base/error.hpp"

namespace cortiq::grammar {

bool CharSet::contains(uint32_t cp) const {
  // The first range that ends at or after cp is the only one that can hold it.
  const auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                                   [](const auto& range, uint32_t c) { return range.second < c; });
  const bool inside = it != ranges.end() && it->first <= cp;
  return inside != negated;
}

bool CharSet::intersects(uint32_t first, uint32_t last) const {
  if (!negated) {
    const auto it =
        std::lower_bound(ranges.begin(), ranges.end(), first,
                         [](const auto& range, uint32_t c) { return range.second < c; });
    return it != ranges.end() && it->first <= last;
  }
  // Negated: [first, last] meets the set unless the ranges cover it whole.
  uint32_t next = first;  // the lowest code point of [first, last] not yet covered
  for (const auto& [lo, hi] : ranges) {
    if (hi < next) continue;
    if (lo > next) return true;
    if (hi >= last) return false;
    next = hi + 1;
  }
  return true;
}

void CharSet::normalize() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& range : ranges) {
    // Adjacent ranges ([a-c][d-f]) merge as overlapping ones do.
    if (!merged.empty() && uint64_t{range.first} <= uint64_t{merged.back().second} + 1) {
      merged.back().second = std::max(merged.back().second, range.second);
    } else {
      merged.push_back(range);
    }
  }
  ranges = std::move(merged);
}

namespace {

// Rules that can match the empty string (a fixpoint over the rules).
std::vector<bool> nullable_rules(const Grammar& grammar) {
  std::vector<bool> nullable(grammar.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < grammar.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : grammar.rules[r].alternatives) {
        const bool empty = std::all_of(alt.begin(), alt.end(), [&](const Symbol& s) {
          return s.kind == Symbol::Kind::rule && nullable[s.index];
        });
        if (empty) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

}  // namespace

void check_no_left_recursion(const Grammar& grammar) {
  const std::vector<bool> nullable = nullable_rules(grammar);
  // leftmost[r]: the rules r may expand into before its first character.
  std::vector<std::vector<uint32_t>> leftmost(grammar.rules.size());
  for (size_t r = 0; r < grammar.rules.size(); ++r) {
    for (const Alternative& alt : grammar.rules[r].alternatives) {
      for (const Symbol& s : alt) {
        if (s.kind == Symbol::Kind::chars) break;
        leftmost[r].push_back(s.index);
        if (!nullable[s.index]) break;
      }
    }
  }
  // Depth-first search for a cycle; `path` is the chain from the root of
  // the search to the rule being visited.
  enum : uint8_t { unseen, on_path, done };
  std::vector<uint8_t> state(grammar.rules.size(), unseen);
  std::vector<uint32_t> path;
  std::vector<size_t> next_edge;
  for (uint32_t start = 0; start < grammar.rules.size(); ++start) {
    if (state[start] != unseen) continue;
    path = {start};
    next_edge = {0};
    state[start] = on_path;
    while (!path.empty()) {
      const uint32_t r = path.back();
      if (next_edge.back() == leftmost[r].size()) {
        state[r] = done;
        path.pop_back();
        next_edge.pop_back();
        continue;
      }
      const uint32_t s = leftmost[r][next_edge.back()++];
      if (state[s] == on_path) {
        std::string cycle;
        const auto from = std::find(path.begin(), path.end(), s);
        for (auto it = from; it != path.end(); ++it) cycle += grammar.rules[*it].name + " -> ";
        cycle += grammar.rules[s].name;
        throw Error("rule '" + grammar.rules[s].name +
                    "' is left-recursive: it can reach itself before any character (" + cycle +
                    "); make a character come first, e.g. expr ::= term (\"+\" term)*");
      }
      if (state[s] == unseen) {
        state[s] = on_path;
        path.push_back(s);
        next_edge.push_back(0);
      }
    }
  }
}

}  // namespace cortiq::grammar
