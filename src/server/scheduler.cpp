#include "server/scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <variant>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "kv/batch.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
#include "runtime/generation.hpp"
#include "runtime/sampler.hpp"
#include "scoring/embedding.hpp"
#include "server/api_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::server {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// A token's log-probability and its alternatives as the stream carries them.
TokenLogprob stream_logprob(const ChosenTokenLogProb& chosen) {
  TokenLogprob out;
  out.id = chosen.id;
  out.logprob = chosen.log_prob;
  for (const auto& choice : chosen.top) out.top.emplace_back(choice.id, choice.log_prob);
  return out;
}

// How a finished generation ends its choice.
ChoiceEnd choice_end(FinishReason reason) {
  switch (reason) {
    case FinishReason::max_tokens:
    case FinishReason::length:
      return ChoiceEnd::length;
    case FinishReason::cancelled:
      return ChoiceEnd::cancelled;
    case FinishReason::stop:
    case FinishReason::loop:
      break;
  }
  return ChoiceEnd::stop;
}

StreamEvent failure(int32_t choice, const std::string& message) {
  StreamEvent event;
  event.kind = StreamEvent::Kind::failed;
  event.choice = choice;
  event.error = message;
  return event;
}

StreamEvent cancelled(int32_t choice) {
  StreamEvent event;
  event.kind = StreamEvent::Kind::finished;
  event.choice = choice;
  event.end = ChoiceEnd::cancelled;
  return event;
}

// Ends every part of a pending request with a failure.
void fail_pending(const std::variant<GenerationJob, std::vector<EmbeddingJob>>& job,
                  RequestStream& stream, const std::string& message) {
  if (const auto* generation = std::get_if<GenerationJob>(&job)) {
    stream.push(failure(generation->choice, message));
  } else {
    for (const auto& input : std::get<std::vector<EmbeddingJob>>(job)) {
      stream.push(failure(input.index, message));
    }
  }
}

}  // namespace

// A queued request part: one generation job (a choice), or a whole
// embeddings request.
struct Scheduler::Pending {
  std::variant<GenerationJob, std::vector<EmbeddingJob>> job;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point arrived;
};

// The embeddings request being forwarded: one input at a time, a chunk of
// rows per scheduler iteration.
struct Scheduler::EmbeddingRun {
  std::unique_ptr<Pending> pending;
  size_t input = 0;  // the input being forwarded
  size_t done = 0;   // its rows forwarded so far
  std::vector<float> hidden;

  std::vector<EmbeddingJob>& jobs() { return std::get<std::vector<EmbeddingJob>>(pending->job); }
  const std::vector<TokenId>& tokens() const {
    return std::get<std::vector<EmbeddingJob>>(pending->job)[input].tokens;
  }
};

// A running choice: its generation (runtime/generation.hpp: sampling,
// drafts, stop and finish) and what the scheduler keeps beside it. It hosts
// the generation: released text goes to the stream as token events.
struct Scheduler::Sequence final : GenerationHost {
  Sequence(const Model& model, KvCache& cache_, GenerationJob j, std::shared_ptr<RequestStream> s,
           int32_t slot_, Drafter* drafter_, const SchedulerOptions& options,
           Clock::time_point arrived_)
      : job(std::move(j)),
        stream(std::move(s)),
        cache(cache_),
        slot(slot_),
        arrived(arrived_),
        admitted(Clock::now()) {
    GenerationRules rules;
    rules.sampling = generation_sampling(job.sampling, model.tokenizer().vocab(), job.ignore_eos);
    rules.penalize_prompt = false;  // OpenAI's penalties count the generated tokens only
    rules.max_tokens = job.max_tokens;
    rules.ignore_eos = job.ignore_eos;
    rules.stop = job.stop;
    rules.top_logprobs = job.top_logprobs;
    rules.grammar = job.grammar;
    rules.drafter = drafter_;
    rules.draft_max = options.draft_max;
    rules.draft_min = options.draft_min;
    rules.same_draws = options.same_draws;
    // Within what one step may append to a sequence.
    rules.pass_rows = options.step_rows;
    generation.emplace(model, cache, slot, std::move(rules), job.prompt, *this);
  }

  // The generation hosts on this object: it stays where it is.
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;

  int64_t final_length() const { return static_cast<int64_t>(job.prompt.size()) + job.max_tokens; }

