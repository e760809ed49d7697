// Session: one conversation's KV cache and history, prefill with prefix
// reuse, and the generation loop (sample, stream, stop, forward).
#include <algorithm>
#include <limits>
#include <optional>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "base/timer.hpp"
#include "cortiq/cortiq.hpp"
#include "kernels/cpu/log_softmax.hpp"
#include "kv/batch.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "runtime/grammar_constraint.hpp"
#include "runtime/loop_detector.hpp"
#include "runtime/sampler.hpp"
#include "runtime/speculation.hpp"
#include "runtime/text_output.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::max_tokens:
      return "max_tokens";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::loop:
      return "loop";
  }
  return "stop";
}

double Timings::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prefill_tokens) / prefill_seconds : 0.0;
}
double Timings::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_tokens) / decode_seconds : 0.0;
}

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {
  if (!model_) throw Error("Session: no model");
  const auto& hp = model_->hparams();
  KvCacheShape shape =
      model_->decoder().kv_cache_shape(model_->context_length(), 1, model_->options().kv_type);
  // Sliding-window layers keep their window plus one chunk, not the context.
  shape.n_ubatch = model_->options().chunk_size;
  cache_ = model_->make_kv_cache(shape);
  buffers_ = std::make_unique<ForwardBuffers>();
  last_logits_.resize(static_cast<size_t>(hp.n_vocab));
}

Session::~Session() = default;

int64_t Session::cache_rows() const {
  return cache_->length(0);
}

std::span<const TokenId> Session::history() const {
  return cache_->tokens(0);
}

void Session::reset() {
  cache_->clear_all();
  clear_drafts();
  owed_.clear();
}

void Session::truncate(size_t n_tokens) {
  if (n_tokens > history().size()) {
    throw Error(strfmt("cannot keep %zu tokens of a history of %zu", n_tokens, history().size()));
  }
  if (n_tokens < history().size()) cut_history(static_cast<int64_t>(n_tokens));
}

void Session::check_prompt(std::span<const TokenId> prompt) const {
  if (prompt.empty()) throw Error("the prompt is empty");
  const int64_t ctx = model_->context_length();
  if (static_cast<int64_t>(prompt.size()) > ctx) {
    throw Error(strfmt("the prompt has %zu tokens but the context holds %lld (raise it with -c)",
                       prompt.size(), static_cast<long long>(ctx)));
  }
  const int64_t n_vocab = model_->n_vocab();
  for (const TokenId id : prompt) {
    if (id < 0 || id >= n_vocab) {
      throw Error(strfmt("token id %d is outside the vocabulary (0..%lld)", id,
                         static_cast<long long>(n_vocab - 1)));
    }
  }
}

size_t Session::reuse_prefix(std::span<const TokenId> prompt) {
  const auto cached = history();
  const size_t limit = std::min(cached.size(), prompt.size());
  size_t common = 0;
  while (common < limit && cached[common] == prompt[common]) ++common;
  // The last prompt token is always forwarded: its logits start the reply.
  if (common == prompt.size()) --common;
  // Sliding-window layers may no longer hold what the rows after a deep cut
  // see, and recurrent state holds every position: the prompt is forwarded
  // again from the nearest point the cache can go back to (a state
  // snapshot, or the start).
  common = static_cast<size_t>(cache_->nearest_truncation(0, static_cast<int64_t>(common)));
  cache_->truncate(0, static_cast<int64_t>(common));
  return common;
}

void Session::cut_history(int64_t rows) {
  if (cache_->can_truncate(0, rows)) {
    cache_->truncate(0, rows);
    return;
  }
  // Sliding-window layers released rows the positions after the cut see,
  // or recurrent state holds them: the kept history is forwarded again from
  // the nearest point the cache can go back to.
  const std::vector<TokenId> kept(history().begin(), history().begin() + rows);
  const int64_t from = cache_->nearest_truncation(0, rows);
  cache_->truncate(0, from);
  refeed(std::span(kept).subspan(static_cast<size_t>(from)));
}

