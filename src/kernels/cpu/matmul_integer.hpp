// The integer path of matmul (matmul.cpp decides when it applies): the
// activation rows are quantized once to 8-bit blocks, then every weight
// matrix of the call is split over the threads by work, and each thread
// walks its output rows against the activation rows in passes and tiles.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cpu/matmul.hpp"

namespace cortiq {
class ThreadPool;
}

namespace cortiq::kernels {

// Whether w has an integer kernel.
bool has_integer_kernel(const WeightView& w);

// Computes every output when all weights have integer kernels reading the
// same activation format, and returns true; returns false (computing
// nothing) otherwise. Sizes must already be checked.
bool matmul_integer(std::span<const MatmulOutput> outputs, std::span<const float> x,
                    int64_t n_rows_x, ThreadPool& pool, MatmulScratch& scratch);

// The same, each output with its own one-row input (inputs[i] for
// outputs[i], all as wide).
bool matmul_integer_each_input(std::span<const MatmulOutput> outputs,
                               std::span<const std::span<const float>> inputs, ThreadPool& pool,
                               MatmulScratch& scratch);

}  // namespace cortiq::kernels