  bool release(TokenId id, size_t index, std::string_view text) override {
    if (index == npos) {
      tail += text;
      return true;
    }
    StreamEvent event;
    event.choice = job.choice;
    event.token = id;
    if (job.top_logprobs >= 0) {
      event.logprob = stream_logprob(generation->log_probs()[index]);
      event.has_logprob = true;
    }
    event.text = std::string(text);
    stream->push(std::move(event));
    return true;
  }
  // A round's rejected drafts leave the cache (admission reserved the rows:
  // a cut never needs them forwarded again).
  void cut(int64_t rows) override { cache.truncate(slot, rows); }
  // At the finish the slot is released: nothing owed is worth forwarding.
  void settle(std::span<const TokenId> /*owed*/) override {}

  GenerationJob job;
  std::shared_ptr<RequestStream> stream;
  KvCache& cache;
  int32_t slot;
  std::optional<Generation> generation;
  std::string tail;        // the text held back to the end
  size_t prompt_done = 0;  // prompt tokens in the cache (attached or forwarded)
  int64_t cached = 0;      // of those, attached from the prefix cache
  // Recurrent state: the prompt lengths still ahead where it is kept for
  // prefix reuse, ascending.
  std::vector<int64_t> snapshot_points;
  bool speculating = false;  // this step carries drafts or owed rows
  bool decoding = false;
  bool finished = false;
  Clock::time_point arrived;
  Clock::time_point admitted;
  Clock::time_point first_token;
};

struct Scheduler::Engine {
  explicit Engine(std::unique_ptr<KvCache> kv)
      : owned_cache(std::move(kv)), cache(*owned_cache), slot_used(cache.shape().n_seq, false) {}
  std::unique_ptr<KvCache> owned_cache;
  KvCache& cache;  // where the model's passes read it (Model::make_kv_cache)
  ForwardBuffers buffers;
  std::vector<BatchRow> rows;
  std::vector<Sequence*> owners;  // the sequence of each logits row, in row order
  std::vector<float> logits;
  std::vector<float> hidden;    // [rows][n_embd] when an MTP drafter reads them
  std::vector<bool> slot_used;  // the last slot is the embeddings' own
  // Each slot's drafter, made when a sequence first needs it and kept (a
  // draft model's cache follows the next sequence of the slot).
  std::vector<std::shared_ptr<Drafter>> drafters;
};

Scheduler::Scheduler(std::shared_ptr<const Model> model, SchedulerOptions options, Metrics& metrics)
    : model_(std::move(model)), options_(options), metrics_(metrics) {
  if (!model_) throw Error("scheduler: no model");
  if (options_.parallel < 1) throw Error("--parallel must be at least 1");
  context_ = model_->context_length();
  if (options_.kv_cells <= 0) options_.kv_cells = context_ * options_.parallel;
  if (options_.kv_cells < context_) {
    throw Error(
        strfmt("the KV budget holds %lld positions, less than one context of %lld "
               "(raise --kv-budget or lower -c)",
               static_cast<long long>(options_.kv_cells), static_cast<long long>(context_)));
  }
  if (options_.step_rows <= 0) options_.step_rows = model_->options().chunk_size;
  KvCacheShape shape = model_->decoder().kv_cache_shape(
      options_.kv_cells, options_.parallel + 1, model_->options().kv_type, options_.block_size);
  // A step appends at most step_rows rows to a sequence: sliding-window
  // layers keep their window plus that, not the context.
  shape.n_ubatch = options_.step_rows;
  if (shape.state_width() > 0) {
    shape.n_prefix_states =
        options_.state_snapshots < 0 ? 2 * options_.parallel : options_.state_snapshots;
    const auto state_bytes = static_cast<uint64_t>(shape.state_width()) * sizeof(float);
    LOG_INFO("recurrent state: %s per sequence; %d snapshots of it (%s) for prefix reuse",
             human_bytes(state_bytes).c_str(), shape.n_prefix_states,
             human_bytes(state_bytes * static_cast<uint64_t>(shape.n_prefix_states)).c_str());
  }
  engine_ = std::make_unique<Engine>(model_->make_kv_cache(shape));
  engine_->drafters.resize(static_cast<size_t>(options_.parallel));
  if (options_.draft_max < 1) throw Error("--draft-max must be at least 1");
  publish_state();
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  stop();
}