void Session::refeed(std::span<const TokenId> ids) {
  // Not cancellable: whoever cut the history counts on getting it back.
  const size_t chunk = chunk_rows(0);
  for (size_t start = 0; start < ids.size(); start += chunk) {
    const auto part = ids.subspan(start, std::min(chunk, ids.size() - start));
    const bool last = start + part.size() == ids.size();
    forward_rows(part, last ? part.size() - 1 : part.size(),
                 last ? last_logits_ : std::span<float>(), RowOutput::logits);
  }
}

void Session::forward_rows(std::span<const TokenId> ids, size_t first_wanted,
                           std::span<float> logits, RowOutput output) {
  rows_.clear();
  const auto start = static_cast<int32_t>(cache_rows());
  for (size_t i = 0; i < ids.size(); ++i) {
    rows_.push_back({ids[i], start + static_cast<int32_t>(i), 0, i >= first_wanted});
  }
  const auto run = [&](ForwardContext& ctx) {
    ctx.output = output;
    ctx.prompt_rows = !decoding_;
    ctx.generated_rows = decoding_;
    if (observer_) {
      observed_hidden_.resize(ids.size() * static_cast<size_t>(model_->hparams().n_embd));
      ctx.all_hidden = observed_hidden_;
    }
    model_->decoder().forward(rows_, *cache_, ctx, logits);
  };
  model_->run_pass(*buffers_, run);
  if (observer_) observer_->observe(ids, start, observed_hidden_);
}

size_t Session::chunk_rows(int64_t requested) const {
  int64_t rows = requested > 0 ? requested : model_->options().chunk_size;
  // The cache's sliding-window rows are sized for the model's chunk.
  if (const int64_t most = cache_->max_append(); most > 0) rows = std::min(rows, most);
  return static_cast<size_t>(rows);
}

bool Session::prefill(std::span<const TokenId> ids, int64_t chunk_size, size_t first_row,
                      std::vector<float>* logits, bool last_logits) {
  const auto n_vocab = static_cast<size_t>(model_->n_vocab());
  const size_t chunk = chunk_rows(chunk_size);
  for (size_t start = 0; start < ids.size(); start += chunk) {
    if (cancelled()) return false;
    const auto part = ids.subspan(start, std::min(chunk, ids.size() - start));
    const size_t end = start + part.size();
    if (logits && end > first_row) {
      const size_t from = std::max(start, first_row);  // first wanted row of the chunk
      forward_rows(
          part, from - start,
          std::span<float>(*logits).subspan((from - first_row) * n_vocab, (end - from) * n_vocab),
          RowOutput::logits);
    } else if (end == ids.size() && last_logits) {
      forward_rows(part, part.size() - 1, last_logits_, RowOutput::logits);
    } else {
      forward_rows(part, part.size(), {}, RowOutput::logits);
    }
    if (on_prefill_ && *on_prefill_ && !(*on_prefill_)(cache_rows(), prefill_total_)) cancel();
  }
  if (logits && ids.size() > first_row) {
    std::copy_n(logits->end() - static_cast<std::ptrdiff_t>(n_vocab), n_vocab,
                last_logits_.begin());
  }
  return true;
}

bool Session::prefill_prompt(std::span<const TokenId> ids) {
  if (!cache_->has_state() || ids.size() < 2) return prefill(ids, 0, 0, nullptr);
  // Forwarding in two parts gives the same bits (batch invariance).
  if (!prefill(ids.first(ids.size() - 1), 0, 0, nullptr, /*last_logits=*/false)) return false;
  cache_->save_state_snapshot(0);
  return prefill(ids.last(1), 0, 0, nullptr);
}

void Session::check_extension(std::span<const TokenId> ids) const {
  check_prompt(ids);
  if (cache_rows() + static_cast<int64_t>(ids.size()) > model_->context_length()) {
    throw Error(strfmt("the tokens do not fit in the context (%zu cached + %zu new > %lld)",
                       history().size(), ids.size(),
                       static_cast<long long>(model_->context_length())));
  }
}

