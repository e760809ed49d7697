// Session: one conversation's KV cache and history, prefill with prefix
// reuse, and the passes of its generation (runtime/generation.hpp samples,
// verifies, streams and stops).
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
#include "runtime/generation.hpp"
#include "runtime/sampler.hpp"
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
  refed_ = true;
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

namespace {

GenerationRules generation_rules(const GenerateOptions& options, const Vocab& vocab) {
  GenerationRules rules;
  rules.sampling = generation_sampling(options.sampling, vocab, options.ignore_eos);
  rules.penalize_prompt = options.penalize_prompt;
  rules.max_tokens = options.max_tokens;
  rules.ignore_eos = options.ignore_eos;
  rules.stop = options.stop;
  if (options.loop_stop) rules.loop_stop = options.loop;
  rules.confidence = options.confidence;
  rules.grammar = options.grammar;
  const SpeculativeOptions& spec = options.speculative;
  rules.drafter = spec.drafter.get();
  rules.draft_max = spec.draft_max;
  rules.draft_min = spec.draft_min;
  rules.same_draws = spec.same_draws;
  return rules;
}

}  // namespace

// What a generation asks of the session: its text to the caller's callback
// and the result, cuts of the history, the owed rows forwarded at the end.
class Session::Host final : public GenerationHost {
 public:
  Host(Session& session, const TokenCallback& on_token, GenerateResult& result)
      : session_(session), on_token_(on_token), result_(result) {}

  bool release(TokenId id, size_t /*index*/, std::string_view text) override {
    result_.text += text;
    return !on_token_ || on_token_(text, id);
  }
  void cut(int64_t rows) override { session_.cut_history(rows); }
  void settle(std::span<const TokenId> owed) override {
    // Not forwarded through prefill(): it stops when cancelled, and the
    // history must hold these rows whatever ended the generation.
    if (!owed.empty()) session_.forward_rows(owed, owed.size(), {}, RowOutput::logits);
  }
  bool cancelled() const override { return session_.cancelled(); }

 private:
  Session& session_;
  const TokenCallback& on_token_;
  GenerateResult& result_;
};

GenerateResult Session::generate(std::span<const TokenId> prompt, const GenerateOptions& options,
                                 const TokenCallback& on_token) {
  // Everything that can be refused is checked before any state moves.
  check_prompt(prompt);
  const auto& vocab = model_->tokenizer().vocab();
  if (!options.stop.empty() && vocab.kind == TokenizerKind::none) {
    throw Error("stop strings need a tokenizer; this model has none (no_vocab)");
  }
  if (options.grammar && vocab.kind == TokenizerKind::none) {
    throw Error("a grammar needs a tokenizer; this model has none (no_vocab)");
  }
  GenerateResult result;
  Host host(*this, on_token, result);
  Generation generation(*model_, *cache_, 0, generation_rules(options, vocab), prompt, host);
  begin_call();

  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  // A drafter that reads hidden states (MTP) sees the rows this call forwards.
  Drafter* drafter = generation.drafter();
  observer_ = drafter && drafter->observes_hidden() ? drafter : nullptr;
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
    decode_loop(generation, result);
  } catch (...) {
    // A failure after work started is terminal: no stale state survives.
    on_prefill_ = nullptr;
    reset();
    throw;
  }
  result.tokens.assign(generation.tokens().begin(), generation.tokens().end());
  if (options.confidence) {
    result.confidence.assign(generation.confidence().begin(), generation.confidence().end());
  }
  result.finish_reason = generation.finish_reason();
  result.speculative = generation.speculation();
  result.timings.decode_tokens = generation.continued();
  result.generated_tokens = static_cast<int64_t>(result.tokens.size());
  return result;
}

// The generation's passes, one at a time: the first token from the prompt's
// last row, then each pass of the rows it names (the last token, the drafts
// after it) until it finishes. last_logits_ follows the row each token was
// sampled from, as in plain decoding.
void Session::decode_loop(Generation& generation, GenerateResult& result) {
  decoding_ = true;
  struct DecodingScope {
    bool& decoding;
    ~DecodingScope() { decoding = false; }
  } decoding_scope{decoding_};
  const auto n_vocab = static_cast<size_t>(model_->n_vocab());
  Timer timer;
  generation.take(last_logits_, 1);
  while (!generation.finished()) {
    const GenerationRows rows = generation.next_rows();
    pass_ids_.assign(rows.owed.begin(), rows.owed.end());
    pass_ids_.push_back(rows.next);
    pass_ids_.insert(pass_ids_.end(), rows.drafts.begin(), rows.drafts.end());
    std::span<float> logits = last_logits_;
    if (!rows.drafts.empty()) {
      pass_logits_.resize(rows.wanted() * n_vocab);
      logits = pass_logits_;
    }
    forward_rows(pass_ids_, rows.owed.size(), logits, RowOutput::logits);
    refed_ = false;
    generation.take(logits, rows.wanted());
    // The row the last token came from, unless the finish cut the history
    // and forwarded it again (the rows a cut takes back give the logits).
    if (logits.data() != last_logits_.data() && !(generation.finished() && refed_)) {
      const auto row = logits.subspan(generation.last_row() * n_vocab, n_vocab);
      std::ranges::copy(row, last_logits_.begin());
    }
  }
  result.timings.decode_seconds = timer.seconds();
}

}  // namespace cortiq
