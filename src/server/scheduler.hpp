// Continuous batching. One worker thread owns the KV cache and runs every
// admitted sequence forward together: each step is one batched forward pass
// with one decode row per generating sequence plus, within the step's row
// budget, the next chunk of the prompts still being read — so a long prompt
// is prefilled over several steps while the others keep generating. New jobs
// join between steps, finished and cancelled ones leave and release their
// KV blocks. A job is admitted only when a slot is free and the KV blocks it
// can need (prompt + max_tokens) are available beside those the running
// sequences may still take, so a running sequence never runs out of memory.
//
// Prefix caching comes from the paged KV cache: a prompt's leading full
// blocks that are cached (same tokens, same prefix) are attached instead of
// computed. Batch invariance makes this exact: a row's keys, values and
// logits do not depend on what else was in its batch, so a seeded request
// gives the same tokens alone, under load, with or without a cache hit —
// the tokens Session::generate gives for the same sampling parameters (and
// GenerateOptions::penalize_prompt false: the server's penalties count the
// generated tokens only); each sequence is a Generation
// (runtime/generation.hpp), the loop Session runs.
//
// A model with recurrent state shares a prefix only up to a block boundary
// where the cache kept a snapshot of the state (KvCache::save_prefix_state).
// A prompt's chunks stop at two such points, each snapshotted: where the
// prompt left the longest registered chain of blocks (the end of a prefix
// another prompt shares, such as a system prompt) and the last boundary
// before its final token (the prompt again, or a longer one). A generating
// sequence snapshots each boundary it reaches, keeping only its latest (the
// end of the reply, which the next turn's prompt repeats).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "server/jobs.hpp"
#include "server/metrics.hpp"
#include "server/request_stream.hpp"

namespace cortiq {
class Drafter;
class Model;
}  // namespace cortiq

namespace cortiq::server {

struct SchedulerOptions {
  int32_t parallel = 4;  // sequences generating at once
  int64_t kv_cells =
      0;  // positions in the shared KV memory (parallel * the model's context when 0)
  int32_t block_size = 16;  // positions per KV block
  int64_t max_queued = 64;  // choices waiting beyond the idle slots (and embeddings requests)
  int64_t step_rows = 0;    // rows per forward step (the model's chunk size when 0)
  // Recurrent-state snapshots kept for prefix reuse by a model with state
  // (2 per parallel sequence when negative; 0: such a model shares none).
  int32_t state_snapshots = -1;
  // Speculative decoding (cortiq.hpp's SpeculativeOptions): each slot
  // drafts with its own Drafter::for_another_sequence of `drafter`, and a
  // sequence's drafts are verified in the same step as the other
  // sequences' rows. Null: none; models with recurrent state draft nothing.
  std::shared_ptr<Drafter> drafter;
  int64_t draft_max = 16;
  int64_t draft_min = 0;
  bool same_draws = false;
};

class Scheduler {
 public:
  // Throws cortiq::Error when the KV memory cannot hold one full context.
  Scheduler(std::shared_ptr<const Model> model, SchedulerOptions options, Metrics& metrics);
  // Stops the worker; jobs still queued or running end with a failure event.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues the choices of one request, all reporting to `stream`. Throws
  // ApiError: 503 when more than --queue jobs would wait for a slot, 400
  // when the request could never be taken (more choices than slots plus
  // queue, or longer than a context).
  void submit(std::vector<GenerationJob> jobs, std::shared_ptr<RequestStream> stream);
  // Queues the inputs of one embeddings request; they run one chunk per
  // step, between the decode steps. 503 when --queue requests wait.
  void submit(std::vector<EmbeddingJob> jobs, std::shared_ptr<RequestStream> stream);

  int64_t context() const { return context_; }

  // Stops taking work and ends the worker (the destructor calls it).
  void stop();

 private:
  struct Sequence;
  struct Pending;
  struct EmbeddingRun;
  struct Engine;

  void run();
  void admit_locked();
  bool admit(Pending& pending);
  // Starts the embeddings request (false: not enough free KV yet).
  bool start_embedding(std::unique_ptr<Pending>& pending);
  // Forwards the next chunk of the current embedding input.
  void embedding_step();
  // Ends the cancelled sequences; true when there were any.
  bool drop_cancelled();
  void step();
  // Prompt rows of the sequence the step may take, at most `budget`.
  size_t prompt_rows(const Sequence& seq, int64_t budget) const;
  // Keeps the states of the step's sequences that reached a snapshot point.
  void save_prefix_states();
  // Hands each sequence's rows of the step and their hidden states to its
  // drafter, when that reads them (MTP).
  void show_rows_to_drafters();
  // The step's logits rows of one sequence (its prompt's last row, or its
  // decode row and the rows of the drafts forwarded after it) to its
  // generation, which samples, checks the drafts and readies the next step.
  void handle_rows(Sequence& seq, std::span<const float> logits, size_t n_rows);
  void finish(Sequence& seq, ChoiceEnd end);
  void fail(Sequence& seq, const std::string& message);
  // Frees the sequence's slot and KV blocks (full blocks stay cached).
  void release(Sequence& seq);
  // Blocks the running work may still take (what admission keeps free).
  int64_t outstanding_blocks() const;
  int32_t free_slot() const;
  void publish_state();

  std::shared_ptr<const Model> model_;
  SchedulerOptions options_;
  Metrics& metrics_;
  int64_t context_ = 0;

  // Worker-thread state.
  std::unique_ptr<Engine> engine_;
  std::vector<std::unique_ptr<Sequence>> active_;
  std::unique_ptr<EmbeddingRun> embedding_;

  // Shared with submitting threads (under mutex_).
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Pending>> queue_;            // generation jobs
  std::deque<std::unique_ptr<Pending>> embedding_queue_;  // embeddings requests
  bool stopping_ = false;
  // Sequences holding a slot, written by the worker: submit() lets as many
  // jobs wait beyond the idle slots as --queue says.
  std::atomic<int32_t> running_{0};
  std::thread worker_;
};

}  // namespace cortiq::server
