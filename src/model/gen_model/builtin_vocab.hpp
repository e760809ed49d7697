// A small SentencePiece-style vocabulary built into the engine, so that a
// generated test model tokenizes and runs without any downloaded file:
// <unk> <s> </s>, the 256 byte-fallback tokens <0x00>..<0xFF>, "▁", the
// printable ASCII characters, "▁" + each letter and digit, and a few
// hundred common English words as "▁word" (with every prefix, so the SPM
// merge of adjacent pieces can build each word one character at a time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/vocab.hpp"  // TokenType

namespace cortiq {

struct Vocabulary {
  std::vector<std::string> tokens;
  std::vector<float> scores;  // SPM merge priority: higher merges first
  std::vector<TokenType> types;
  uint32_t unk_id = 0;
  uint32_t bos_id = 1;
  uint32_t eos_id = 2;
};

// The built-in vocabulary's own size.
size_t builtin_vocab_size();
// The built-in vocabulary padded to n_vocab entries with unused "<unused_N>"
// tokens (n_vocab 0: its own size). Throws cortiq::Error when n_vocab is
// smaller than builtin_vocab_size().
Vocabulary builtin_spm_vocab(int64_t n_vocab = 0);

// tokenizer.ggml.* keys for a vocabulary (model "llama", i.e. SPM).
std::vector<gguf::KeyValue> tokenizer_metadata(const Vocabulary& vocab);

}  // namespace cortiq
