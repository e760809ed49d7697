// Stop strings over streamed text: text that matches a stop string is never
// emitted. Pieces are pushed as they are decoded; the matcher releases the
// text that can no longer be the start of a stop string and holds back a
// tail that might still become one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

class StopStringMatcher {
 public:
  // Empty strings are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops = {});

  struct Result {
    std::string emit;      // text safe to hand to the user now
    bool stopped = false;  // a stop string matched: emit ends before it
  };
  // Adds a decoded piece. After a stop, further pushes return nothing.
  Result push(std::string_view piece);
  // The held-back tail at the end of the generation (no stop matched).
  std::string flush();
  bool stopped() const { return stopped_; }
  void reset();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace cortiq
