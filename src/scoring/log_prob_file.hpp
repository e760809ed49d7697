// The log-probability file of llama-perplexity (--kl-divergence-base), read
// and written in the peer's layout so that either engine's file serves the
// other:
//
//   "_logits_"  n_ctx:u32  n_vocab:i32  n_chunk:i32  tokens:i32[n_chunk * n_ctx]
//   then, per chunk, per scored row (n_ctx - 1 - n_ctx / 2 of them):
//     scale:f32  min_log_prob:f32  code:u16[n_vocab rounded up to even]
//
// with log p_i ~= scale * code_i + min_log_prob. Logits more than 16 below
// the row's maximum get code 0 (their log-probability is clamped to
// min_log_prob); the others are spread over 0..65535.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/log_softmax.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::scoring {

struct LogProbHeader {
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;
  int64_t n_chunks = 0;
  int64_t rows_per_chunk() const { return n_ctx - 1 - n_ctx / 2; }
  // uint16 values per row: the two floats and the codes, padded to even.
  size_t row_values() const { return static_cast<size_t>(2 * ((n_vocab + 1) / 2) + 4); }
};

// One stored row.
struct LogProbRow {
  float scale = 0.0f;
  float min_log_prob = 0.0f;
  std::span<const uint16_t> codes;  // n_vocab
  float log_prob(size_t i) const { return scale * static_cast<float>(codes[i]) + min_log_prob; }
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

class LogProbWriter {
 public:
  // Writes the header and the tokens (n_chunks * n_ctx of them).
  LogProbWriter(const std::filesystem::path& path, const LogProbHeader& header,
                std::span<const TokenId> tokens);
  // The rows of one chunk, [rows_per_chunk][n_vocab] logits with their
  // log-softmax.
  void write_chunk(std::span<const float> logits, std::span<const kernels::LogSoftmax> rows);
  // Flushes and closes; throws on a write error.
  void close();

 private:
  std::filesystem::path path_;
  LogProbHeader header_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::vector<uint16_t> row_;
};

class LogProbReader {
 public:
  // Reads and checks the header and tokens: the magic, sizes that agree
  // with the file's length, ids inside the vocabulary. Throws cortiq::Error
  // naming the problem.
  explicit LogProbReader(const std::filesystem::path& path);
  const LogProbHeader& header() const { return header_; }
  std::span<const TokenId> tokens() const { return tokens_; }
  // The next chunk's rows (valid until the next call).
  std::vector<LogProbRow> read_chunk();

 private:
  std::filesystem::path path_;
  LogProbHeader header_;
  std::vector<TokenId> tokens_;
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::vector<uint16_t> chunk_;
  int64_t chunks_read_ = 0;
};

// Encodes one row as the peer does (scale, min_log_prob, codes).
void encode_log_probs(std::span<const float> logits, const kernels::LogSoftmax& row,
                      std::span<uint16_t> out);

}  // namespace cortiq::scoring
