#include "runtime/generation.hpp"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "kv/kv_cache.hpp"
#include "runtime/speculation.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

Generation::Generation(const Model& model, KvCache& cache, int32_t seq, GenerationRules rules,
                       std::span<const TokenId> prompt, GenerationHost& host)
    : model_(model),
      cache_(cache),
      seq_(seq),
      rules_(std::move(rules)),
      host_(host),
      prompt_tokens_(static_cast<int64_t>(prompt.size())),
      context_(model.context_length()),
      sampler_(rules_.sampling, model.n_vocab()),
      output_(model.tokenizer(), rules_.stop) {
  if (rules_.grammar) {
    constraint_.emplace(model, rules_.grammar, sampler_.params());
    rules_.drafter = nullptr;  // drafts are not checked against a grammar
  }
  if (rules_.loop_stop) {
    loops_.emplace(*rules_.loop_stop);
    lookahead_.emplace(model.tokenizer(), rules_.stop);
  }
  if (rules_.penalize_prompt) {
    for (const TokenId id : prompt) sampler_.accept(id);
  }
  draft_depth_ = rules_.draft_max;
}

void Generation::take(std::span<const float> logits, size_t n_rows) {
  const auto n_vocab = static_cast<size_t>(model_.n_vocab());
  if (finished_) throw Error("the generation has finished");
  const size_t n_drafts = in_flight_ ? drafts_.size() : 0;
  if (n_rows != n_drafts + 1) {
    throw Error(strfmt("a generation takes the %zu wanted rows of its pass, not %zu", n_drafts + 1,
                       n_rows));
  }
  for (size_t j = 0; j < n_rows; ++j) {
    last_row_ = j;
    if (reached_max()) return finish(FinishReason::max_tokens, j);
    const auto row = logits.subspan(j * n_vocab, n_vocab);
    const std::optional<TokenId> id = sample(row, j);
    if (!id) return finish(FinishReason::stop, j);  // the grammar is complete
    if (rules_.confidence) {
      confidence_.push_back(
          static_cast<float>(token_probability(row, *id, model_.calibration_temperature())));
    }
    if (rules_.top_logprobs >= 0) {
      log_probs_.push_back(
          chosen_token_log_prob(row, *id, static_cast<size_t>(rules_.top_logprobs)));
    }
    sampler_.accept(*id);
    tokens_.push_back(*id);
    if (const auto reason = ends_after(j)) return finish(*reason, j);
    ++continued_;
    if (j < n_drafts && drafts_[j] == *id) {
      ++speculation_.accepted;  // its row, forwarded after it, gives the next logits
      continue;
    }
    // The round ends here: the next one's depth follows what it kept.
    if (n_drafts > 0) {
      draft_depth_ = next_draft_depth(static_cast<int64_t>(j), static_cast<int64_t>(n_drafts),
                                      draft_depth_, rules_.draft_max);
    }
    end_round(j);
    plan_drafts();
    return;
  }
}

std::optional<TokenId> Generation::sample(std::span<const float> row, size_t j) {
  if (constraint_) {
    const std::span<const float> allowed = constraint_->mask(row);
    if (allowed.empty()) return std::nullopt;
    const TokenId id = sampler_.sample(allowed);
    constraint_->accept(id);
    return id;
  }
  if (in_flight_ && j < draft_q_.size()) {
    return sampler_.sample_speculative(row, drafts_[j], draft_q_[j]);
  }
  return sampler_.sample(row);
}

std::optional<FinishReason> Generation::ends_after(size_t j) {
  const TokenId id = tokens_.back();
  if (!rules_.ignore_eos && model_.tokenizer().vocab().is_end_of_generation(id)) {
    ends_with_eog_ = true;
    return FinishReason::stop;
  }
  if (lookahead_) {
    lookahead_->push(id);
    if (lookahead_->stopped()) return FinishReason::stop;
    const LoopDetector::Step step = loops_->push(id);
    if (step.loop) {
      loop_keep_ = step.keep;
      return FinishReason::loop;
    }
    release_up_to(released_ + step.release);
  } else {
    release_up_to(tokens_.size());
    if (output_.stopped()) return FinishReason::stop;
  }
  if (!keep_going_ || host_.cancelled()) return FinishReason::cancelled;
  if (reached_max()) return FinishReason::max_tokens;
  // The rows of the context before this token: the cache's but the drafts
  // forwarded after it.
  const auto unchecked = static_cast<int64_t>(in_flight_ ? drafts_.size() - j : 0);
  if (cache_.length(seq_) - unchecked + static_cast<int64_t>(owed_.size()) >= context_) {
    return FinishReason::length;
  }
  return std::nullopt;
}

void Generation::release_up_to(size_t end) {
  for (; released_ < end && keep_going_; ++released_) {
    const TokenId id = tokens_[released_];
    if (!host_.release(id, released_, output_.push(id))) keep_going_ = false;
  }
}

