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
      grammar_(std::move(grammar)),
      states_(*grammar_),
      state_(states_.intern(grammar_->initial())),
      banned_(banned_tokens(params, static_cast<size_t>(model.n_vocab()))) {
  if (model.tokenizer().vocab().kind == TokenizerKind::none) {
    throw Error("a grammar needs a tokenizer; this model has none (no_vocab)");
  }
}

const std::vector<uint64_t>& GrammarConstraint::allowed_bits(bool drop_space) {
  if (states_.full()) {
    // Start over from where the output stands (the masks are by number).
    const grammar::MatchState current = states_.state(state_);
    states_.clear();
    masks_.clear();
    state_ = states_.intern(current);
  } else if (masks_.size() >= kMaxMasks) {
    masks_.clear();  // the automaton stays: a mask is a cheap walk over it
  }
  const uint64_t key = uint64_t{state_} * 2 + (drop_space ? 1 : 0);
  if (const auto it = masks_.find(key); it != masks_.end()) return it->second;
  model_.grammar_mask().compute(states_, state_, allowed_, drop_space);
  std::vector<uint64_t> bits((allowed_.size() + 63) / 64, 0);
  for (size_t id = 0; id < allowed_.size(); ++id) {
    if (allowed_[id]) bits[id / 64] |= uint64_t{1} << (id % 64);
  }
  return masks_.emplace(key, std::move(bits)).first->second;
}

std::span<const float> GrammarConstraint::mask(std::span<const float> logits) {
  // The output shows its first token without the space a SentencePiece
  // piece starts with (StreamDecoder): the grammar sees what it shows.
  const bool drop_space = accepted_ == 0 && model_.tokenizer().vocab().add_space_prefix;
  const std::vector<uint64_t>& bits = allowed_bits(drop_space);
  masked_.assign(logits.begin(), logits.end());
  bool any = false;
  for (size_t id = 0; id < masked_.size(); ++id) {
    if (!((bits[id / 64] >> (id % 64)) & 1)) {
      masked_[id] = -std::numeric_limits<float>::infinity();
    } else if (!banned_[id]) {
      any = true;
    }
  }
  if (any) return masked_;
  if (states_.can_end(state_)) return {};
  throw Error(
      strfmt("no token continues the output under the grammar (after %zu generated "
             "tokens; the vocabulary has none, or the sampling options ban those it has)",
             accepted_));
}

void GrammarConstraint::accept(TokenId id) {
  const bool first = accepted_ == 0;
  ++accepted_;
  if (model_.tokenizer().vocab().is_end_of_generation(id)) return;
  for (const char c : model_.tokenizer().output_piece(id, first)) {
    const int32_t next = states_.next(state_, static_cast<uint8_t>(c));
    if (next == grammar::StateCache::kDead) {
      throw Error(strfmt("internal: the grammar refused token %d, which its mask allowed", id));
    }
    state_ = static_cast<uint32_t>(next);
  }
}

}  // namespace cortiq
