// The channel between the scheduler thread and the HTTP thread serving one
// request: the scheduler pushes events (a token, a finished choice, an
// embedding, a failure), the HTTP thread waits for them and writes them out.
// Either side may cancel: the client's thread when the client hangs up, and
// the scheduler sees it at its next step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace cortiq::server {

// A generated token's log-probability under the model (temperature 1) and
// the most likely alternatives, best first.
struct TokenLogprob {
  TokenId id = 0;
  double logprob = 0.0;
  std::vector<std::pair<TokenId, double>> top;
};

enum class ChoiceEnd { stop, length, cancelled };

// Timings of one choice, in milliseconds from the request's arrival.
struct ChoiceStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;     // prompt tokens reused from the prefix cache
  int64_t generated_tokens = 0;  // sampled tokens (an end-of-generation token included)
  double queue_ms = 0;           // waiting for a slot
  double prompt_ms = 0;          // admission to the first token
  double ttft_ms = 0;            // arrival to the first token
  double decode_ms = 0;          // first token to the last
  int64_t drafted_tokens = 0;    // speculative decoding: drafts forwarded
  int64_t accepted_tokens = 0;   // of them, kept
  int64_t draft_rounds = 0;      // decode steps that carried drafts
};

struct StreamEvent {
  enum class Kind { token, finished, embedding, failed };
  Kind kind = Kind::token;
  int32_t choice = 0;
  TokenId token = 0;  // token: the sampled id
  std::string text;   // token: the text it completes (may be empty); finished: the held-back tail
  TokenLogprob logprob;  // token, when log-probabilities were asked for
  bool has_logprob = false;
  ChoiceEnd end = ChoiceEnd::stop;  // finished
  ChoiceStats stats;                // finished
  std::vector<float> embedding;     // embedding
  int64_t embedding_tokens = 0;     // embedding
  std::string error;                // failed
};

class RequestStream {
 public:
  // Scheduler side. Each part (choice or input) ends with one finished,
  // embedding or failed event.
  void push(StreamEvent event);

  // Waits up to `timeout` for events and appends them to `out`. Returns
  // false when it timed out without any.
  bool wait(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout);

  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace cortiq::server
