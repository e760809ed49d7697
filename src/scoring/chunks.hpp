// The chunks of llama-perplexity's method: the text is tokenized once and
// cut into chunks of `context` tokens; each chunk is evaluated from an
// empty cache with its first token replaced by BOS (when the model adds
// one), and only its second half is scored: row j, for j in [context / 2,
// context - 1), predicts token j + 1.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace cortiq {
class Model;
class Session;
}  // namespace cortiq

namespace cortiq::scoring {

struct ChunkPlan {
  int64_t context = 0;
  int64_t n_chunks = 0;
  std::optional<TokenId> bos;  // replaces each chunk's first token

  int64_t first_scored_row() const { return context / 2; }
  int64_t scored_per_chunk() const { return context - 1 - first_scored_row(); }
};

// Checks the request against the model and the token count before any
// work: context >= 4 and within the model's trained context and the
// session's cache, at least two chunks of tokens, ids inside the vocabulary.
// max_chunks < 0: every whole chunk. Throws cortiq::Error naming the problem.
ChunkPlan plan_chunks(const Model& model, std::span<const TokenId> tokens, int64_t context,
                      int64_t max_chunks);

// Evaluates chunk `index` in `session` (reset first) in forward passes of
// `batch` rows (0: the model's) and returns the logits of its scored rows,
// [scored_per_chunk][n_vocab].
std::vector<float> evaluate_chunk(Session& session, std::span<const TokenId> tokens,
                                  const ChunkPlan& plan, int64_t index, int64_t batch);

// The tokens chunk `index`'s scored rows predict.
std::span<const TokenId> chunk_targets(std::span<const TokenId> tokens, const ChunkPlan& plan,
                                       int64_t index);

}  // namespace cortiq::scoring
