#include "scoring/chunks.hpp"

#include "base/error.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "model/hparams.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::scoring {

ChunkPlan plan_chunks(const Model& model, std::span<const TokenId> tokens, int64_t context,
                      int64_t max_chunks) {
  if (context < 4)
    throw Error(strfmt("context %lld is too small (at least 4)", (long long)context));
  const int64_t trained = model.hparams().n_ctx_train;
  if (trained > 0 && context > trained) {
    throw Error(strfmt("context %lld is longer than the model's context (%lld tokens)",
                       (long long)context, (long long)trained));
  }
  if (context > model.context_length()) {
    throw Error(
        strfmt("context %lld does not fit the session's cache (%lld positions; load with "
               "-c %lld)",
               (long long)context, (long long)model.context_length(), (long long)context));
  }
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (n_tokens < 2 * context) {
    throw Error(
        strfmt("the text gives %lld tokens; a context of %lld needs at least %lld (two "
               "chunks)",
               (long long)n_tokens, (long long)context, (long long)(2 * context)));
  }
  const int64_t n_vocab = model.n_vocab();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      throw Error(strfmt("token %zu is id %d, outside the vocabulary (%lld)", i, tokens[i],
                         (long long)n_vocab));
    }
  }
  ChunkPlan plan;
  plan.context = context;
  plan.n_chunks = n_tokens / context;
  if (max_chunks >= 0) plan.n_chunks = std::min(plan.n_chunks, max_chunks);
  if (plan.n_chunks < 1) throw Error("no chunks to evaluate (--chunks 0)");
  const Vocab& vocab = model.tokenizer().vocab();
  if (vocab.add_bos && vocab.bos != kNoToken) plan.bos = vocab.bos;
  return plan;
}

std::vector<float> evaluate_chunk(Session& session, std::span<const TokenId> tokens,
                                  const ChunkPlan& plan, int64_t index, int64_t batch) {
  const auto context = static_cast<size_t>(plan.context);
  std::vector<TokenId> ids(
      tokens.begin() + static_cast<std::ptrdiff_t>(index * plan.context),
      tokens.begin() + static_cast<std::ptrdiff_t>((index + 1) * plan.context));
  if (plan.bos) ids[0] = *plan.bos;
  session.reset();
  // The last token is only predicted: its row would predict nothing.
  return session.evaluate(std::span(ids).first(context - 1), batch,
                          static_cast<size_t>(plan.first_scored_row()));
}

std::span<const TokenId> chunk_targets(std::span<const TokenId> tokens, const ChunkPlan& plan,
                                       int64_t index) {
  const int64_t begin = index * plan.context + plan.first_scored_row() + 1;
  return tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(plan.scored_per_chunk()));
}

}  // namespace cortiq::scoring
