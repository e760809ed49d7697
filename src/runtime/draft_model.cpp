// Drafting with a second, smaller model (cortiq.hpp's DraftModelDrafter).
#include <algorithm>
#include <string>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "runtime/sampler.hpp"
#include "runtime/speculation.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

namespace {

// Drafts are token ids the target reads as its own: the vocabularies must
// be the same list of texts.
void require_same_vocabulary(const Model& draft, const Model& target) {
  const auto& a = draft.tokenizer().vocab().tokens;
  const auto& b = target.tokenizer().vocab().tokens;
  if (draft.n_vocab() != target.n_vocab() || a.size() != b.size()) {
    throw Error(
        strfmt("the draft model's vocabulary has %lld tokens, the target's %lld: a draft "
               "model must share the target's vocabulary",
               static_cast<long long>(draft.n_vocab()), static_cast<long long>(target.n_vocab())));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      throw Error(
          strfmt("the draft model's token %zu is \"%s\", the target's \"%s\": a draft "
                 "model must share the target's vocabulary",
                 i, a[i].c_str(), b[i].c_str()));
    }
  }
}

}  // namespace

DraftModelDrafter::DraftModelDrafter(std::shared_ptr<const Model> draft, const Model& target)
    : model_(std::move(draft)) {
  require_same_vocabulary(*model_, target);
  session_ = std::make_unique<Session>(model_);
}

DraftModelDrafter::~DraftModelDrafter() = default;

std::shared_ptr<Drafter> DraftModelDrafter::for_another_sequence() const {
  // The vocabulary was checked when this one was made.
  std::shared_ptr<DraftModelDrafter> other(new DraftModelDrafter());
  other->model_ = model_;
  other->session_ = std::make_unique<Session>(model_);
  return other;
}

std::vector<TokenId> DraftModelDrafter::draft(std::span<const TokenId> context, size_t max_tokens) {
  if (max_tokens == 0 || context.empty()) return {};
  // Past the draft's context there is nothing to draft with.
  if (static_cast<int64_t>(context.size() + max_tokens) > model_->context_length()) return {};
  GenerateOptions options;
  options.sampling.temperature = 0.0f;
  options.max_tokens = static_cast<int64_t>(max_tokens);
  return session_->generate(context, options).tokens;
}

std::vector<float> DraftModelDrafter::follow(std::span<const TokenId> context, size_t max_tokens) {
  if (max_tokens == 0 || context.empty()) return {};
  if (static_cast<int64_t>(context.size() + max_tokens) > model_->context_length()) return {};
  const auto cached = session_->history();
  size_t common = static_cast<size_t>(std::ranges::mismatch(cached, context).in1 - cached.begin());
  // The last context token is forwarded again: its logits start the draft.
  if (common == context.size()) --common;
  session_->truncate(common);
  const auto rest = context.subspan(common);
  return session_->evaluate(rest, 0, rest.size() - 1);
}

SampledDraft DraftModelDrafter::draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                                              const SamplingParams& params) {
  SampledDraft out;
  std::vector<float> logits = follow(context, max_tokens);
  if (logits.empty()) return out;
  Sampler sampler = draft_sampler(params, context, model_->n_vocab());
  for (;;) {
    TokenDistribution q;
    const TokenId id = sampler.sample(logits, q);
    out.tokens.push_back(id);
    out.distributions.push_back(std::move(q));
    if (out.tokens.size() == max_tokens) break;
    sampler.accept(id);
    const TokenId next[] = {id};
    logits = session_->evaluate(next);
  }
  return out;
}

}  // namespace cortiq
