// The server's counters and gauges, rendered in Prometheus' text format for
// GET /metrics. Counters are updated from any thread; the scheduler
// publishes its state (queue, running sequences, KV blocks) after each step.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace cortiq::server {

struct SchedulerState {
  int64_t queued = 0;   // jobs waiting for a slot
  int64_t running = 0;  // sequences holding a slot
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_cached = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_block_size = 0;
  int64_t state_snapshots = 0;  // recurrent-state snapshots kept for prefix reuse
};

class Metrics {
 public:
  void count_response(int status);
  void add_prompt_tokens(int64_t n) { prompt_tokens_ += n; }
  void add_generated_tokens(int64_t n) { generated_tokens_ += n; }
  void add_cache_hit_tokens(int64_t n) { cache_hit_tokens_ += n; }
  void add_cancelled() { ++cancelled_; }
  void add_failed() { ++failed_; }
  // Speculative decoding: drafts forwarded, and drafts kept.
  void add_drafts(int64_t drafted, int64_t accepted) {
    drafted_tokens_ += drafted;
    accepted_tokens_ += accepted;
  }
  void add_draft_round() { ++draft_rounds_; }
  // One scheduler step: how many prompt rows and decode rows it forwarded.
  void record_step(int64_t prefill_rows, int64_t decode_rows);
  void publish(const SchedulerState& state);
  SchedulerState state() const;

  std::string prometheus_text() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Step {
    Clock::time_point at;
    int64_t prefill_rows;
    int64_t decode_rows;
  };
  // Tokens per second over the steps of the last kWindow.
  static constexpr std::chrono::seconds kWindow{10};

  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> generated_tokens_{0};
  std::atomic<int64_t> cache_hit_tokens_{0};
  std::atomic<int64_t> cancelled_{0};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> drafted_tokens_{0};
  std::atomic<int64_t> accepted_tokens_{0};
  std::atomic<int64_t> draft_rounds_{0};
  mutable std::mutex mutex_;
  std::map<int, int64_t> responses_;  // by HTTP status
  std::deque<Step> steps_;
  SchedulerState state_;
};

}  // namespace cortiq::server
