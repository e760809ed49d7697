#include "server/http_front.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"

namespace cortiq::server {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kLoopTickMs = 100;  // how often deadlines are checked
constexpr size_t kReadChunk = 4096;

// A file descriptor, closed with its owner.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Waits until fd is ready for `events` or the time is up.
bool wait_for(int fd, short events, std::chrono::milliseconds timeout) {
  pollfd p{fd, events, 0};
  const auto until = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    const int r = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (r > 0) return true;
    if (r == 0 || errno != EINTR) return false;
  }
}

std::string address_of(const sockaddr_storage& addr, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  port = 0;
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  return text;
}

// httplib's view of a connection whose head the loop has read: the bytes
// read so far first, then the socket. Reads stop at the body deadline;
// bytes read past the request (a pipelined next one) stay for the loop.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, std::string buffered, const HttpLimits& limits)
      : fd_(fd),
        buffer_(std::move(buffered)),
        read_deadline_(Clock::now() + limits.body_timeout),
        write_timeout_(limits.write_timeout) {}

  bool is_readable() const override {
    return offset_ < buffer_.size() || wait_for(fd_, POLLIN, read_time_left());
  }
  bool is_writable() const override {
    if (!wait_for(fd_, POLLOUT, write_timeout_)) return false;
    char byte = 0;  // a closed peer reads as end of stream
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (offset_ == buffer_.size()) {
      if (!wait_for(fd_, POLLIN, read_time_left())) {
        failed_ = true;
        return -1;
      }
      buffer_.resize(kReadChunk);
      const ssize_t got = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      buffer_.resize(got > 0 ? static_cast<size_t>(got) : 0);
      offset_ = 0;
      if (got <= 0) {
        failed_ = true;
        return got < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : got;
      }
    }
    const size_t n = std::min(size, buffer_.size() - offset_);
    std::memcpy(ptr, buffer_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!wait_for(fd_, POLLOUT, write_timeout_)) {
      failed_ = true;
      return -1;
    }
    const ssize_t sent = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (sent < 0) failed_ = true;
    return sent;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ip = ::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 ? address_of(addr, port)
                                                                           : std::string();
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ip = ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 ? address_of(addr, port)
                                                                           : std::string();
  }
  socket_t socket() const override { return fd_; }

  bool failed() const { return failed_; }
  std::string take_unread() { return buffer_.substr(offset_); }

 private:
  std::chrono::milliseconds read_time_left() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(read_deadline_ - Clock::now());
  }

  int fd_;
  std::string buffer_;
  size_t offset_ = 0;
  Clock::time_point read_deadline_;
  std::chrono::milliseconds write_timeout_;
  bool failed_ = false;
};

}  // namespace

HeadScan scan_head(std::string_view bytes, const HttpLimits& limits) {
  using State = HeadScan::State;
  const size_t line_end = bytes.find('\n');
  if (line_end == std::string_view::npos) {
    return bytes.size() >= limits.max_request_line ? HeadScan{State::refused, 0, 414} : HeadScan{};
  }
  if (line_end + 1 > limits.max_request_line) return {State::refused, 0, 414};
  size_t pos = line_end + 1;
  size_t headers = 0;
  for (;;) {
    const size_t next = bytes.find('\n', pos);
    if (next == std::string_view::npos) {
      return bytes.size() >= limits.max_head_bytes ? HeadScan{State::refused, 0, 431} : HeadScan{};
    }
    if (next + 1 > limits.max_head_bytes) return {State::refused, 0, 431};
    const std::string_view line = bytes.substr(pos, next - pos);
    if (line.empty() || line == "\r") return {State::complete, next + 1, 0};
    if (++headers > limits.max_headers) return {State::refused, 0, 431};
    pos = next + 1;
  }
}

