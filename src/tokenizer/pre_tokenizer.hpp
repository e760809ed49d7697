// The pre-tokenizer of byte-level BPE: splits text into the words that BPE
// merges never cross. A model names its pre-tokenizer in tokenizer.ggml.pre;
// each name stands for a list of regular expressions applied in sequence,
// every one splitting each piece the previous ones left (a match becomes a
// word, and so does the unmatched text between matches), as the peer does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

class PreTokenizer {
 public:
  // Compiles the regexes of `name` once (PCRE2 with UTF+UCP, JIT when the
  // platform has it). An unknown or empty name falls back to "default" and
  // logs one warning.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The name actually in use ("default" after a fallback).
  const std::string& name() const { return name_; }
  // Whether the peer tries a whole word as one token before merging
  // (llama3-style vocabularies: tokenizer.json's "ignore_merges").
  bool ignore_merges() const { return ignore_merges_; }

  // Appends the words of `text`, views into it, in order; their
  // concatenation is `text`. `text` must be valid UTF-8 (see
  // sanitize_utf8); every piece is non-empty.
  void split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Step;
  std::string name_;
  bool ignore_merges_ = false;
  std::vector<std::unique_ptr<Step>> steps_;
};

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code
// points past U+10FFFF).
bool is_valid_utf8(std::string_view text);
// Replaces every byte that does not start a well-formed UTF-8 sequence with
// U+FFFD, one per byte, as the peer's decoder does for stray continuation
// bytes and truncated sequences. (The peer decodes overlong forms and
// surrogates leniently; we replace those bytes too, since PCRE2 needs valid
// UTF-8.)
std::string sanitize_utf8(std::string_view text);

}  // namespace cortiq
