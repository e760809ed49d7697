// A byte trie over token texts, for the tokenizer models that look tokens
// up by prefix (Unigram, PLaMo-2, RWKV).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace cortiq {

// A byte trie over token texts. Built once from the sorted texts, each
// node's children are contiguous and sorted by byte, so a step is a binary
// search and a 250k-token vocabulary costs a few bytes per trie node.
class ByteTrie {
 public:
  static constexpr uint32_t kRoot = 0;
  static constexpr uint32_t kNone = UINT32_MAX;

  // Later ids win over earlier ones with the same text, as in llama.cpp's
  // naive_trie (inserted in id order, each insert overwriting).
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
      // The key that ends at this node sorts before the longer ones.
      for (; i < p.end && keys[i].first.size() == p.depth; ++i)
        nodes_[p.node].value = keys[i].second;
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

  TokenId value(uint32_t node) const { return nodes_[node].value; }

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
    TokenId value = kNoToken;
  };
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;  // labels_[i]: the byte that leads to node i
};

}  // namespace cortiq