std::vector<float> Session::extend(std::span<const TokenId> ids, int64_t chunk_size,
                                   bool want_logits, size_t first_row) {
  check_extension(ids);
  if (want_logits && first_row > ids.size()) {
    throw Error(strfmt("first logits row %zu is past the %zu tokens", first_row, ids.size()));
  }
  std::vector<float> logits;  // allocated only after the checks
  if (want_logits) logits.resize((ids.size() - first_row) * static_cast<size_t>(model_->n_vocab()));
  begin_call();
  const size_t before = history().size();
  bool completed = false;
  try {
    completed = prefill(ids, chunk_size, first_row, want_logits ? &logits : nullptr);
  } catch (...) {
    reset();
    throw;
  }
  if (!completed) {
    // The forwarded prefix stays in the history; no partial result escapes.
    throw Cancelled(
        strfmt("cancelled after %zu of %zu tokens", history().size() - before, ids.size()));
  }
  return logits;
}

void Session::begin_call() {
  if (open_cancel_scopes_ == 0) cancel_requested_.store(false, std::memory_order_relaxed);
}

Session::CancelScope::CancelScope(Session& session) : session_(session) {
  session_.begin_call();
  ++session_.open_cancel_scopes_;
}

Session::CancelScope::~CancelScope() {
  --session_.open_cancel_scopes_;
}

std::vector<float> Session::evaluate(std::span<const TokenId> ids, int64_t chunk_size,
                                     size_t first_row) {
  return extend(ids, chunk_size, true, first_row);
}

std::vector<float> Session::embeddings(std::span<const TokenId> ids, int64_t chunk_size) {
  const auto n_embd = static_cast<size_t>(model_->hparams().n_embd);
  // A bidirectional encoder reads the ids whole, in one pass, with nothing
  // before them: every row attends to every other.
  const bool whole = !model_->hparams().causal_attention;
  if (whole) reset();
  check_extension(ids);
  const size_t chunk = whole ? std::max<size_t>(ids.size(), 1) : chunk_rows(chunk_size);
  std::vector<float> hidden(ids.size() * n_embd);
  begin_call();
  size_t done = 0;  // ids forwarded
  try {
    while (done < ids.size() && !cancelled()) {
      const auto part = ids.subspan(done, std::min(chunk, ids.size() - done));
      forward_rows(part, 0, std::span(hidden).subspan(done * n_embd, part.size() * n_embd),
                   RowOutput::hidden);
      done += part.size();
    }
  } catch (...) {
    reset();
    throw;
  }
  if (done < ids.size()) {
    // As in extend(): the forwarded prefix stays in the history.
    throw Cancelled(strfmt("cancelled after %zu of %zu tokens", done, ids.size()));
  }
  return hidden;
}

Session::NllSum Session::nll(std::span<const TokenId> ids, size_t from, int64_t chunk_size) {
  check_extension(ids);  // before the history changes
  // Token j of `fed` is predicted by row j - 1. To score ids[0] against the
  // history, the history's last token is taken off the cache and forwarded
  // again in front of the ids (batch invariance gives it the same logits),
  // so the score never rests on logits kept from an earlier call.
  std::vector<TokenId> fed;
  size_t lead = 0;      // tokens of `fed` before ids[0]
  size_t cut_from = 0;  // the history's length before its last token was taken off
  if (history().empty()) {
    from = std::max<size_t>(from, 1);
  } else if (from == 0) {
    cut_from = history().size();
    fed.push_back(history().back());
    cut_history(cache_rows() - 1);
    lead = 1;
  }
  fed.insert(fed.end(), ids.begin(), ids.end());
  NllSum total;
  if (from >= ids.size()) {
    extend(fed, chunk_size, false);
    return total;
  }
  const size_t first_row = lead + from - 1;
  std::vector<float> logits;
  try {
    logits = extend(fed, chunk_size, true, first_row);
  } catch (const Cancelled&) {
    // Cancelled before its first chunk: the token taken off the history
    // goes back, so a cancelled call leaves at least the history it found.
    if (lead == 1 && history().size() < cut_from) refeed(std::span(fed).first(1));
    throw;
  }
  const auto n_vocab = static_cast<size_t>(model_->n_vocab());
  for (size_t j = lead + from; j < fed.size(); ++j) {
    const auto row = std::span<const float>(logits).subspan((j - 1 - first_row) * n_vocab, n_vocab);
    total.sum -= kernels::log_softmax(row).log_prob(row, fed[j]);
    ++total.count;
  }
  return total;
}

void Session::append(std::span<const TokenId> ids) {
  extend(ids, 0, false);
}

