// Reading Andrej Karpathy's llama2.c checkpoints (github.com/karpathy/llama2.c),
// the small Llama models of run.c, and their tokenizer.bin.
//
// Two layouts, told apart by the first four bytes:
// - legacy (export.py --version 0, the published stories*.bin files): seven
//   little-endian int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
//   vocab_size, seq_len; a negative vocab_size means the classifier has its
//   own weights, stored last), then float32 arrays: token_embedding,
//   rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq_cis_real,
//   freq_cis_imag[, wcls];
// - version 1 (export.py --version 1): the magic "ak42" (0x616b3432), int32
//   version = 1, the same seven int32 (vocab_size positive), a byte that is 1
//   when the classifier is shared, zeros up to byte 256, then float32 arrays:
//   rms_att, rms_ffn, rms_final, token_embedding, wq, wk, wv, wo, w1, w2, w3[, wcls].
// Every matrix is row-major [out][in]; per-layer arrays hold n_layers of them
// back to back. Every size is checked against the file length (and against
// overflow) before anything is read: a truncated, padded or absurd file gives
// a cortiq::FormatError naming the field, never a crash or a huge allocation.
// The floats stay in the read-only mapping until a tensor is asked for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.hpp"

namespace cortiq::llama2c {

inline constexpr uint32_t kMagic = 0x616b3432;  // "ak42" read as little-endian u32
inline constexpr uint64_t kLegacyHeaderBytes = 7 * 4;
inline constexpr uint64_t kVersionedHeaderBytes = 256;

struct Config {
  int64_t dim = 0;         // embedding length
  int64_t hidden_dim = 0;  // feed-forward length
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t vocab_size = 0;         // always positive here; the legacy sign is in shared_classifier
  int64_t seq_len = 0;            // the context the model was trained for
  bool shared_classifier = true;  // the output matrix is the token embedding

  int64_t head_size() const { return dim / n_heads; }
  int64_t kv_dim() const { return n_kv_heads * head_size(); }
};

// The arrays of a checkpoint, named as in llama2.c's run.c.
enum class Weight {
  token_embedding,  // [vocab][dim]
  rms_att,          // [layer][dim]
  wq,               // [layer][dim][dim]
  wk,               // [layer][kv_dim][dim]
  wv,               // [layer][kv_dim][dim]
  wo,               // [layer][dim][dim]
  rms_ffn,          // [layer][dim]
  w1,               // [layer][hidden][dim]  (gate)
  w2,               // [layer][dim][hidden]  (down)
  w3,               // [layer][hidden][dim]  (up)
  rms_final,        // [dim]
  freq_cis_real,    // [seq_len][head_size/2]  (legacy only; not needed: RoPE is recomputed)
  freq_cis_imag,    // [seq_len][head_size/2]
  wcls,             // [vocab][dim], only when the classifier is not shared
};

std::string_view weight_name(Weight weight);

struct ArrayInfo {
  Weight weight;
  bool per_layer = false;     // n_layers items, one per layer
  std::vector<int64_t> dims;  // of one item, C order (dims[0] = rows)
  uint64_t offset = 0;        // of the first item in the file
  uint64_t item_floats = 0;   // floats per item
  uint64_t item_bytes() const { return item_floats * 4; }
};

class Checkpoint {
 public:
  // Maps and validates a file. Throws FormatError / Error.
  static Checkpoint open(const std::filesystem::path& path);
  // Validates bytes already in memory, which must outlive the result; `name`
  // stands for the file in error messages.
  static Checkpoint parse(std::span<const std::byte> bytes, std::string name = "<memory>");

  const std::string& path() const { return name_; }
  int version() const { return version_; }  // 0 = legacy
  const Config& config() const { return config_; }
  uint64_t file_size() const { return bytes_.size(); }

  // Every array in file order.
  const std::vector<ArrayInfo>& arrays() const { return arrays_; }
  // nullptr for an array the file does not hold (wcls when shared, freq_cis in v1).
  const ArrayInfo* find(Weight weight) const;

  // The little-endian float32 bytes of one item: of layer `layer` for a
  // per-layer array (0 <= layer < n_layers), of the whole array otherwise
  // (layer must be 0). Throws cortiq::Error for an absent array or a bad layer.
  std::span<const std::byte> item_bytes(Weight weight, int64_t layer = 0) const;
  // The same values as floats.
  std::vector<float> item_floats(Weight weight, int64_t layer = 0) const;

  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;

 private:
  Checkpoint() = default;
  void validate();

  MappedFile file_;  // empty for parse()
  std::span<const std::byte> bytes_;
  std::string name_;
  int version_ = 0;
  Config config_;
  std::vector<ArrayInfo> arrays_;
};

// llama2.c's tokenizer.bin: int32 max_token_length, then for each token a
// float32 score, an int32 byte length and the bytes. The file does not say
// how many tokens it holds: the model's vocab_size does.
struct TokenizerFile {
  uint32_t max_token_length = 0;
  std::vector<std::string> pieces;  // as stored: " " for SentencePiece's "▁"
  std::vector<float> scores;
};

// Reads exactly n_tokens tokens; throws FormatError naming the token when the
// file is truncated or a length is negative, and when bytes are left over
// (the tokenizer of another model).
TokenizerFile read_tokenizer(const std::filesystem::path& path, int64_t n_tokens);
TokenizerFile parse_tokenizer(std::span<const std::byte> bytes, int64_t n_tokens,
                              std::string_view name = "<memory>");

}  // namespace cortiq::llama2c
