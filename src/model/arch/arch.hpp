// The families defined in src/model/arch/*.cpp, for the table in
// families.cpp (the only place that lists them).
#pragma once

#include "model/family.hpp"

namespace cortiq {

// llama.cpp (this folder's)
extern const Family kLlamaFamily;
extern const Family kQwen2Family;
extern const Family kQwen3Family;

// gemma.cpp
extern const Family kGemmaFamily;
extern const Family kGemma2Family;
extern const Family kGemma3Family;

}  // namespace cortiq
