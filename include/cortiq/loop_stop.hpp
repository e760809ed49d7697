// The options of loop stop (runtime/loop_detector.hpp): a generation ends
// when its tail repeats a block of at most max_period tokens min_repeats
// times in a row, over at least min_tokens tokens.
#pragma once

#include <cstdint>

namespace cortiq {

struct LoopStopParams {
  int32_t max_period = 32;
  int32_t min_repeats = 4;
  int32_t min_tokens = 16;
};

}  // namespace cortiq
