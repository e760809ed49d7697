#include "server/metrics.hpp"

#include "base/strings.hpp"

namespace cortiq::server {

void Metrics::count_response(int status) {
  const std::lock_guard lock(mutex_);
  ++responses_[status];
}

void Metrics::record_step(int64_t prefill_rows, int64_t decode_rows) {
  const auto now = Clock::now();
  const std::lock_guard lock(mutex_);
  steps_.push_back({now, prefill_rows, decode_rows});
  while (!steps_.empty() && now - steps_.front().at > kWindow) steps_.pop_front();
}

void Metrics::publish(const SchedulerState& state) {
  const std::lock_guard lock(mutex_);
  state_ = state;
}

SchedulerState Metrics::state() const {
  const std::lock_guard lock(mutex_);
  return state_;
}

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help,
            const std::string& value) {
  out += strfmt("# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, name, value.c_str());
}

std::string integer(int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string Metrics::prometheus_text() const {
  const std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP cortiq_requests_total HTTP responses by status.\n";
  out += "# TYPE cortiq_requests_total counter\n";
  for (const auto& [status, count] : responses_) {
    out += strfmt("cortiq_requests_total{status=\"%d\"} %lld\n", status,
                  static_cast<long long>(count));
  }
  metric(out, "cortiq_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         integer(prompt_tokens_));
  metric(out, "cortiq_generated_tokens_total", "counter", "Tokens generated.",
         integer(generated_tokens_));
  metric(out, "cortiq_prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens reused from the prefix cache instead of computed.",
         integer(cache_hit_tokens_));
  metric(out, "cortiq_requests_cancelled_total", "counter",
         "Choices stopped because the client went away.", integer(cancelled_));
  metric(out, "cortiq_requests_failed_total", "counter",
         "Choices and embedding inputs ended by an error after they were admitted.",
         integer(failed_));
  metric(out, "cortiq_draft_tokens_total", "counter",
         "Speculative decoding: drafted tokens forwarded for verification.",
         integer(drafted_tokens_));
  metric(out, "cortiq_draft_tokens_accepted_total", "counter",
         "Speculative decoding: drafted tokens kept.", integer(accepted_tokens_));
  metric(out, "cortiq_draft_rounds_total", "counter",
         "Speculative decoding: decode steps that carried drafts.", integer(draft_rounds_));
  // Rates over the recent window: tokens forwarded per second of wall time.
  int64_t prefill = 0;
  int64_t decode = 0;
  for (const auto& step : steps_) {
    prefill += step.prefill_rows;
    decode += step.decode_rows;
  }
  double seconds = 0;
  if (!steps_.empty()) {
    seconds = std::chrono::duration<double>(Clock::now() - steps_.front().at).count();
  }
  const auto rate = [&](int64_t n) { return seconds > 0 ? static_cast<double>(n) / seconds : 0.0; };
  metric(out, "cortiq_prefill_tokens_per_second", "gauge",
         "Prompt tokens forwarded per second over the last 10 s.", strfmt("%.2f", rate(prefill)));
  metric(out, "cortiq_decode_tokens_per_second", "gauge",
         "Tokens generated per second over the last 10 s.", strfmt("%.2f", rate(decode)));
  metric(out, "cortiq_queue_length", "gauge", "Jobs waiting for a slot.", integer(state_.queued));
  metric(out, "cortiq_running_sequences", "gauge", "Sequences holding a slot.",
         integer(state_.running));
  metric(out, "cortiq_kv_blocks_used", "gauge", "KV blocks held by running sequences.",
         integer(state_.kv_blocks_used));
  metric(out, "cortiq_kv_blocks_cached", "gauge",
         "KV blocks no sequence holds that keep a prefix for reuse (evicted when needed).",
         integer(state_.kv_blocks_cached));
  metric(out, "cortiq_kv_blocks_free", "gauge", "Empty KV blocks.", integer(state_.kv_blocks_free));
  metric(out, "cortiq_kv_block_size", "gauge", "Positions per KV block.",
         integer(state_.kv_block_size));
  metric(out, "cortiq_state_snapshots", "gauge",
         "Snapshots of a sequence's recurrent state kept for prefix reuse (models with state).",
         integer(state_.state_snapshots));
  return out;
}

}  // namespace cortiq::server
