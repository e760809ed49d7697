#include "server/request_stream.hpp"

namespace cortiq::server {

void RequestStream::push(StreamEvent event) {
  {
    const std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

bool RequestStream::wait(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  for (auto& event : events_) out.push_back(std::move(event));
  events_.clear();
  return true;
}

}  // namespace cortiq::server
