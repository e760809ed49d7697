// Perplexity with llama-perplexity's method (chunks.hpp): every chunk
// evaluated from an empty cache, its second half scored, the running
// estimate after each chunk, the final PPL = exp(mean NLL) ± its error.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/cpu/log_softmax.hpp"
#include "scoring/chunks.hpp"
#include "scoring/nll_stats.hpp"

namespace cortiq::scoring {

struct ChunkProgress {
  int64_t done = 0;   // chunks finished
  int64_t total = 0;  // chunks planned
  NllStats nll;       // over the chunks finished
  double seconds = 0.0;
  int64_t tokens_evaluated = 0;  // rows forwarded
  double tokens_per_second() const {
    return seconds > 0 ? static_cast<double>(tokens_evaluated) / seconds : 0.0;
  }
};

// A chunk's scored rows: their logits ([n][n_vocab]), log-softmax, and the
// tokens they predict.
struct ScoredRows {
  int64_t chunk = 0;
  std::span<const float> logits;
  std::span<const kernels::LogSoftmax> rows;
  std::span<const TokenId> targets;
};

struct PerplexityOptions {
  int64_t batch = 0;  // rows per forward pass; 0: the model's chunk size
  std::function<void(const ChunkProgress&)> on_chunk;
  // Sees every chunk's rows (saving log-probabilities, KL divergence).
  std::function<void(const ScoredRows&)> on_rows;
};

// Returns the progress after the last chunk: the NLL statistics of every
// scored token, the time and the rows forwarded.
ChunkProgress perplexity(Session& session, std::span<const TokenId> tokens, const ChunkPlan& plan,
                         const PerplexityOptions& options = {});

// Log-softmax of each row of [n][n_vocab] logits, rows spread over the
// model's threads.
std::vector<kernels::LogSoftmax> log_softmax_rows(const Model& model,
                                                  std::span<const float> logits);

}  // namespace cortiq::scoring