void Scheduler::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Scheduler::submit(std::vector<GenerationJob> jobs, std::shared_ptr<RequestStream> stream) {
  const auto now = Clock::now();
  const int64_t block = options_.block_size;
  const int64_t n_blocks = engine_->cache.n_blocks();
  for (const auto& job : jobs) {
    const auto length = static_cast<int64_t>(job.prompt.size()) + job.max_tokens;
    if (job.prompt.empty() || job.max_tokens < 1 || length > context_ ||
        (length + block - 1) / block > n_blocks) {
      throw context_overflow("the request does not fit the server's context");
    }
  }
  const auto n = static_cast<int64_t>(jobs.size());
  if (n > options_.parallel + options_.max_queued) {
    throw invalid_request(
        strfmt("the request has %lld choices; this server takes at most %lld at "
               "once (--parallel + --queue)",
               static_cast<long long>(n),
               static_cast<long long>(options_.parallel + options_.max_queued)));
  }
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw unavailable("the server is shutting down");
    // Jobs beyond the idle slots wait; at most --queue of them.
    const int64_t idle = std::max<int64_t>(0, options_.parallel - running_.load());
    const int64_t waiting = static_cast<int64_t>(queue_.size()) + n - idle;
    if (waiting > options_.max_queued) {
      throw unavailable(
          strfmt("the server is busy: %zu jobs wait for %d slots (--queue %lld); "
                 "retry later",
                 queue_.size(), options_.parallel, static_cast<long long>(options_.max_queued)));
    }
    for (auto& job : jobs) {
      queue_.push_back(std::make_unique<Pending>(Pending{std::move(job), stream, now}));
    }
  }
  wake_.notify_all();
}

void Scheduler::submit(std::vector<EmbeddingJob> jobs, std::shared_ptr<RequestStream> stream) {
  for (const auto& job : jobs) {
    if (job.tokens.empty() || static_cast<int64_t>(job.tokens.size()) > context_) {
      throw context_overflow(strfmt("input %d has %zu tokens; the context holds %lld", job.index,
                                    job.tokens.size(), static_cast<long long>(context_)));
    }
  }
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw unavailable("the server is shutting down");
    if (static_cast<int64_t>(embedding_queue_.size()) >= options_.max_queued) {
      throw unavailable("the server is busy: too many embeddings requests wait; retry later");
    }
    embedding_queue_.push_back(
        std::make_unique<Pending>(Pending{std::move(jobs), std::move(stream), Clock::now()}));
  }
  wake_.notify_all();
}

void Scheduler::run() {
  for (;;) {
    // Cancelled sequences leave first, so their slots and blocks count for
    // the admissions below (and the metrics show them gone while idle).
    if (drop_cancelled()) publish_state();
    std::unique_ptr<Pending> embedding;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return stopping_ || !queue_.empty() || !embedding_queue_.empty() || !active_.empty() ||
               embedding_;
      });
      if (stopping_) break;
      admit_locked();
      if (!embedding_ && !embedding_queue_.empty()) {
        embedding = std::move(embedding_queue_.front());
        embedding_queue_.pop_front();
      }
    }
    if (embedding && !start_embedding(embedding)) {
      const std::lock_guard lock(mutex_);  // no room yet: back to the head of its queue
      embedding_queue_.push_front(std::move(embedding));
    }
    try {
      if (embedding_) embedding_step();
      if (!active_.empty()) step();
    } catch (const std::exception& error) {
      // Not expected (step() handles the forward pass's errors): end what
      // runs rather than the process.
      LOG_ERROR("scheduler step failed: %s", error.what());
      for (auto& seq : active_) {
        if (!seq->finished) fail(*seq, "internal error: " + describe(error));
      }
      active_.clear();
    }
    publish_state();
  }
  // Shutting down: everything still queued or running ends with a failure.
  const std::string message = "the server is shutting down";
  for (auto& seq : active_) fail(*seq, message);
  active_.clear();
  if (embedding_) {
    fail_pending(embedding_->pending->job, *embedding_->pending->stream, message);
    embedding_.reset();
  }
  const std::lock_guard lock(mutex_);
  for (auto* queue : {&queue_, &embedding_queue_}) {
    for (auto& pending : *queue) fail_pending(pending->job, *pending->stream, message);
    queue->clear();
  }
}

