// Drafting with the model's own multi-token-prediction layer (cortiq.hpp's
// MtpDrafter). The MTP layer's cache row at position p is computed from the
// trunk's hidden state at p - 1 and the token at p, so every row the target
// forwards is replayed through the MTP layer as it comes (observe()); a
// draft then starts at the context's last token with the hidden state of
// the row before it, and chains on the MTP layer's own output.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "cortiq/cortiq.hpp"
#include "kv/batch.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "runtime/sampler.hpp"
#include "runtime/speculation.hpp"

namespace cortiq {

namespace {

// CORTIQ_LOG=debug: the MTP layer's three best tokens at a draft step, with
// their probabilities among its ten best (what llama.cpp's draft-mtp logs
// from its top-10 sampler), to compare the two.
void log_candidates(std::span<const float> logits, int64_t pos) {
  if (log_level() > LogLevel::debug) return;
  std::vector<std::pair<float, TokenId>> best;
  for (size_t i = 0; i < logits.size(); ++i) best.emplace_back(logits[i], static_cast<TokenId>(i));
  const size_t k = std::min<size_t>(10, best.size());
  std::partial_sort(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(k), best.end(),
                    [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : a.second < b.second;
                    });
  double total = 0;
  for (size_t i = 0; i < k; ++i)
    total += std::exp(static_cast<double>(best[i].first - best[0].first));
  for (size_t i = 0; i < std::min<size_t>(3, k); ++i) {
    LOG_DEBUG("mtp draft at position %lld: candidate %zu: %d (%.3f)", static_cast<long long>(pos),
              i, best[i].second,
              std::exp(static_cast<double>(best[i].first - best[0].first)) / total);
  }
}

}  // namespace

struct MtpDrafter::State {
  explicit State(const KvCacheShape& shape) : cache(shape) {}
  KvCache cache;  // the MTP layer's rows: the observed context, then drafts
  ForwardBuffers buffers;
  std::vector<float> hidden;  // [observed][n_embd]: the trunk's h by position
  bool synced = true;         // false after a gap in what it observed
  std::vector<BatchRow> rows;
  std::vector<float> h_in, h_out, logits;
};

MtpDrafter::MtpDrafter(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) throw Error("MtpDrafter: no model");
  const DecoderModel& decoder = model_->decoder();
  if (!decoder.has_mtp()) {
    throw Error(decoder.hparams().arch +
                ": the model has no multi-token-prediction layer Cortiq runs (GLM-4.5's "
                "nextn layer); draft with --spec lookup or --draft-model instead");
  }
  KvCacheShape shape = decoder.mtp_cache_shape(model_->context_length(), model_->options().kv_type);
  state_ = std::make_unique<State>(shape);
}

MtpDrafter::~MtpDrafter() = default;

std::shared_ptr<Drafter> MtpDrafter::for_another_sequence() const {
  return std::make_shared<MtpDrafter>(model_);  // the weights shared, a cache of its own
}

void MtpDrafter::observe(std::span<const TokenId> ids, int64_t first_pos,
                         std::span<const float> hidden) {
  State& st = *state_;
  const auto width = static_cast<size_t>(model_->hparams().n_embd);
  const auto observed = static_cast<int64_t>(st.hidden.size() / width);
  if (ids.empty()) return;
  if (first_pos == 0) st.synced = true;
  if (!st.synced || first_pos > observed) {
    // Rows it never saw: their hidden states are gone for good.
    st.synced = false;
    st.hidden.clear();
    st.cache.clear(0);
    return;
  }
  st.cache.truncate(0, first_pos);
  st.hidden.resize(static_cast<size_t>(first_pos) * width);
  st.rows.clear();
  st.h_in.assign(ids.size() * width, 0.0f);
  for (size_t k = 0; k < ids.size(); ++k) {
    st.rows.push_back(
        {ids[k], static_cast<int32_t>(first_pos + static_cast<int64_t>(k)), 0, false});
    // Position p pairs with the hidden state at p - 1 (zeros before the first).
    std::span<const float> before;
    if (k > 0) {
      before = hidden.subspan((k - 1) * width, width);
    } else if (first_pos > 0) {
      before = std::span<const float>(st.hidden).last(width);
    }
    if (!before.empty()) std::ranges::copy(before, st.h_in.begin() + k * width);
  }
  st.h_out.resize(ids.size() * width);
  CpuBackend cpu(model_->pool(), st.buffers.cpu);
  ForwardContext ctx{cpu, st.buffers};
  model_->decoder().forward_mtp(st.rows, st.h_in, st.cache, ctx, st.h_out, {});
  st.hidden.insert(st.hidden.end(), hidden.begin(), hidden.end());
}

bool MtpDrafter::follow(std::span<const TokenId> context) {
  State& st = *state_;
  const auto width = static_cast<size_t>(model_->hparams().n_embd);
  const size_t n_past = context.size() - 1;
  if (!st.synced || n_past == 0 || st.hidden.size() < n_past * width) return false;
  const auto cached = st.cache.tokens(0);
  if (cached.size() < n_past || !std::equal(context.begin(), context.end() - 1, cached.begin())) {
    return false;
  }
  st.cache.truncate(0, static_cast<int64_t>(n_past));
  return true;
}

std::vector<TokenId> MtpDrafter::run(std::span<const TokenId> context, size_t max_tokens,
                                     const std::function<TokenId(std::span<const float>)>& pick) {
  std::vector<TokenId> out;
  if (max_tokens == 0 || context.empty() || !follow(context)) return out;
  State& st = *state_;
  const auto width = static_cast<size_t>(model_->hparams().n_embd);
  const int64_t n_past = static_cast<int64_t>(context.size()) - 1;
  if (n_past + static_cast<int64_t>(max_tokens) > model_->context_length()) return out;
  const auto before = std::span<const float>(st.hidden).subspan(
      static_cast<size_t>(n_past - 1) * width, width);  // h at the position before the token
  st.h_in.assign(before.begin(), before.end());
  st.h_out.resize(width);
  st.logits.resize(static_cast<size_t>(model_->n_vocab()));
  CpuBackend cpu(model_->pool(), st.buffers.cpu);
  ForwardContext ctx{cpu, st.buffers};
  TokenId token = context.back();
  for (size_t i = 0; i < max_tokens; ++i) {
    st.rows.assign(1, {token, static_cast<int32_t>(n_past + static_cast<int64_t>(i)), 0, true});
    model_->decoder().forward_mtp(st.rows, st.h_in, st.cache, ctx, st.h_out, st.logits);
    log_candidates(st.logits, n_past + static_cast<int64_t>(i));
    if (on_step_) on_step_(n_past + static_cast<int64_t>(i), st.logits);
    token = pick(st.logits);
    out.push_back(token);
    std::swap(st.h_in, st.h_out);
  }
  return out;
}

std::vector<TokenId> MtpDrafter::draft(std::span<const TokenId> context, size_t max_tokens) {
  SamplingParams argmax;
  argmax.temperature = 0.0f;
  Sampler greedy(argmax, model_->n_vocab());
  return run(context, max_tokens,
             [&](std::span<const float> logits) { return greedy.sample(logits); });
}

SampledDraft MtpDrafter::draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                                       const SamplingParams& params) {
  Sampler sampler = draft_sampler(params, context, model_->n_vocab());
  SampledDraft out;
  out.tokens = run(context, max_tokens, [&](std::span<const float> logits) {
    TokenDistribution q;
    const TokenId id = sampler.sample(logits, q);
    sampler.accept(id);
    out.distributions.push_back(std::move(q));
    return id;
  });
  return out;
}

}  // namespace cortiq