bool Generation::reached_max() const {
  return rules_.max_tokens >= 0 && static_cast<int64_t>(tokens_.size()) >= rules_.max_tokens;
}

GenerationRows Generation::next_rows() {
  if (finished_ || tokens_.empty()) {
    throw Error("a generation's next rows follow a token it took and did not finish after");
  }
  forwarded_owed_ = std::exchange(owed_, {});
  if (!drafts_.empty()) {
    if (cache_.has_state()) {
      // Where a rejection takes the state back to.
      round_start_ = cache_.length(seq_);
      cache_.checkpoint_state(seq_);
    }
    ++speculation_.passes;
    speculation_.drafted += static_cast<int64_t>(drafts_.size());
  }
  in_flight_ = true;
  return {forwarded_owed_, tokens_.back(), drafts_};
}

void Generation::end_round(size_t kept) {
  const bool round = in_flight_ && !drafts_.empty();
  in_flight_ = false;
  if (round) {
    const auto unchecked = static_cast<int64_t>(drafts_.size() - kept);
    if (unchecked == 0) {
      cache_.drop_checkpoint(seq_);  // every draft kept: the round's rows are the context's
    } else if (cache_.has_state()) {
      // The state went through the rejected drafts too: back to the
      // checkpoint, the round's good rows owed to the next pass (which
      // forwards them anyway: the rollback costs rows in a pass, not a pass).
      const auto rows = cache_.tokens(seq_);
      owed_.assign(rows.begin() + round_start_, rows.end() - unchecked);
      cache_.truncate(seq_, round_start_);
    } else {
      host_.cut(cache_.length(seq_) - unchecked);
    }
  }
  drafts_.clear();
  draft_q_.clear();
}

void Generation::plan_drafts() {
  if (!rules_.drafter) return;
  const auto owed = static_cast<int64_t>(owed_.size());
  // A model with state forwards the owed rows with the drafts: past
  // draft_max of them, a pass without drafts settles them.
  if (owed >= rules_.draft_max) return;
  int64_t room =
      std::min(std::max(draft_depth_, rules_.draft_min), context_ - cache_.length(seq_) - owed - 1);
  if (rules_.max_tokens >= 0) {
    room = std::min(room, rules_.max_tokens - static_cast<int64_t>(tokens_.size()) - 1);
  }
  if (rules_.pass_rows > 0) room = std::min(room, rules_.pass_rows - 1 - owed);
  if (room <= 0) return;
  DraftRequest request;
  request.room = room;
  request.draft_min = rules_.draft_min;
  request.same_draws = rules_.same_draws;
  request.n_vocab = model_.n_vocab();
  const auto history = cache_.tokens(seq_);
  std::vector<TokenId> context(history.begin(), history.end());
  context.insert(context.end(), owed_.begin(), owed_.end());
  context.push_back(tokens_.back());
  try {
    drafts_ = propose_drafts(*rules_.drafter, context, request, sampler_.params(), draft_q_);
  } catch (const std::bad_alloc&) {
    throw;  // out of memory stays what it is (the C API's status says so)
  } catch (const std::exception& error) {
    throw Error(std::string("drafting failed: ") + error.what());
  }
}

void Generation::stop_drafting() {
  rules_.drafter = nullptr;
  if (!in_flight_) {
    drafts_.clear();  // planned, not forwarded
    draft_q_.clear();
  }
}

void Generation::cancel() {
  if (finished_) return;
  if (in_flight_) throw Error("a generation is cancelled between passes, not during one");
  keep_going_ = false;  // nothing more is released
  finish(FinishReason::cancelled, 0);
}

void Generation::finish(FinishReason reason, size_t kept) {
  finished_ = true;
  finish_reason_ = reason;
  // Every finish keeps the prompt and the tokens before the last: drafts
  // forwarded after it go (the last token's own row with them).
  end_round(kept);
  host_.settle(std::exchange(owed_, {}));
  cache_.drop_checkpoint(seq_);
  if (!keep_going_) finish_reason_ = FinishReason::cancelled;
  if (finish_reason_ == FinishReason::loop) {
    // One copy of the repeated block stays; the cache keeps exactly the
    // prompt and the kept tokens but the last.
    tokens_.resize(loop_keep_);
    if (rules_.confidence) confidence_.resize(loop_keep_);
    if (rules_.top_logprobs >= 0) log_probs_.resize(loop_keep_);
    host_.cut(prompt_tokens_ + static_cast<int64_t>(loop_keep_) - 1);
  }
  // What the loop detector still holds (all of it unless the caller
  // stopped), then whatever the decoder and the stop matcher hold back.
  release_up_to(tokens_.size() - (ends_with_eog_ ? 1 : 0));
  if (keep_going_) {
    const std::string tail = output_.flush();
    if (!tail.empty()) host_.release(kNoToken, GenerationHost::npos, tail);
  }
}

}  // namespace cortiq