int32_t Scheduler::free_slot() const {
  for (int32_t slot = 0; slot < options_.parallel; ++slot) {
    if (!engine_->slot_used[static_cast<size_t>(slot)]) return slot;
  }
  return -1;
}

int64_t Scheduler::outstanding_blocks() const {
  const auto& cache = engine_->cache;
  int64_t total = 0;
  for (const auto& seq : active_) {
    total += cache.blocks_needed(seq->slot, seq->final_length() - cache.length(seq->slot));
  }
  if (embedding_) {
    const auto left = static_cast<int64_t>(embedding_->tokens().size() - embedding_->done);
    total += cache.blocks_needed(options_.parallel, left);
  }
  return total;
}

void Scheduler::admit_locked() {
  // In arrival order; a job that cannot start yet holds back those behind
  // it, so a long request is not starved by a stream of short ones.
  while (!queue_.empty()) {
    auto& head = *queue_.front();
    if (head.stream->cancelled()) {
      head.stream->push(cancelled(std::get<GenerationJob>(head.job).choice));
      metrics_.add_cancelled();
    } else if (!admit(head)) {
      return;
    }
    queue_.pop_front();
  }
}

bool Scheduler::admit(Pending& pending) {
  const int32_t slot = free_slot();
  if (slot < 0) return false;
  auto& job = std::get<GenerationJob>(pending.job);
  auto& cache = engine_->cache;
  // The choices of one request share their prompt: the second waits until
  // the first has read it, then attaches its blocks instead of recomputing
  // (with recurrent state, only where the cache keeps its snapshots).
  const bool can_share = cache.shares_prefixes() && std::ssize(job.prompt) > cache.block_size();
  for (const auto& seq : active_) {
    if (can_share && seq->stream == pending.stream && !seq->decoding &&
        seq->job.prompt == job.prompt) {
      return false;
    }
  }
  // The last prompt token is always forwarded: its logits give the first token.
  const auto prompt = std::span<const TokenId>(job.prompt);
  const auto attachable = prompt.first(prompt.size() - 1);
  // Counted before attaching, so a job that waits for memory attaches (and
  // copies a prefix state) only once it can start: the new blocks it needs
  // and the idle cached ones the attached prefix takes.
  const int64_t cached = cache.cached_prefix_length(attachable);
  const int64_t final_length = static_cast<int64_t>(job.prompt.size()) + job.max_tokens;
  const int64_t block = cache.block_size();
  const int64_t need =
      (final_length - cached + block - 1) / block + cache.idle_prefix_blocks(attachable);
  if (need > cache.n_available_blocks() - outstanding_blocks()) return false;
  const int64_t attached = cache.attach_prefix(slot, attachable);
  engine_->slot_used[static_cast<size_t>(slot)] = true;
  // A generation under a grammar drafts nothing (runtime/generation.hpp):
  // no slot drafter is made for it.
  Drafter* drafter = nullptr;
  if (options_.drafter && !job.grammar) {
    auto& own = engine_->drafters[static_cast<size_t>(slot)];
    if (!own) own = options_.drafter->for_another_sequence();
    drafter = own.get();
  }
  auto seq = std::make_unique<Sequence>(*model_, cache, std::move(job), pending.stream, slot,
                                        drafter, options_, pending.arrived);
  seq->prompt_done = static_cast<size_t>(attached);
  seq->cached = attached;
  if (cache.has_state() && cache.shape().n_prefix_states > 0) {
    // Where this prompt leaves the prefixes registered so far, and its
    // last boundary before the final token.
    const auto last = static_cast<int64_t>(attachable.size()) / block * block;
    for (const int64_t point : {cache.registered_prefix_length(attachable), last}) {
      if (point > attached &&
          (seq->snapshot_points.empty() || point > seq->snapshot_points.back())) {
        seq->snapshot_points.push_back(point);
      }
    }
  }
  metrics_.add_prompt_tokens(static_cast<int64_t>(seq->job.prompt.size()));
  metrics_.add_cache_hit_tokens(attached);
  active_.push_back(std::move(seq));
  running_.store(static_cast<int32_t>(active_.size()));
  return true;
}