class HttpFront::Loop {
 public:
  Loop(HttpLimits limits, size_t request_threads, RequestHandler handler, RefusalBody refusal_body)
      : limits_(limits),
        n_threads_(std::max<size_t>(request_threads, 1)),
        handler_(std::move(handler)),
        refusal_body_(std::move(refusal_body)),
        epoll_(::epoll_create1(EPOLL_CLOEXEC)),
        wake_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (epoll_.get() < 0 || wake_.get() < 0) {
      throw Error(strfmt("cannot set up the connection loop: %s", std::strerror(errno)));
    }
    watch(wake_.get());
  }

  ~Loop() {
    stop();
    join_threads();
  }

  int bind(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(port);
    if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
      throw Error(strfmt("cannot listen on %s:%d: not an address", host.c_str(), port));
    }
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
    int error = 0;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (fd.get() < 0) {
        error = errno;
        continue;
      }
      const int yes = 1;
      ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), SOMAXCONN) != 0) {
        error = errno;
        continue;
      }
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len);
      int bound_port = 0;
      address_of(bound, bound_port);
      listen_ = std::move(fd);
      watch(listen_.get());
      return bound_port;
    }
    throw Error(strfmt("cannot listen on %s:%d: %s", host.c_str(), port, std::strerror(error)));
  }

  bool serve() {
    for (size_t i = 0; i < n_threads_; ++i) threads_.emplace_back([this] { run_requests(); });
    std::vector<epoll_event> events(64);
    bool ok = true;
    while (!stopping_.load()) {
      const int n =
          ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), kLoopTickMs);
      if (n < 0 && errno != EINTR) {
        LOG_ERROR("the connection loop failed: %s", std::strerror(errno));
        ok = false;
        break;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[static_cast<size_t>(i)].data.fd;
        if (fd == listen_.get()) {
          accept_all();
        } else if (fd == wake_.get()) {
          uint64_t count = 0;
          [[maybe_unused]] const ssize_t r = ::read(wake_.get(), &count, sizeof count);
          adopt_returned();
        } else {
          read_head(fd);
        }
      }
      expire(Clock::now());
    }
    listen_.reset();
    for (auto& [fd, connection] : waiting_) close_connection(connection.fd);
    waiting_.clear();
    ready_cv_.notify_all();
    join_threads();
    std::lock_guard lock(mutex_);
    for (Connection& c : returned_) close_connection(c.fd);
    returned_.clear();
    return ok;
  }

  void stop() {
    stopping_.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t r = ::write(wake_.get(), &one, sizeof one);
    ready_cv_.notify_all();
  }

 private:
  struct Connection {
    int fd = -1;
    std::string head;  // bytes read and not yet handled
    Clock::time_point deadline;
    bool started = false;  // a request's first byte has come
    int served = 0;
  };

  void watch(int fd) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) {
      throw Error(strfmt("cannot watch a connection: %s", std::strerror(errno)));
    }
  }

  void close_connection(int fd) {
    ::shutdown(fd, SHUT_RDWR);
    ::close(fd);
    open_.fetch_sub(1);
  }

  // Answers a refusal the request threads never see, then closes.
  void refuse(int fd, int status) {
    const std::string body = refusal_body_(status);
    const std::string response =
        strfmt(
            "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n%s\r\n",
            status, reason_phrase(status), body.size(), status == 503 ? "Retry-After: 1\r\n" : "") +
        body;
    // Best effort, never blocking the loop: a client too slow to take a
    // few hundred bytes does not get them.
    [[maybe_unused]] const ssize_t r =
        ::send(fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listen_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          LOG_WARN("out of file descriptors: connections wait in the listen queue");
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
      open_.fetch_add(1);
      if (open_.load() > limits_.max_connections) {
        refuse(fd, 503);
        close_connection(fd);
        continue;
      }
      const int yes = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
      Connection c;
      c.fd = fd;
      c.deadline = Clock::now() + limits_.idle_timeout;
      watch(fd);
      waiting_.emplace(fd, std::move(c));
    }
  }

  void read_head(int fd) {
    const auto it = waiting_.find(fd);
    if (it == waiting_.end()) return;
    Connection& c = it->second;
    char chunk[kReadChunk];
    for (;;) {
      const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(it);  // the client left
        return;
      }
      if (got < 0) break;
      if (!c.started) {
        c.started = true;
        c.deadline = Clock::now() + limits_.head_timeout;
      }
      c.head.append(chunk, static_cast<size_t>(got));
      // A head that is still incomplete at this size is refused anyway.
      if (c.head.size() >= limits_.max_head_bytes) break;
    }
    dispatch(it);
  }

  // A connection whose head is whole goes to the request threads, one
  // whose head is refused is answered and closed.
  void dispatch(std::unordered_map<int, Connection>::iterator it) {
    const HeadScan scan = scan_head(it->second.head, limits_);
    if (scan.state == HeadScan::State::incomplete) return;
    if (scan.state == HeadScan::State::refused) {
      refuse(it->first, scan.status);
      drop(it);
      return;
    }
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->first, nullptr);
    {
      std::lock_guard lock(mutex_);
      ready_.push_back(std::move(it->second));
    }
    waiting_.erase(it);
    ready_cv_.notify_one();
  }

  void drop(std::unordered_map<int, Connection>::iterator it) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->first, nullptr);
    close_connection(it->first);
    waiting_.erase(it);
  }

  void expire(Clock::time_point now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      auto here = it++;
      if (now < here->second.deadline) continue;
      if (here->second.started) refuse(here->first, 408);
      drop(here);
    }
  }

  // Connections the request threads kept open wait for their next request.
  void adopt_returned() {
    std::vector<Connection> back;
    {
      std::lock_guard lock(mutex_);
      back.swap(returned_);
    }
    for (Connection& c : back) {
      c.started = !c.head.empty();
      c.deadline = Clock::now() + (c.started ? limits_.head_timeout : limits_.idle_timeout);
      const int fd = c.fd;
      watch(fd);
      dispatch(waiting_.emplace(fd, std::move(c)).first);
    }
  }

  void run_requests() {
    for (;;) {
      Connection c;
      {
        std::unique_lock lock(mutex_);
        ready_cv_.wait(lock, [this] { return stopping_.load() || !ready_.empty(); });
        if (ready_.empty()) return;
        c = std::move(ready_.front());
        ready_.pop_front();
      }
      handle(std::move(c));
    }
  }

  void handle(Connection c) {
    ConnectionStream stream(c.fd, std::move(c.head), limits_);
    const bool last = stopping_.load() || c.served + 1 >= limits_.max_requests_per_connection;
    bool closed = false;
    bool ok = false;
    try {
      ok = handler_(stream, last, closed);
    } catch (const std::exception& e) {
      LOG_ERROR("a request failed outside its handler: %s", e.what());
    }
    ++c.served;
    if (!ok || closed || last || stream.failed() || stopping_.load()) {
      close_connection(c.fd);
      return;
    }
    c.head = stream.take_unread();
    {
      std::lock_guard lock(mutex_);
      returned_.push_back(std::move(c));
    }
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t r = ::write(wake_.get(), &one, sizeof one);
  }

  void join_threads() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }

  const HttpLimits limits_;
  const size_t n_threads_;
  const RequestHandler handler_;
  const RefusalBody refusal_body_;
  Fd epoll_;
  Fd wake_;
  Fd listen_;
  std::unordered_map<int, Connection> waiting_;  // the loop thread's only

  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::deque<Connection> ready_;      // heads whole, for the request threads
  std::vector<Connection> returned_;  // kept open, back to the loop
  std::atomic<size_t> open_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

HttpFront::HttpFront(HttpLimits limits, size_t request_threads, RequestHandler handler,
                     RefusalBody refusal_body)
    : loop_(std::make_unique<Loop>(limits, request_threads, std::move(handler),
                                   std::move(refusal_body))) {}

HttpFront::~HttpFront() = default;

int HttpFront::bind(const std::string& host, int port) {
  return loop_->bind(host, port);
}

bool HttpFront::serve() {
  return loop_->serve();
}

void HttpFront::stop() {
  loop_->stop();
}

}  // namespace cortiq::server
