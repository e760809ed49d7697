// The server's connection front: accepts connections and reads each
// request's head (request line and headers) on one event-loop thread, under
// bounds, and only then gives the connection to a request thread.
//
// cpp-httplib 0.11 (Debian 12's) gives every connection a thread from the
// moment it is accepted and reads heads with no bound on their size, their
// header count or the time they take (its timeout restarts at every byte):
// a few hundred clients sending a byte every few seconds, or idle
// keep-alive connections, held every thread and real requests waited
// behind them. Here a slow or idle connection costs a file descriptor and
// a buffer, never a thread: a head must be whole within `head_timeout` of
// its first byte and within the size bounds, or the connection gets 408,
// 414 or 431 and is closed; an idle keep-alive connection is closed after
// `idle_timeout`. A request thread then runs httplib's own request handling
// over the connection (its body reads bounded by `body_timeout` in all)
// and, if the connection stays open, gives it back to the loop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace httplib {
class Stream;
}

namespace cortiq::server {

struct HttpLimits {
  size_t max_connections = 512;                    // open at once; more are answered 503 and closed
  size_t max_request_line = 8192;                  // bytes, CRLF included (414 beyond)
  size_t max_head_bytes = 64 << 10;                // request line and headers (431 beyond)
  size_t max_headers = 100;                        // header lines (431 beyond)
  std::chrono::milliseconds head_timeout{10'000};  // first byte to blank line (408)
  std::chrono::milliseconds idle_timeout{5'000};   // keep-alive wait for a next request
  std::chrono::milliseconds body_timeout{60'000};  // all of a request's body reads
  std::chrono::milliseconds write_timeout{30'000};  // one write's wait for the client
  int max_requests_per_connection = 1000;
};

// Where a head stands: still coming, whole (`end` bytes, the blank line
// included), or refused with an HTTP status.
struct HeadScan {
  enum class State { incomplete, complete, refused } state = State::incomplete;
  size_t end = 0;
  int status = 0;  // refused: 400, 414 or 431
};
HeadScan scan_head(std::string_view bytes, const HttpLimits& limits);

class HttpFront {
 public:
  // Runs one request on the stream (httplib's Server::process_request);
  // returns false when the connection must close, and sets
  // `connection_closed` when the request asked for that.
  using RequestHandler =
      std::function<bool(httplib::Stream& stream, bool close_connection, bool& connection_closed)>;

  // The JSON body of a refusal the front answers itself (408, 414, 431,
  // 503); called on the loop thread.
  using RefusalBody = std::function<std::string(int status)>;

  HttpFront(HttpLimits limits, size_t request_threads, RequestHandler handler,
            RefusalBody refusal_body);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds and listens; returns the port (port 0: any free one) or throws
  // cortiq::Error naming the address.
  int bind(const std::string& host, int port);
  // Serves until stop(); the requests running then are finished first.
  // Returns false when the connection loop itself failed.
  bool serve();
  // Ends serve(); safe from any thread, and before serve() starts.
  void stop();

 private:
  class Loop;
  std::unique_ptr<Loop> loop_;
};

}  // namespace cortiq::server