bool Scheduler::start_embedding(std::unique_ptr<Pending>& pending) {
  auto& jobs = std::get<std::vector<EmbeddingJob>>(pending->job);
  if (pending->stream->cancelled()) {
    for (const auto& job : jobs) pending->stream->push(cancelled(job.index));
    pending.reset();
    return true;
  }
  // The largest input must fit beside what the running sequences may take.
  size_t longest = 0;
  for (const auto& job : jobs) longest = std::max(longest, job.tokens.size());
  auto& cache = engine_->cache;
  if (cache.blocks_needed(options_.parallel, static_cast<int64_t>(longest)) >
      cache.n_available_blocks() - outstanding_blocks()) {
    return false;
  }
  embedding_ = std::make_unique<EmbeddingRun>();
  embedding_->pending = std::move(pending);
  return true;
}

void Scheduler::embedding_step() {
  auto& run = *embedding_;
  auto& stream = *run.pending->stream;
  auto& cache = engine_->cache;
  const int32_t slot = options_.parallel;
  const auto& tokens = run.tokens();
  const int32_t index = run.jobs()[run.input].index;
  if (stream.cancelled()) {
    cache.clear(slot);
    for (size_t i = run.input; i < run.jobs().size(); ++i)
      stream.push(cancelled(run.jobs()[i].index));
    embedding_.reset();
    return;
  }
  const auto n_embd = static_cast<size_t>(model_->hparams().n_embd);
  run.hidden.resize(tokens.size() * n_embd);
  // A bidirectional encoder reads each input whole, in one step.
  const size_t end =
      model_->hparams().causal_attention
          ? std::min(tokens.size(), run.done + static_cast<size_t>(options_.step_rows))
          : tokens.size();
  try {
    auto& rows = engine_->rows;
    rows.clear();
    for (size_t i = run.done; i < end; ++i) {
      rows.push_back({tokens[i], static_cast<int32_t>(i), slot, true});
    }
    model_->run_pass(engine_->buffers, [&](ForwardContext& ctx) {
      ctx.output = RowOutput::hidden;
      ctx.prompt_rows = true;
      model_->decoder().forward(
          rows, cache, ctx,
          std::span(run.hidden).subspan(run.done * n_embd, (end - run.done) * n_embd));
    });
  } catch (const std::exception& e) {
    LOG_ERROR("embedding failed: %s", describe(e).c_str());
    cache.clear(slot);
    for (size_t i = run.input; i < run.jobs().size(); ++i) {
      metrics_.add_failed();
      stream.push(failure(run.jobs()[i].index, describe(e)));
    }
    embedding_.reset();
    return;
  }
  metrics_.record_step(static_cast<int64_t>(end - run.done), 0);
  run.done = end;
  if (run.done < tokens.size()) return;
  // The input is done: pool it, and go on with the next one.
  cache.clear(slot);
  StreamEvent event;
  event.kind = StreamEvent::Kind::embedding;
  event.choice = index;
  event.embedding = scoring::pool_embeddings(
      run.hidden, n_embd, scoring::pooling_of_file(model_->hparams().pooling_type),
      /*normalize=*/true);
  event.embedding_tokens = static_cast<int64_t>(tokens.size());
  metrics_.add_prompt_tokens(event.embedding_tokens);
  stream.push(std::move(event));
  run.done = 0;
  if (++run.input == run.jobs().size()) embedding_.reset();
}

bool Scheduler::drop_cancelled() {
  for (auto& seq : active_) {
    if (seq->stream->cancelled()) finish(*seq, ChoiceEnd::cancelled);
  }
  const bool any = std::erase_if(active_, [](const auto& seq) { return seq->finished; }) > 0;
  running_.store(static_cast<int32_t>(active_.size()));
  return any;
}

