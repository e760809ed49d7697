// A batch of rows for one forward pass. Each row is one token at one
// position of one sequence; `logits` asks for that row's logits. The rows of
// a sequence continue it: consecutive positions starting at its cache length.
// Prefill is a batch of many rows of one sequence, decode one row per
// sequence; a server mixes both.
#pragma once

#include <cstdint>

#include "cortiq/types.hpp"

namespace cortiq {

struct BatchRow {
  TokenId token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool logits = false;
};

// What the rows marked `logits` give: the logits, or the final-normed
// hidden state (the input of the lm_head; [n_embd] per row) for models used
// as text encoders.
enum class RowOutput { logits, hidden };

}  // namespace cortiq
