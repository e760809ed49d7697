#include "runtime/grammar_constraint.hpp"

#include <limits>
#include <utility>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "grammar/token_mask.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

namespace {

// The tokens the sampler never draws, whatever the logits.
std::vector<uint8_t> banned_tokens(const SamplingParams& params, size_t n_vocab) {
  std::vector<uint8_t> banned(n_vocab, 0);
  for (const TokenId id : params.suppressed) banned[static_cast<size_t>(id)] = 1;
  for (const auto& [id, bias] : params.logit_bias) {
    if (bias == -std::numeric_limits<float>::infinity()) banned[static_cast<size_t>(id)] = 1;
  }
  return banned;
}

}  // namespace

GrammarConstraint::GrammarConstraint(const Model& model,
                                     std::shared_ptr<const grammar::CompiledGrammar> grammar,
                                     const SamplingParams& params)
    : model_(model),
      matcher_(std::move(grammar)),
      banned_(banned_tokens(params, static_cast<size_t>(model.n_vocab()))) {
  if (model.tokenizer().vocab().kind == TokenizerKind::none) {
    throw Error("a grammar needs a tokenizer; this model has none (no_vocab)");
  }
}

std::span<const float> GrammarConstraint::mask(std::span<const float> logits) {
  // The output shows its first token without the space a SentencePiece
  // piece starts with (StreamDecoder): the grammar sees what it shows.
  const bool drop_space = accepted_ == 0 && model_.tokenizer().vocab().add_space_prefix;
  model_.grammar_mask().compute(matcher_.grammar(), matcher_.state(), allowed_, drop_space);
  masked_.assign(logits.begin(), logits.end());
  bool any = false;
  for (size_t id = 0; id < masked_.size(); ++id) {
    if (!allowed_[id]) {
      masked_[id] = -std::numeric_limits<float>::infinity();
    } else if (!banned_[id]) {
      any = true;
    }
  }
  if (any) return masked_;
  if (matcher_.can_end()) return {};
  throw Error(
      strfmt("no token continues the output under the grammar (after %zu generated "
             "tokens; the vocabulary has none, or the sampling options ban those it has)",
             accepted_));
}

void GrammarConstraint::accept(TokenId id) {
  const bool first = accepted_ == 0;
  ++accepted_;
  if (model_.tokenizer().vocab().is_end_of_generation(id)) return;
  if (!matcher_.accept(model_.tokenizer().output_piece(id, first))) {
    throw Error(strfmt("internal: the grammar refused token %d, which its mask allowed", id));
  }
}

}  // namespace cortiq