void Scheduler::step() {
  auto& e = *engine_;
  e.rows.clear();
  e.owners.clear();
  int64_t prefill_rows = 0;
  for (auto& seq : active_) {
    if (!seq->decoding) continue;
    const GenerationRows next = seq->generation->next_rows();
    seq->speculating = !next.drafts.empty() || !next.owed.empty();
    if (!next.drafts.empty()) {
      metrics_.add_drafts(static_cast<int64_t>(next.drafts.size()), 0);
      metrics_.add_draft_round();
    }
    auto at = static_cast<int32_t>(e.cache.length(seq->slot));
    for (const TokenId id : next.owed) e.rows.push_back({id, at++, seq->slot, false});
    e.rows.push_back({next.next, at, seq->slot, true});
    e.owners.push_back(seq.get());
    for (size_t j = 0; j < next.drafts.size(); ++j) {
      e.rows.push_back({next.drafts[j], at + 1 + static_cast<int32_t>(j), seq->slot, true});
      e.owners.push_back(seq.get());
    }
  }
  // Prompts share what the decode rows leave of the step (at least a
  // quarter of it, so prompts advance however many sequences decode).
  const auto decode_rows = static_cast<int64_t>(e.rows.size());
  int64_t budget = std::max({options_.step_rows - decode_rows, options_.step_rows / 4, int64_t{1}});
  for (auto& seq : active_) {
    if (seq->decoding || budget <= 0) continue;
    const auto& prompt = seq->job.prompt;
    const size_t n = prompt_rows(*seq, budget);
    for (size_t i = seq->prompt_done; i < seq->prompt_done + n; ++i) {
      const bool last = i + 1 == prompt.size();
      e.rows.push_back({prompt[i], static_cast<int32_t>(i), seq->slot, last});
      if (last) e.owners.push_back(seq.get());
    }
    seq->prompt_done += n;
    budget -= static_cast<int64_t>(n);
    prefill_rows += static_cast<int64_t>(n);
  }
  if (e.rows.empty()) return;
  const auto n_vocab = static_cast<size_t>(model_->n_vocab());
  e.logits.resize(e.owners.size() * n_vocab);
  const bool observed = options_.drafter && options_.drafter->observes_hidden();
  try {
    if (observed) e.hidden.resize(e.rows.size() * static_cast<size_t>(model_->hparams().n_embd));
    model_->run_pass(e.buffers, [&](ForwardContext& ctx) {
      ctx.output = RowOutput::logits;
      ctx.prompt_rows = prefill_rows > 0;
      ctx.generated_rows = decode_rows > 0;
      if (observed) ctx.all_hidden = e.hidden;
      model_->decoder().forward(e.rows, e.cache, ctx, e.logits);
    });
  } catch (const std::exception& error) {
    // The pass rolled back every row's cache entry: no sequence in it can
    // go on (every running sequence is in the batch).
    LOG_ERROR("forward step failed: %s", describe(error).c_str());
    for (auto& seq : active_) fail(*seq, "generation failed: " + describe(error));
    active_.clear();
    running_.store(0);
    return;
  }
  if (observed) show_rows_to_drafters();
  if (e.cache.shape().n_prefix_states > 0) save_prefix_states();
  for (size_t i = 0; i < e.owners.size();) {
    size_t n = 1;  // the sequence's rows: consecutive
    while (i + n < e.owners.size() && e.owners[i + n] == e.owners[i]) ++n;
    handle_rows(*e.owners[i], std::span<const float>(e.logits).subspan(i * n_vocab, n * n_vocab),
                n);
    i += n;
  }
  metrics_.record_step(prefill_rows, static_cast<int64_t>(e.owners.size()));
  std::erase_if(active_, [](const auto& seq) { return seq->finished; });
  running_.store(static_cast<int32_t>(active_.size()));
}

void Scheduler::show_rows_to_drafters() {
  auto& e = *engine_;
  const auto width = static_cast<size_t>(model_->hparams().n_embd);
  std::vector<TokenId> ids;
  for (size_t begin = 0; begin < e.rows.size();) {
    // A sequence's rows are consecutive, in position order.
    const int32_t slot = e.rows[begin].seq;
    size_t end = begin;
    ids.clear();
    while (end < e.rows.size() && e.rows[end].seq == slot) ids.push_back(e.rows[end++].token);
    for (auto& seq : active_) {
      Drafter* drafter = seq->generation->drafter();
      if (seq->slot != slot || !drafter) continue;
      try {
        drafter->observe(
            ids, e.rows[begin].pos,
            std::span<const float>(e.hidden).subspan(begin * width, (end - begin) * width));
      } catch (const std::exception& error) {
        // The output never rests on a drafter: this sequence goes on without.
        LOG_WARN("drafting stops for a sequence: %s", error.what());
        seq->generation->stop_drafting();
      }
    }
    begin = end;
  }
}

