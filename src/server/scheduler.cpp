#include "server/scheduler.hpp"

#include <algorithm>
#include <chrono>
#include <variant>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "kernels/cpu/log_softmax.hpp"
#include "model/decoder_model.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
#include "runtime/kv_cache.hpp"
#include "runtime/text_output.hpp"
#include "scoring/embedding.hpp"
#include "server/api_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::server {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

// The token's log-probability at temperature 1 and the `top` most likely
// tokens (ties to the lower id), as OpenAI's logprobs report them.
TokenLogprob token_logprob(std::span<const float> logits, TokenId id, int32_t top) {
  const auto softmax = kernels::log_softmax(logits);
  TokenLogprob out;
  out.id = id;
  out.logprob = softmax.log_prob(logits, id);
  if (top <= 0) return out;
  std::vector<TokenId> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<TokenId>(i);
  const auto n = std::min(ids.size(), static_cast<size_t>(top));
  const auto better = [&](TokenId a, TokenId b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
  for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], softmax.log_prob(logits, ids[i]));
  return out;
}

// ignore_eos: end-of-generation tokens are never sampled (as in Session).
SamplingParams effective_sampling(const GenerationJob& job, const Model& model) {
  SamplingParams params = job.sampling;
  if (job.ignore_eos) {
    for (const TokenId id : model.tokenizer().vocab().end_of_generation) {
      params.suppressed.push_back(id);
    }
  }
  return params;
}

StreamEvent failure(int32_t choice, const std::string& message) {
  StreamEvent event;
  event.kind = StreamEvent::Kind::failed;
  event.choice = choice;
  event.error = message;
  return event;
}

}  // namespace

struct Scheduler::Pending {
  std::variant<GenerationJob, EmbeddingJob> job;
  std::shared_ptr<RequestStream> stream;
  Clock::time_point arrived;

  int32_t part() const {
    return std::holds_alternative<GenerationJob>(job) ? std::get<GenerationJob>(job).choice
                                                      : std::get<EmbeddingJob>(job).index;
  }
};

struct Scheduler::Sequence {
  Sequence(const Model& model, GenerationJob j, std::shared_ptr<RequestStream> s, int32_t slot_,
           Clock::time_point arrived_)
      : job(std::move(j)),
        stream(std::move(s)),
        slot(slot_),
        sampler(effective_sampling(job, model), model.n_vocab()),
        output(model.tokenizer(), job.stop),
        arrived(arrived_),
        admitted(Clock::now()) {}

  int64_t final_length() const { return static_cast<int64_t>(job.prompt.size()) + job.max_tokens; }

  GenerationJob job;
  std::shared_ptr<RequestStream> stream;
  int32_t slot;
  Sampler sampler;
  TextOutput output;
  size_t prompt_done = 0;  // prompt tokens in the cache (attached or forwarded)
  int64_t cached = 0;      // of those, attached from the prefix cache
  int64_t generated = 0;
  TokenId next = 0;  // the token the next decode row feeds
  bool decoding = false;
  bool finished = false;
  Clock::time_point arrived;
  Clock::time_point admitted;
  Clock::time_point first_token;
};

struct Scheduler::Engine {
  explicit Engine(const KvCacheShape& shape) : cache(shape), slot_used(shape.n_seq, false) {}
  KvCache cache;
  ForwardBuffers buffers;
  std::vector<BatchRow> rows;
  std::vector<Sequence*> owners;  // the sequence of each logits row, in row order
  std::vector<float> logits;
  std::vector<bool> slot_used;  // the last slot is the embeddings' own
};

Scheduler::Scheduler(std::shared_ptr<const Model> model, SchedulerOptions options, Metrics& metrics)
    : model_(std::move(model)), options_(options), metrics_(metrics) {
  if (!model_) throw Error("scheduler: no model");
  if (options_.parallel < 1) throw Error("--parallel must be at least 1");
  context_ = options_.context > 0 ? options_.context : model_->context_length();
  if (options_.kv_cells <= 0) options_.kv_cells = context_ * options_.parallel;
  if (options_.kv_cells < context_) {
    throw Error(
        strfmt("the KV budget holds %lld positions, less than one context of %lld "
               "(raise --kv-budget or lower -c)",
               static_cast<long long>(options_.kv_cells), static_cast<long long>(context_)));
  }
  if (options_.step_rows <= 0) options_.step_rows = model_->options().chunk_size;
  const auto& hp = model_->hparams();
  const KvCacheShape shape{hp.n_layer,         hp.k_width(),          hp.v_width(),
                           options_.kv_cells,  options_.parallel + 1, model_->options().kv_type,
                           options_.block_size};
  engine_ = std::make_unique<Engine>(shape);
  publish_state();
  worker_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  stop();
}

