#include "grammar/token_mask.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

namespace cortiq::grammar {

namespace {

std::vector<std::pair<std::string_view, TokenId>> trie_keys(
    const std::vector<std::string>& pieces, const std::vector<TokenId>& end_tokens) {
  std::vector<uint8_t> is_end(pieces.size(), 0);
  for (const TokenId id : end_tokens) {
    if (id >= 0 && static_cast<size_t>(id) < pieces.size()) is_end[static_cast<size_t>(id)] = 1;
  }
  std::vector<std::pair<std::string_view, TokenId>> keys;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty() && !is_end[id]) keys.emplace_back(pieces[id], static_cast<TokenId>(id));
  }
  return keys;
}

}  // namespace

TokenMask::TokenMask(const std::vector<std::string>& pieces, std::vector<TokenId> end_tokens)
    : trie_(trie_keys(pieces, end_tokens)),
      end_tokens_(std::move(end_tokens)),
      n_vocab_(pieces.size()) {}

void TokenMask::compute(const CompiledGrammar& grammar, const MatchState& state,
                        std::vector<uint8_t>& allowed, bool drop_leading_space) const {
  StateCache cache(grammar);
  compute(cache, cache.intern(state), allowed, drop_leading_space);
}

void TokenMask::compute(StateCache& cache, uint32_t state, std::vector<uint8_t>& allowed,
                        bool drop_leading_space) const {
  allowed.assign(n_vocab_, 0);
  struct Visit {
    uint32_t node;
    uint32_t state;  // after the node's bytes
  };
  std::vector<Visit> visits = {{ByteTrie::kRoot, state}};
  while (!visits.empty()) {
    const Visit visit = visits.back();
    visits.pop_back();
    const uint32_t first = trie_.first_child(visit.node);
    for (uint32_t c = first; c < first + trie_.child_count(visit.node); ++c) {
      const uint8_t byte = trie_.label(c);
      const bool dropped = drop_leading_space && visit.node == ByteTrie::kRoot && byte == ' ';
      const int32_t next =
          dropped ? static_cast<int32_t>(visit.state) : cache.next(visit.state, byte);
      if (next == StateCache::kDead) continue;  // no token below goes on
      for (const TokenId id : trie_.values(c)) allowed[static_cast<size_t>(id)] = 1;
      if (trie_.child_count(c) > 0) visits.push_back({c, static_cast<uint32_t>(next)});
    }
  }
  if (cache.can_end(state)) {
    for (const TokenId id : end_tokens_) {
      if (id >= 0 && static_cast<size_t>(id) < n_vocab_) allowed[static_cast<size_t>(id)] = 1;
    }
  }
}

}  // namespace cortiq::grammar
