// Which layers of a hybrid are recurrent, as llama.cpp's loaders of
// Qwen3-Next, Qwen3.5 and MiniMax-01 read it.
#pragma once

#include <cstdint>
#include <vector>

namespace cortiq {

class HParamReader;

// Of the block_count layers (multi-token-prediction ones included, never
// recurrent), those ARCH.attention.recurrent_layers marks (booleans or
// integers, one per layer), or else every layer of the first n_trunk but
// each full_attention_interval-th (default_interval when absent).
std::vector<bool> recurrent_layers(const HParamReader& keys, int64_t n_trunk, int64_t n_all,
                                   int64_t default_interval);

}  // namespace cortiq
