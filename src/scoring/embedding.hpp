// One vector per text from a model's final-normed hidden rows
// (Session::embeddings): mean over the tokens, the last token, or the first
// (cls), optionally scaled to unit length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace cortiq::scoring {

// rank: the last token through the model's classification head (rerankers);
// pool_embeddings takes the last row for it, the caller applies the head.
enum class Pooling { mean, last, cls, rank };

// "mean", "last", "cls", "rank"; nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);

// The pooling a model file asks for (ARCH.pooling_type as llama.cpp numbers
// it: 1 mean, 2 cls, 3 last; -1 absent), mean when it names none of them.
Pooling pooling_of_file(int32_t pooling_type);

// hidden is [n_rows][n_embd] with n_rows >= 1. Sums in double.
std::vector<float> pool_embeddings(std::span<const float> hidden, size_t n_embd, Pooling pooling,
                                   bool normalize);

}  // namespace cortiq::scoring
