// PrecompiledCharsmap: the layout is described in charsmap.hpp. Lookups
// follow llama.cpp's llm_tokenizer_ugm_session::normalize_prefix step for
// step; the constructor's check makes every step of every possible lookup
// stay inside the blob.
#include "tokenizer/charsmap.hpp"

#include <cstring>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq {

namespace {

constexpr const char* kKey = "tokenizer.ggml.precompiled_charsmap";

[[noreturn]] void fail(const std::string& problem) {
  throw Error(std::string(kKey) + ": " + problem);
}

uint32_t read_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// The fields of a unit, as llama.cpp's xcda_array_view decodes them.
uint32_t base_of(uint32_t unit) {
  return (unit >> 10) << ((unit & (1u << 9)) >> 6);
}
uint32_t lcheck_of(uint32_t unit) {
  return unit & ((1u << 31) | 0xFFu);
}
bool leaf_of(uint32_t unit) {
  return (unit >> 8) & 1u;
}
uint32_t value_of(uint32_t unit) {
  return unit & ((1u << 31) - 1);
}

}  // namespace

PrecompiledCharsmap::PrecompiledCharsmap(std::span<const uint8_t> blob) {
  if (blob.size() < 4) {
    fail(strfmt("%zu bytes is too short for the 4-byte size of its trie", blob.size()));
  }
  const uint32_t trie_bytes = read_le32(blob.data());
  if (trie_bytes % 4 != 0)
    fail(strfmt("trie size %u is not a whole number of 4-byte units", trie_bytes));
  // llama.cpp requires at least one byte of replacement strings after the trie.
  if (size_t{trie_bytes} + 4 >= blob.size()) {
    fail(strfmt("trie of %u bytes leaves no replacement strings in a %zu-byte blob", trie_bytes,
                blob.size()));
  }
  units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < units_.size(); ++i) units_[i] = read_le32(blob.data() + 4 + 4 * i);
  const auto* strings = reinterpret_cast<const char*>(blob.data() + 4 + trie_bytes);
  replacements_.assign(strings, blob.size() - 4 - trie_bytes);
  if (!units_.empty()) check_reachable_nodes();
}

uint32_t PrecompiledCharsmap::unit(size_t index) const {
  if (index >= units_.size()) {
    fail(strfmt("trie index %zu is outside its %zu units", index, units_.size()));
  }
  return units_[index];
}

std::string_view PrecompiledCharsmap::replacement(uint32_t offset) const {
  if (offset >= replacements_.size()) {
    fail(strfmt("replacement offset %u is outside the %zu bytes of strings", offset,
                replacements_.size()));
  }
  const char* start = replacements_.data() + offset;
  const size_t room = replacements_.size() - offset;
  const void* nul = std::memchr(start, '\0', room);
  if (nul == nullptr) fail(strfmt("replacement string at offset %u is not NUL-terminated", offset));
  return {start, static_cast<size_t>(static_cast<const char*>(nul) - start)};
}

// Every node reachable from the root is visited once (by its BASE-derived
// index; a malformed trie may loop, which the visited set stops), and every
// byte 1..255 that a lookup could try there must land inside the array.
// Darts-clone arrays are whole 256-unit blocks, so real charsmaps pass.
void PrecompiledCharsmap::check_reachable_nodes() const {
  const size_t n = units_.size();
  std::vector<bool> visited((n | 0xFF) + 1, false);
  std::vector<uint32_t> pending = {base_of(units_[0])};
  while (!pending.empty()) {
    const uint32_t node = pending.back();
    pending.pop_back();
    if (node >= visited.size()) {
      fail(strfmt("a trie node's children would lie at unit %u, beyond the %zu units", node, n));
    }
    if (visited[node]) continue;
    visited[node] = true;
    for (uint32_t c = 1; c < 256; ++c) {
      const uint32_t child = node ^ c;
      if (child >= n) {
        fail(strfmt("byte 0x%02X from the trie node at %u leads to unit %u, beyond the %zu units",
                    c, node, child, n));
      }
      const uint32_t u = units_[child];
      if (lcheck_of(u) != c) continue;
      const uint32_t next = child ^ base_of(u);
      if (leaf_of(u)) {
        if (next >= n) {
          fail(strfmt("the value of the leaf at unit %u lies at unit %u, beyond the %zu units",
                      child, next, n));
        }
        replacement(value_of(units_[next]));
      }
      pending.push_back(next);
    }
  }
}

PrecompiledCharsmap::Match PrecompiledCharsmap::longest_match(std::string_view text) const {
  Match match;
  if (units_.empty()) return match;
  uint32_t value = 0;
  uint32_t node = base_of(units_[0]);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == 0) break;
    node ^= c;
    const uint32_t u = unit(node);
    if (lcheck_of(u) != c) break;
    node ^= base_of(u);
    if (leaf_of(u)) {
      match.consumed = i + 1;
      value = value_of(unit(node));
    }
  }
  if (match.consumed > 0) match.replacement = replacement(value);
  return match;
}

}  // namespace cortiq