GenerateResult Session::generate(std::string_view prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
  TokenizeOptions tok;
  tok.add_special = options.add_special;
  tok.parse_special = options.parse_special;
  const auto ids = model_->tokenizer().encode(prompt, tok);
  return generate(std::span<const TokenId>(ids), options, on_token);
}

GenerateResult Session::generate(std::span<const TokenId> prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
  if (options.grammar && options.speculative.drafter) {
    // Drafts are not checked against a grammar: with one, decoding is plain.
    GenerateOptions plain = options;
    plain.speculative = {};
    return generate(prompt, plain, on_token);
  }
  // Everything that can be refused is checked before any state moves.
  check_prompt(prompt);
  const auto& vocab = model_->tokenizer().vocab();
  if (!options.stop.empty() && vocab.kind == TokenizerKind::none) {
    throw Error("stop strings need a tokenizer; this model has none (no_vocab)");
  }
  if (options.grammar && vocab.kind == TokenizerKind::none) {
    throw Error("a grammar needs a tokenizer; this model has none (no_vocab)");
  }
  Sampler sampler(generation_sampling(options.sampling, vocab, options.ignore_eos),
                  model_->n_vocab());
  std::optional<LoopDetector> loops;
  if (options.loop_stop) loops.emplace(options.loop);
  begin_call();

  GenerateResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  // A drafter that reads hidden states (MTP) sees the rows this call forwards.
  const auto& drafter = options.speculative.drafter;
  observer_ = drafter && drafter->observes_hidden() ? drafter.get() : nullptr;
  struct ObserverScope {
    Drafter*& observer;
    ~ObserverScope() { observer = nullptr; }
  } observer_scope{observer_};
  try {
    Timer prefill_timer;
    const size_t reused = reuse_prefix(prompt);
    result.cached_tokens = static_cast<int64_t>(reused);
    const size_t before = history().size();
    on_prefill_ = &options.on_prefill;
    prefill_total_ = static_cast<int64_t>(prompt.size());
    const bool prefilled = prefill_prompt(prompt.subspan(reused));
    on_prefill_ = nullptr;
    result.timings.prefill_tokens = static_cast<int64_t>(history().size() - before);
    result.timings.prefill_seconds = prefill_timer.seconds();
    if (!prefilled || cancelled()) {
      result.finish_reason = FinishReason::cancelled;
      return result;
    }
    for (const TokenId id : prompt) sampler.accept(id);
    decode_loop(sampler, loops ? &*loops : nullptr, options, on_token, result);
  } catch (...) {
    // A failure after work started is terminal: no stale state survives.
    on_prefill_ = nullptr;
    reset();
    throw;
  }
  result.generated_tokens = static_cast<int64_t>(result.tokens.size());
  return result;
}

int64_t Session::unchecked_drafts() const {
  return static_cast<int64_t>(pending_drafts_.size() - next_draft_);
}

int64_t Session::decoded_rows() const {
  return cache_rows() - unchecked_drafts() + static_cast<int64_t>(owed_.size());
}

void Session::clear_drafts() {
  pending_drafts_.clear();
  pending_q_.clear();
  next_draft_ = 0;
}

void Session::end_round() {
  if (pending_drafts_.empty()) return;
  const int64_t unchecked = unchecked_drafts();
  if (unchecked == 0) {
    // Every draft kept: the round's rows are all the context's.
    owed_.clear();
    cache_->drop_checkpoint(0);
  } else if (cache_->has_state()) {
    // The state went through the rejected drafts too: back to the
    // checkpoint before the round, and the round's good rows are owed to
    // the next pass (which forwards them anyway, so the rollback costs
    // rows in a pass rather than a pass).
    const auto good = history().subspan(static_cast<size_t>(round_start_));
    owed_.assign(good.begin(), good.end() - unchecked);
    cache_->truncate(0, round_start_);
  } else {
    cut_history(cache_rows() - unchecked);
  }
  clear_drafts();
}

void Session::settle_drafts() {
  end_round();
  if (!owed_.empty()) {
    // Not forwarded through prefill(): it stops when cancelled, and the
    // history must hold these rows whatever ended the generation.
    const std::vector<TokenId> owed = std::exchange(owed_, {});
    forward_rows(owed, owed.size(), {}, RowOutput::logits);
  }
  cache_->drop_checkpoint(0);
}