size_t Scheduler::prompt_rows(const Sequence& seq, int64_t budget) const {
  size_t n = std::min(seq.job.prompt.size() - seq.prompt_done, static_cast<size_t>(budget));
  // The chunk stops at the next snapshot point.
  if (!seq.snapshot_points.empty()) {
    n = std::min(n, static_cast<size_t>(seq.snapshot_points[0]) - seq.prompt_done);
  }
  return n;
}

void Scheduler::save_prefix_states() {
  auto& cache = engine_->cache;
  const int64_t block = cache.block_size();
  for (auto& seq : active_) {
    const int64_t length = cache.length(seq->slot);
    auto& points = seq->snapshot_points;
    if (!points.empty() && points[0] == length) {
      cache.save_prefix_state(seq->slot);
      points.erase(points.begin());
    } else if (length % block == 0 && length >= std::ssize(seq->job.prompt) && !seq->speculating) {
      // The prompt's end or a reply's boundary (its sequence is marked
      // decoding only once its output is handled, after this). Not after a
      // step with drafts: their rows may not stay.
      cache.save_prefix_state(seq->slot, /*rolling=*/true);
    }
  }
}

void Scheduler::handle_rows(Sequence& seq, std::span<const float> logits, size_t n_rows) {
  if (!seq.decoding) {
    seq.decoding = true;
    seq.first_token = Clock::now();
  }
  Generation& generation = *seq.generation;
  const size_t tokens_before = generation.tokens().size();
  const int64_t accepted_before = generation.speculation().accepted;
  std::optional<std::string> failure;
  try {
    generation.take(logits, n_rows);
  } catch (const std::exception& error) {
    // e.g. logit_bias banned every token, a grammar's dead end, a drafter's failure
    failure = error.what();
  }
  // What was sampled and streamed counts, whatever ended the step.
  metrics_.add_generated_tokens(static_cast<int64_t>(generation.tokens().size() - tokens_before));
  metrics_.add_drafts(0, generation.speculation().accepted - accepted_before);
  if (failure) {
    fail(seq, *failure);
  } else if (generation.finished()) {
    finish(seq, choice_end(generation.finish_reason()));
  }
}

void Scheduler::finish(Sequence& seq, ChoiceEnd end) {
  const auto now = Clock::now();
  StreamEvent event;
  event.kind = StreamEvent::Kind::finished;
  event.choice = seq.job.choice;
  event.end = end;
  if (end == ChoiceEnd::cancelled) {
    seq.generation->cancel();
  } else {
    event.text = std::move(seq.tail);
  }
  const Generation& generation = *seq.generation;
  auto& stats = event.stats;
  stats.prompt_tokens = static_cast<int64_t>(seq.job.prompt.size());
  stats.cached_tokens = seq.cached;
  stats.generated_tokens = static_cast<int64_t>(generation.tokens().size());
  stats.drafted_tokens = generation.speculation().drafted;
  stats.accepted_tokens = generation.speculation().accepted;
  stats.draft_rounds = generation.speculation().passes;
  stats.queue_ms = ms_between(seq.arrived, seq.admitted);
  if (seq.decoding) {
    stats.prompt_ms = ms_between(seq.admitted, seq.first_token);
    stats.ttft_ms = ms_between(seq.arrived, seq.first_token);
    stats.decode_ms = ms_between(seq.first_token, now);
  }
  if (end == ChoiceEnd::cancelled) metrics_.add_cancelled();
  release(seq);
  seq.stream->push(std::move(event));
}

void Scheduler::fail(Sequence& seq, const std::string& message) {
  metrics_.add_failed();
  release(seq);
  seq.stream->push(failure(seq.job.choice, message));
}

void Scheduler::release(Sequence& seq) {
  engine_->cache.clear(seq.slot);
  engine_->slot_used[static_cast<size_t>(seq.slot)] = false;
  seq.finished = true;
}

void Scheduler::publish_state() {
  SchedulerState state;
  {
    const std::lock_guard lock(mutex_);
    state.queued = static_cast<int64_t>(queue_.size() + embedding_queue_.size());
  }
  const auto& cache = engine_->cache;
  state.running = static_cast<int64_t>(active_.size());
  state.kv_blocks_used = cache.n_used_blocks();
  state.kv_blocks_cached = cache.n_cached_blocks();
  state.kv_blocks_free = cache.n_free_blocks();
  state.kv_block_size = cache.block_size();
  state.state_snapshots = cache.n_prefix_states();
  metrics_.publish(state);
}

}  // namespace cortiq::server
