// SentencePiece's precompiled normalization rules
// (tokenizer.ggml.precompiled_charsmap), read as llama.cpp reads them for
// the Unigram tokenizer. The blob is
//
//   u32 n                 little-endian: bytes of the trie that follows
//   u32 units[n / 4]      a darts-clone double array over input byte strings
//                         (llama.cpp calls it XCDA: XOR-compressed)
//   char replacements[]   NUL-terminated strings, indexed by a leaf's value
//
// Each unit packs BASE (offset) in bits 10-30, with bit 9 saying BASE is
// stored shifted right by 8; the node's byte (LCHECK) in bits 0-7; "a key
// ends here" (LEAF) in bit 8. A value unit has bit 31 set, so its LCHECK
// never equals a byte, and holds the replacement's offset in bits 0-30.
// From a node whose BASE-derived index is i, the child for byte c is unit
// i ^ c if its LCHECK is c, and the next index is (i ^ c) ^ BASE(unit).
//
// The constructor checks the whole structure once (every node reachable
// from the root, every byte it may be asked for, every replacement it can
// name), so that a malformed or truncated blob is a cortiq::Error at load
// time instead of a read out of bounds later.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

class PrecompiledCharsmap {
 public:
  // The longest rule matching the start of a text: `consumed` input bytes
  // become `replacement` (which may be empty: the input is deleted).
  // consumed == 0: no rule matches.
  struct Match {
    std::string_view replacement;
    size_t consumed = 0;
  };

  PrecompiledCharsmap() = default;
  // Copies and checks `blob`; throws cortiq::Error naming
  // tokenizer.ggml.precompiled_charsmap and what is wrong.
  explicit PrecompiledCharsmap(std::span<const uint8_t> blob);

  // As llama.cpp's normalize_prefix walks the trie: byte by byte from the
  // start of `text`, stopping at a NUL byte or the first byte without a
  // child; the last leaf passed wins.
  Match longest_match(std::string_view text) const;

  bool empty() const { return units_.empty(); }

 private:
  uint32_t unit(size_t index) const;
  std::string_view replacement(uint32_t offset) const;
  void check_reachable_nodes() const;

  std::vector<uint32_t> units_;
  std::string replacements_;
};

}  // namespace cortiq
