// Loop stop. For every period p the detector keeps the run L_p: how many
// tokens at the end each equal the token p places before (so the last
// L_p + p tokens are copies of one block of p, the first L_p repeating it).
// A push extends L_p by one when the new token repeats, else resets it: O(max_period).
//
// - Held: the max over p of L_p (the tokens beyond the first copy of the
//   longest repeating run); everything before is released. Runs grow by at
//   most one per push, so the released count never goes back.
// - Loop: the block of the last p tokens occurs k = 1 + L_p / p times in a
//   row at the end, with k >= min_repeats and k * p >= min_tokens. Among the
//   periods that qualify the one with the longest L_p wins (ties: the
//   shorter period); keep = n - L_p, the end of the run's first copy.
#include "runtime/loop_detector.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq {

LoopDetector::LoopDetector(LoopStopParams params) : params_(params) {
  if (params_.max_period < 1)
    throw Error(strfmt("loop stop: max_period must be >= 1, got %d", params_.max_period));
  if (params_.min_repeats < 2)
    throw Error(strfmt("loop stop: min_repeats must be >= 2, got %d", params_.min_repeats));
  runs_.assign(static_cast<size_t>(params_.max_period), 0);
}

LoopDetector::Step LoopDetector::push(TokenId id) {
  if (looped_) return {0, true, keep_};
  tokens_.push_back(id);
  const size_t n = tokens_.size();
  const size_t min_repeats = static_cast<size_t>(params_.min_repeats);
  const size_t min_tokens = static_cast<size_t>(std::max(params_.min_tokens, 0));

  size_t held = 0;
  size_t loop_run = 0;
  bool loop = false;
  for (size_t p = 1; p <= runs_.size(); ++p) {
    size_t& run = runs_[p - 1];
    run = (n > p && tokens_[n - 1] == tokens_[n - 1 - p]) ? run + 1 : 0;
    held = std::max(held, run);
    const size_t copies = 1 + run / p;
    if (copies >= min_repeats && copies * p >= min_tokens && (!loop || run > loop_run)) {
      loop = true;
      loop_run = run;
    }
  }

  Step step;
  if (loop) {
    // released_ <= n - held_before_push <= n - (loop_run - 1) - 1 = keep.
    const size_t keep = std::max(released_, n - loop_run);
    step.release = keep - released_;
    step.loop = true;
    step.keep = keep;
    released_ = keep;
    looped_ = true;
    keep_ = keep;
    return step;
  }
  const size_t target = std::max(released_, n - held);
  step.release = target - released_;
  released_ = target;
  return step;
}

size_t LoopDetector::flush() {
  if (looped_) return 0;
  const size_t release = tokens_.size() - released_;
  released_ = tokens_.size();
  return release;
}

void LoopDetector::reset() {
  tokens_.clear();
  released_ = 0;
  std::fill(runs_.begin(), runs_.end(), 0);
  looped_ = false;
  keep_ = 0;
}

}  // namespace cortiq