int64_t Scheduler::kv_blocks() const {
  return engine_->cache.n_blocks();
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
    if (job.prompt.empty() || job.max_tokens < 1 || length > context_ + 1 ||
        (length + block - 1) / block > n_blocks) {
      throw invalid_request("the request does not fit the server's context");
    }
  }
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw unavailable("the server is shutting down");
    if (queued_jobs_ + static_cast<int64_t>(jobs.size()) > options_.max_queued) {
      throw unavailable(strfmt(
          "the server is busy: %lld jobs are waiting (--queue %lld); retry "
          "later",
          static_cast<long long>(queued_jobs_), static_cast<long long>(options_.max_queued)));
    }
    for (auto& job : jobs) {
      queue_.push_back(std::make_unique<Pending>(Pending{std::move(job), stream, now}));
    }
    queued_jobs_ += static_cast<int64_t>(jobs.size());
  }
  wake_.notify_all();
}

void Scheduler::submit(std::vector<EmbeddingJob> jobs, std::shared_ptr<RequestStream> stream) {
  const auto now = Clock::now();
  for (const auto& job : jobs) {
    if (job.tokens.empty() || static_cast<int64_t>(job.tokens.size()) > context_) {
      throw context_overflow(strfmt("input %d has %zu tokens; the context holds %lld", job.index,
                                    job.tokens.size(), static_cast<long long>(context_)));
    }
  }
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) throw unavailable("the server is shutting down");
    if (queued_jobs_ + static_cast<int64_t>(jobs.size()) > options_.max_queued) {
      throw unavailable("the server is busy; retry later");
    }
    for (auto& job : jobs) {
      queue_.push_back(std::make_unique<Pending>(Pending{std::move(job), stream, now}));
    }
    queued_jobs_ += static_cast<int64_t>(jobs.size());
  }
  wake_.notify_all();
}

void Scheduler::run() {
  for (;;) {
    std::unique_ptr<Pending> embedding;
    // Cancelled sequences leave first, so their slots and blocks count
    // for the admissions below (and the metrics show them gone while idle).
    if (drop_cancelled()) publish_state();
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) break;
      admit_locked();
      // One embedding input per iteration, between decode steps.
      if (!queue_.empty() && std::holds_alternative<EmbeddingJob>(queue_.front()->job)) {
        embedding = std::move(queue_.front());
        queue_.pop_front();
        --queued_jobs_;
      }
    }
    if (embedding && !run_embedding(*embedding)) {
      const std::lock_guard lock(mutex_);  // no room yet: back to the head of the queue
      queue_.push_front(std::move(embedding));
      ++queued_jobs_;
    }
    if (!active_.empty()) {
      step();
    } else if (!embedding) {
      // Nothing runs and the head cannot start: with every block free that
      // means it never will (submit() rules this out; this keeps the loop
      // from spinning if it ever happens).
      std::unique_ptr<Pending> stuck;
      {
        const std::lock_guard lock(mutex_);
        if (!queue_.empty()) {
          stuck = std::move(queue_.front());
          queue_.pop_front();
          --queued_jobs_;
        }
      }
      if (stuck)
        stuck->stream->push(failure(stuck->part(), "the request does not fit the KV memory"));
    }
    publish_state();
  }
  // Shutting down: everything still queued or running ends with a failure.
  for (auto& seq : active_) {
    engine_->cache.clear(seq->slot);
    seq->stream->push(failure(seq->job.choice, "the server is shutting down"));
  }
  active_.clear();
  const std::lock_guard lock(mutex_);
  for (auto& pending : queue_) {
    pending->stream->push(failure(pending->part(), "the server is shutting down"));
  }
  queue_.clear();
  queued_jobs_ = 0;
}

int32_t Scheduler::free_slot() const {
  for (int32_t slot = 0; slot < options_.parallel; ++slot) {
    if (!engine_->slot_used[static_cast<size_t>(slot)]) return slot;
  }
  return -1;
}