TokenId Session::next_token(Sampler& sampler) {
  if (next_draft_ < pending_q_.size()) {
    return sampler.sample_speculative(last_logits_, pending_drafts_[next_draft_],
                                      pending_q_[next_draft_]);
  }
  return sampler.sample(last_logits_);
}

std::vector<TokenId> Session::draft_after(TokenId id, const Sampler& sampler,
                                          const SpeculativeOptions& spec, int64_t budget) {
  if (!spec.drafter) return {};
  const auto owed = static_cast<int64_t>(owed_.size());
  // A model with state forwards the owed rows with the drafts: past
  // draft_max of them, a pass without drafts settles them.
  if (owed >= spec.draft_max) return {};
  DraftRequest request;
  request.room = std::min({std::max(draft_depth_, spec.draft_min),
                           model_->context_length() - cache_rows() - owed - 1, budget - 1});
  request.draft_min = spec.draft_min;
  request.same_draws = spec.same_draws;
  request.n_vocab = model_->n_vocab();
  if (request.room <= 0) return {};
  std::vector<TokenId> context(history().begin(), history().end());
  context.insert(context.end(), owed_.begin(), owed_.end());
  context.push_back(id);
  return propose_drafts(*spec.drafter, context, request, sampler.params(), pending_q_);
}

void Session::advance(TokenId id, const Sampler& sampler, const GenerateOptions& options,
                      int64_t budget, GenerateResult& result) {
  const auto n_vocab = static_cast<size_t>(model_->n_vocab());
  ++result.timings.decode_tokens;
  if (next_draft_ < pending_drafts_.size() && pending_drafts_[next_draft_] == id) {
    // The sampler picked the draft: its row, forwarded with the pass that
    // drafted it, gives the next logits.
    ++next_draft_;
    const auto row = std::span<const float>(draft_logits_).subspan(next_draft_ * n_vocab, n_vocab);
    std::copy(row.begin(), row.end(), last_logits_.begin());
    ++result.speculative.accepted;
    return;
  }
  const SpeculativeOptions& spec = options.speculative;
  if (!pending_drafts_.empty()) {
    // A round ends: the next one's depth follows what this one kept.
    draft_depth_ = next_draft_depth(static_cast<int64_t>(next_draft_),
                                    static_cast<int64_t>(pending_drafts_.size()), draft_depth_,
                                    spec.draft_max);
  }
  end_round();  // the drafts from the first wrong one on leave the context
  const std::vector<TokenId> draft = draft_after(id, sampler, spec, budget);
  std::vector<TokenId> step = std::exchange(owed_, {});
  const size_t first_wanted = step.size();  // the row of id
  step.push_back(id);
  if (draft.empty()) {
    forward_rows(step, first_wanted, last_logits_, RowOutput::logits);
    return;
  }
  if (cache_->has_state()) {
    // Where a rejection takes the state back to.
    round_start_ = cache_rows();
    cache_->checkpoint_state(0);
  }
  step.insert(step.end(), draft.begin(), draft.end());
  draft_logits_.resize((step.size() - first_wanted) * n_vocab);
  forward_rows(step, first_wanted, draft_logits_, RowOutput::logits);
  std::copy_n(draft_logits_.begin(), n_vocab, last_logits_.begin());
  pending_drafts_ = draft;
  ++result.speculative.passes;
  result.speculative.drafted += static_cast<int64_t>(pending_drafts_.size());
}

