#include "scoring/perplexity.hpp"

#include "base/thread_pool.hpp"
#include "base/timer.hpp"
#include "cortiq/cortiq.hpp"

namespace cortiq::scoring {

std::vector<kernels::LogSoftmax> log_softmax_rows(const Model& model,
                                                  std::span<const float> logits) {
  const auto n_vocab = static_cast<size_t>(model.n_vocab());
  const size_t n_rows = logits.size() / n_vocab;
  std::vector<kernels::LogSoftmax> rows(n_rows);
  model.pool().parallel_for(static_cast<int64_t>(n_rows), [&](int64_t begin, int64_t end) {
    for (auto r = static_cast<size_t>(begin); r < static_cast<size_t>(end); ++r) {
      rows[r] = kernels::log_softmax(logits.subspan(r * n_vocab, n_vocab));
    }
  });
  return rows;
}

ChunkProgress perplexity(Session& session, std::span<const TokenId> tokens, const ChunkPlan& plan,
                         const PerplexityOptions& options) {
  ChunkProgress progress;
  progress.total = plan.n_chunks;
  const Timer timer;
  const auto n_vocab = static_cast<size_t>(session.model().n_vocab());
  for (int64_t c = 0; c < plan.n_chunks; ++c) {
    const std::vector<float> logits = evaluate_chunk(session, tokens, plan, c, options.batch);
    const std::vector<kernels::LogSoftmax> rows = log_softmax_rows(session.model(), logits);
    const std::span<const TokenId> targets = chunk_targets(tokens, plan, c);
    // Added in position order: the same text gives the same bits.
    for (size_t r = 0; r < rows.size(); ++r) {
      progress.nll.add(
          -rows[r].log_prob(std::span(logits).subspan(r * n_vocab, n_vocab), targets[r]));
    }
    if (options.on_rows) options.on_rows({c, logits, rows, targets});
    progress.done = c + 1;
    progress.seconds = timer.seconds();
    progress.tokens_evaluated += plan.context - 1;
    if (options.on_chunk) options.on_chunk(progress);
  }
  return progress;
}

}  // namespace cortiq::scoring