int64_t Scheduler::outstanding_blocks() const {
  int64_t total = 0;
  for (const auto& seq : active_) {
    const int64_t length = engine_->cache.length(seq->slot);
    total += engine_->cache.blocks_needed(seq->slot, seq->final_length() - length);
  }
  return total;
}

void Scheduler::admit_locked() {
  // In arrival order; a job that cannot start yet holds back those behind
  // it, so a long request is not starved by a stream of short ones.
  while (!queue_.empty()) {
    auto& head = *queue_.front();
    if (head.stream->cancelled()) {
      head.stream->push([&] {
        StreamEvent event;
        event.kind = StreamEvent::Kind::finished;
        event.choice = head.part();
        event.end = ChoiceEnd::cancelled;
        return event;
      }());
      metrics_.add_cancelled();
    } else if (std::holds_alternative<EmbeddingJob>(head.job) || !admit(head)) {
      return;
    }
    queue_.pop_front();
    --queued_jobs_;
  }
}

bool Scheduler::admit(Pending& pending) {
  const int32_t slot = free_slot();
  if (slot < 0) return false;
  auto& job = std::get<GenerationJob>(pending.job);
  auto& cache = engine_->cache;
  // The last prompt token is always forwarded: its logits give the first token.
  const auto prompt = std::span<const TokenId>(job.prompt);
  const int64_t attached = cache.attach_prefix(slot, prompt.first(prompt.size() - 1));
  const int64_t final_length = static_cast<int64_t>(job.prompt.size()) + job.max_tokens;
  const int64_t need = cache.blocks_needed(slot, final_length - attached);
  if (need > cache.n_available_blocks() - outstanding_blocks()) {
    cache.clear(slot);
    return false;
  }
  engine_->slot_used[static_cast<size_t>(slot)] = true;
  auto seq =
      std::make_unique<Sequence>(*model_, std::move(job), pending.stream, slot, pending.arrived);
  seq->prompt_done = static_cast<size_t>(attached);
  seq->cached = attached;
  metrics_.add_prompt_tokens(static_cast<int64_t>(seq->job.prompt.size()));
  metrics_.add_cache_hit_tokens(attached);
  active_.push_back(std::move(seq));
  return true;
}

bool Scheduler::run_embedding(Pending& pending) {
  auto& job = std::get<EmbeddingJob>(pending.job);
  if (pending.stream->cancelled()) {
    StreamEvent event;
    event.kind = StreamEvent::Kind::finished;
    event.choice = job.index;
    event.end = ChoiceEnd::cancelled;
    pending.stream->push(std::move(event));
    return true;
  }
  auto& cache = engine_->cache;
  const int32_t slot = options_.parallel;
  const auto n = static_cast<int64_t>(job.tokens.size());
  if (cache.blocks_needed(slot, n) > cache.n_available_blocks() - outstanding_blocks()) {
    return false;
  }
  const auto n_embd = static_cast<size_t>(model_->hparams().n_embd);
  std::vector<float> hidden(job.tokens.size() * n_embd);
  try {
    ForwardContext ctx{model_->pool(), engine_->buffers, RowOutput::hidden};
    const auto chunk = static_cast<size_t>(options_.step_rows);
    for (size_t start = 0; start < job.tokens.size(); start += chunk) {
      const size_t end = std::min(job.tokens.size(), start + chunk);
      engine_->rows.clear();
      for (size_t i = start; i < end; ++i) {
        engine_->rows.push_back({job.tokens[i], static_cast<int32_t>(i), slot, true});
      }
      model_->decoder().forward(engine_->rows, cache, ctx,
                                std::span(hidden).subspan(start * n_embd, (end - start) * n_embd));
    }
    cache.clear(slot);
    StreamEvent event;
    event.kind = StreamEvent::Kind::embedding;
    event.choice = job.index;
    event.embedding =
        scoring::pool_embeddings(hidden, n_embd, scoring::Pooling::mean, /*normalize=*/true);
    event.embedding_tokens = n;
    metrics_.add_prompt_tokens(n);
    metrics_.record_step(n, 0);
    pending.stream->push(std::move(event));
  } catch (const std::exception& e) {
    cache.clear(slot);
    LOG_ERROR("embedding failed: %s", e.what());
    pending.stream->push(failure(job.index, e.what()));
  }
  return true;
}