// The decode loop. Text reaches the user through `output`, fed with the
// tokens the loop detector has released (all of them at once without loop
// stop). With loop stop, a second pipeline (`lookahead`) sees every token as
// it is sampled, so a stop string is found even while the loop detector
// holds its tokens back.
void Session::decode_loop(Sampler& sampler, LoopDetector* loops, const GenerateOptions& options,
                          const TokenCallback& on_token, GenerateResult& result) {
  decoding_ = true;
  struct DecodingScope {
    bool& decoding;
    ~DecodingScope() { decoding = false; }
  } decoding_scope{decoding_};
  const auto& tokenizer = model_->tokenizer();
  const auto& vocab = tokenizer.vocab();
  TextOutput output(tokenizer, options.stop);
  std::optional<TextOutput> lookahead;
  if (loops) lookahead.emplace(tokenizer, options.stop);
  size_t released = 0;  // generated tokens handed to `output`
  bool keep_going = true;
  const auto release_up_to = [&](size_t end) {
    for (; released < end && keep_going; ++released) {
      const TokenId id = result.tokens[released];
      std::string piece = output.push(id);
      result.text += piece;
      if (on_token && !on_token(piece, id)) keep_going = false;
    }
  };
  const auto reached_max = [&] {
    return options.max_tokens >= 0 &&
           static_cast<int64_t>(result.tokens.size()) >= options.max_tokens;
  };

  Timer timer;
  draft_depth_ = options.speculative.draft_max;
  const int64_t context = model_->context_length();
  bool ends_with_eog = false;
  size_t loop_keep = 0;
  std::optional<GrammarConstraint> constraint;
  if (options.grammar) constraint.emplace(*model_, options.grammar, sampler.params());
  for (;;) {
    if (reached_max()) {
      result.finish_reason = FinishReason::max_tokens;
      break;
    }
    TokenId id = kNoToken;
    if (constraint) {
      const std::span<const float> allowed = constraint->mask(last_logits_);
      if (allowed.empty()) {
        result.finish_reason = FinishReason::stop;  // the grammar is complete
        break;
      }
      id = sampler.sample(allowed);
      constraint->accept(id);
    } else {
      id = next_token(sampler);
    }
    if (options.confidence) {
      result.confidence.push_back(static_cast<float>(
          token_probability(last_logits_, id, model_->calibration_temperature())));
    }
    sampler.accept(id);
    result.tokens.push_back(id);
    if (!options.ignore_eos && vocab.is_end_of_generation(id)) {
      ends_with_eog = true;
      result.finish_reason = FinishReason::stop;
      break;
    }
    if (lookahead) {
      lookahead->push(id);
      if (lookahead->stopped()) {
        result.finish_reason = FinishReason::stop;
        break;
      }
      const auto step = loops->push(id);
      if (step.loop) {
        loop_keep = step.keep;
        result.finish_reason = FinishReason::loop;
        break;
      }
      release_up_to(released + step.release);
    } else {
      release_up_to(result.tokens.size());
      if (output.stopped()) {
        result.finish_reason = FinishReason::stop;
        break;
      }
    }
    if (!keep_going || cancelled()) {
      result.finish_reason = FinishReason::cancelled;
      break;
    }
    if (reached_max()) {
      result.finish_reason = FinishReason::max_tokens;
      break;
    }
    // The rows of the tokens before id, as in plain decoding (drafts
    // forwarded after it are not yet part of the history).
    if (decoded_rows() >= context) {
      result.finish_reason = FinishReason::length;
      break;
    }
    const int64_t budget = options.max_tokens >= 0
                               ? options.max_tokens - static_cast<int64_t>(result.tokens.size())
                               : std::numeric_limits<int64_t>::max();
    advance(id, sampler, options, budget, result);
  }
  // Every finish keeps the prompt and the tokens before the last: drafts
  // forwarded after it go (the last token's own row with them).
  settle_drafts();
  if (!keep_going) result.finish_reason = FinishReason::cancelled;

  if (result.finish_reason == FinishReason::loop) {
    // One copy of the repeated block stays; the cache keeps exactly the
    // prompt and the kept tokens but the last (the contract of every finish).
    result.tokens.resize(loop_keep);
    if (options.confidence) result.confidence.resize(loop_keep);
    const auto kept_rows =
        static_cast<int64_t>(result.prompt_tokens) + static_cast<int64_t>(loop_keep) - 1;
    cut_history(kept_rows);
  }
  // Release what the loop detector still holds (all of it unless the user
  // stopped), then whatever the decoder and the stop matcher hold back.
  release_up_to(result.tokens.size() - (ends_with_eog ? 1 : 0));
  if (keep_going) {
    const std::string tail = output.flush();
    if (!tail.empty()) {
      result.text += tail;
      if (on_token) on_token(tail, kNoToken);
    }
  }
  result.timings.decode_seconds = timer.seconds();
}

}  // namespace cortiq
