// A byte trie over token texts: the tokenizer models that look tokens up by
// prefix (Unigram, PLaMo-2, RWKV) and the grammar's token mask, which walks
// it whole.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "cortiq/types.hpp"

namespace cortiq {

// Built once from the texts, each node's children are contiguous and sorted
// by byte, so a step is a binary search and a 250k-token vocabulary costs a
// few bytes per trie node.
class ByteTrie {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr TokenId kNoValue = -1;

  explicit ByteTrie(std::vector<std::pair<std::string_view, TokenId>> keys) {
    std::sort(keys.begin(), keys.end());
    nodes_.push_back({});
    labels_.push_back(0);
    struct Pending {
      uint32_t node;
      size_t begin, end, depth;
    };
    std::vector<Pending> pending = {{kRoot, 0, keys.size(), 0}};
    while (!pending.empty()) {
      const Pending p = pending.back();
      pending.pop_back();
      size_t i = p.begin;
      // The keys that end at this node sort before the longer ones, in id order.
      nodes_[p.node].first_value = static_cast<uint32_t>(values_.size());
      for (; i < p.end && keys[i].first.size() == p.depth; ++i) values_.push_back(keys[i].second);
      nodes_[p.node].value_count =
          static_cast<uint32_t>(values_.size()) - nodes_[p.node].first_value;
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

  uint32_t child(uint32_t node, uint8_t byte) const {
    const Node& n = nodes_[node];
    const auto begin = labels_.begin() + n.first_child;
    const auto end = begin + n.child_count;
    const auto it = std::lower_bound(begin, end, byte);
    return it != end && *it == byte ? static_cast<uint32_t>(it - labels_.begin()) : kNone;
  }

  // The id of the text that ends at `node`; of several with the same text,
  // the last (later ids win, as in llama.cpp's naive_trie, inserted in id
  // order, each insert overwriting). kNoValue when none ends there.
  TokenId value(uint32_t node) const {
    const Node& n = nodes_[node];
    return n.value_count > 0 ? values_[n.first_value + n.value_count - 1] : kNoValue;
  }
  // Every id whose text ends at `node`, in id order.
  std::span<const TokenId> values(uint32_t node) const {
    const Node& n = nodes_[node];
    return std::span<const TokenId>(values_).subspan(n.first_value, n.value_count);
  }

  // A node's children are the nodes [first_child, first_child + child_count),
  // in byte order; label(child) is the byte that leads to it.
  uint32_t first_child(uint32_t node) const { return nodes_[node].first_child; }
  uint32_t child_count(uint32_t node) const { return nodes_[node].child_count; }
  uint8_t label(uint32_t node) const { return labels_[node]; }

  // How far `text` follows a path from the root, whether or not a key ends
  // there (llama.cpp's naive_trie::get_longest_prefix).
  size_t path_length(std::string_view text) const {
    uint32_t node = kRoot;
    size_t n = 0;
    for (; n < text.size(); ++n) {
      node = child(node, static_cast<uint8_t>(text[n]));
      if (node == kNone) break;
    }
    return n;
  }

 private:
  struct Node {
    uint32_t first_child = 0;
    uint32_t child_count = 0;
    uint32_t first_value = 0;  // into values_
    uint32_t value_count = 0;
  };
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;  // labels_[i]: the byte that leads to node i
  std::vector<TokenId> values_;
};

}  // namespace cortiq
