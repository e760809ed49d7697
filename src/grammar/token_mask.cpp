#include "grammar/token_mask.hpp"

#include <algorithm>
#include <string_view>
#include <utility>

namespace cortiq::grammar {

TokenMask::TokenMask(const std::vector<std::string>& pieces, std::vector<TokenId> end_tokens)
    : end_tokens_(std::move(end_tokens)), n_vocab_(pieces.size()) {
  std::vector<uint8_t> is_end(pieces.size(), 0);
  for (const TokenId id : end_tokens_) {
    if (id >= 0 && static_cast<size_t>(id) < pieces.size()) is_end[static_cast<size_t>(id)] = 1;
  }
  std::vector<std::pair<std::string_view, TokenId>> keys;
  for (size_t id = 0; id < pieces.size(); ++id) {
    if (!pieces[id].empty() && !is_end[id]) keys.emplace_back(pieces[id], static_cast<TokenId>(id));
  }
  std::sort(keys.begin(), keys.end());
  // Each node's children are contiguous and in byte order: a node takes the
  // keys of one sorted range, those as long as its depth end at it.
  struct Pending {
    uint32_t node;
    size_t begin, end, depth;
  };
  nodes_.push_back({});
  labels_.push_back(0);
  std::vector<Pending> pending = {{0, 0, keys.size(), 0}};
  while (!pending.empty()) {
    const Pending p = pending.back();
    pending.pop_back();
    size_t i = p.begin;
    nodes_[p.node].first_token = static_cast<uint32_t>(tokens_.size());
    for (; i < p.end && keys[i].first.size() == p.depth; ++i) tokens_.push_back(keys[i].second);
    nodes_[p.node].token_count = static_cast<uint32_t>(tokens_.size()) - nodes_[p.node].first_token;
    const auto first_child = static_cast<uint32_t>(nodes_.size());
    while (i < p.end) {
      const auto byte = static_cast<uint8_t>(keys[i].first[p.depth]);
      size_t group_end = i;
      while (group_end < p.end && static_cast<uint8_t>(keys[group_end].first[p.depth]) == byte) {
        ++group_end;
      }
      pending.push_back({static_cast<uint32_t>(nodes_.size()), i, group_end, p.depth + 1});
      nodes_.push_back({});
      labels_.push_back(byte);
      i = group_end;
    }
    nodes_[p.node].first_child = first_child;
    nodes_[p.node].child_count = static_cast<uint32_t>(nodes_.size()) - first_child;
  }
}

void TokenMask::compute(const CompiledGrammar& grammar, const MatchState& state,
                        std::vector<uint8_t>& allowed, bool drop_leading_space) const {
  allowed.assign(n_vocab_, 0);
  struct Visit {
    uint32_t node;
    MatchState state;  // after the node's bytes
  };
  std::vector<Visit> visits = {{0, state}};
  while (!visits.empty()) {
    Visit visit = std::move(visits.back());
    visits.pop_back();
    const Node& node = nodes_[visit.node];
    for (uint32_t c = node.first_child; c < node.first_child + node.child_count; ++c) {
      MatchState next = visit.state;
      const bool dropped = drop_leading_space && visit.node == 0 && labels_[c] == ' ';
      if (!dropped && !grammar.advance(next, labels_[c])) continue;  // no token below goes on
      const Node& child = nodes_[c];
      for (uint32_t t = 0; t < child.token_count; ++t) {
        allowed[static_cast<size_t>(tokens_[child.first_token + t])] = 1;
      }
      if (child.child_count > 0) visits.push_back({c, std::move(next)});
    }
  }
  if (grammar.can_end(state)) {
    for (const TokenId id : end_tokens_) {
      if (id >= 0 && static_cast<size_t>(id) < n_vocab_) allowed[static_cast<size_t>(id)] = 1;
    }
  }
}

}  // namespace cortiq::grammar
