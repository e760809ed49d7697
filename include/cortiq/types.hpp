// The engine's basic public types, shared by the API and the engine inside.
#pragma once

#include <cstdint>

namespace cortiq {

// A token's index in the model's vocabulary.
using TokenId = int32_t;

// How the KV cache stores keys and values.
enum class KvType { f32, f16 };

}  // namespace cortiq