bool Scheduler::drop_cancelled() {
  for (auto& seq : active_) {
    if (seq->stream->cancelled()) finish(*seq, ChoiceEnd::cancelled);
  }
  return std::erase_if(active_, [](const auto& seq) { return seq->finished; }) > 0;
}

void Scheduler::step() {
  auto& e = *engine_;
  e.rows.clear();
  e.owners.clear();
  int64_t prefill_rows = 0;
  for (auto& seq : active_) {
    if (!seq->decoding) continue;
    e.rows.push_back({seq->next, static_cast<int32_t>(e.cache.length(seq->slot)), seq->slot, true});
    e.owners.push_back(seq.get());
  }
  // Prompts share what the decode rows leave of the step (at least a
  // quarter of it, so prompts advance however many sequences decode).
  const auto decode_rows = static_cast<int64_t>(e.rows.size());
  int64_t budget = std::max(options_.step_rows - decode_rows, options_.step_rows / 4);
  for (auto& seq : active_) {
    if (seq->decoding || budget <= 0) continue;
    const auto& prompt = seq->job.prompt;
    const size_t n = std::min(prompt.size() - seq->prompt_done, static_cast<size_t>(budget));
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
  try {
    ForwardContext ctx{model_->pool(), e.buffers, RowOutput::logits};
    model_->decoder().forward(e.rows, e.cache, ctx, e.logits);
  } catch (const std::exception& error) {
    // The batch's sequences cannot go on (their cache rows were rolled
    // back); the others were not in it.
    LOG_ERROR("forward step failed: %s", error.what());
    for (auto& seq : active_) fail(*seq, std::string("generation failed: ") + error.what());
    std::erase_if(active_, [](const auto& seq) { return seq->finished; });
    return;
  }
  for (size_t i = 0; i < e.owners.size(); ++i) {
    handle_output(*e.owners[i], std::span<const float>(e.logits).subspan(i * n_vocab, n_vocab));
  }
  metrics_.record_step(prefill_rows, static_cast<int64_t>(e.owners.size()));
  std::erase_if(active_, [](const auto& seq) { return seq->finished; });
}

void Scheduler::handle_output(Sequence& seq, std::span<const float> logits) {
  if (!seq.decoding) {
    seq.decoding = true;
    seq.first_token = Clock::now();
  }
  StreamEvent event;
  event.choice = seq.job.choice;
  TokenId id = 0;
  try {
    id = seq.sampler.sample(logits);
  } catch (const std::exception& error) {  // e.g. logit_bias banned every token
    fail(seq, error.what());
    return;
  }
  seq.sampler.accept(id);
  ++seq.generated;
  metrics_.add_generated_tokens(1);
  if (!seq.job.ignore_eos && model_->tokenizer().vocab().is_end_of_generation(id)) {
    finish(seq, ChoiceEnd::stop);
    return;
  }
  if (seq.job.top_logprobs >= 0) {
    event.logprob = token_logprob(logits, id, seq.job.top_logprobs);
    event.has_logprob = true;
  }
  event.token = id;
  event.text = seq.output.push(id);
  seq.stream->push(std::move(event));
  if (seq.output.stopped()) {
    finish(seq, ChoiceEnd::stop);
  } else if (seq.generated >= seq.job.max_tokens || engine_->cache.length(seq.slot) >= context_) {
    finish(seq, ChoiceEnd::length);
  } else {
    seq.next = id;
  }
}

void Scheduler::finish(Sequence& seq, ChoiceEnd end) {
  const auto now = Clock::now();
  StreamEvent event;
  event.kind = StreamEvent::Kind::finished;
  event.choice = seq.job.choice;
  event.end = end;
  if (end != ChoiceEnd::cancelled) event.text = seq.output.flush();
  auto& stats = event.stats;
  stats.prompt_tokens = static_cast<int64_t>(seq.job.prompt.size());
  stats.cached_tokens = seq.cached;
  stats.generated_tokens = seq.generated;
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
    state.queued = queued_jobs_;
  }
  const auto& cache = engine_->cache;
  state.running = static_cast<int64_t>(active_.size());
  state.kv_blocks_used = cache.n_used_blocks();
  state.kv_blocks_cached = cache.n_cached_blocks();
  state.kv_blocks_free = cache.n_free_blocks();
  state.kv_block_size = cache.block_size();
  metrics_.publish(state);
}

}  // namespace cortiq::server
