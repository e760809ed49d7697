// Internal: the per-type reference quantizers behind quantize_row. Each takes
// a row whose size the caller has checked (a whole number of blocks, and
// exactly the right number of bytes) and writes every byte of it.
#pragma once

#include <cstddef>
#include <span>

#include "quant/blocks.hpp"

namespace cortiq::quant {

// quantize_legacy.cpp
void quantize_q4_0(std::span<const float> src, std::span<std::byte> dst);
void quantize_q4_1(std::span<const float> src, std::span<std::byte> dst);
void quantize_q5_0(std::span<const float> src, std::span<std::byte> dst);
void quantize_q5_1(std::span<const float> src, std::span<std::byte> dst);
void quantize_q8_0(std::span<const float> src, std::span<std::byte> dst);

// quantize_k.cpp
void quantize_q2_k(std::span<const float> src, std::span<std::byte> dst);
void quantize_q3_k(std::span<const float> src, std::span<std::byte> dst);
void quantize_q4_k(std::span<const float> src, std::span<std::byte> dst);
void quantize_q5_k(std::span<const float> src, std::span<std::byte> dst);
void quantize_q6_k(std::span<const float> src, std::span<std::byte> dst);

// quantize_nonlinear.cpp
void quantize_iq4_nl(std::span<const float> src, std::span<std::byte> dst);
void quantize_mxfp4(std::span<const float> src, std::span<std::byte> dst);

// Runs encode(values, block) over each N-element block of src, starting from
// a zeroed block, and stores the blocks into dst.
template <typename Block, size_t N, typename Encode>
void encode_blocks(std::span<const float> src, std::span<std::byte> dst, Encode encode) {
  const size_t n_blocks = src.size() / N;
  for (size_t i = 0; i < n_blocks; ++i) {
    Block block{};
    encode(std::span<const float, N>(src.data() + i * N, N), block);
    store_block(dst, i, block);
  }
}

}  // namespace cortiq::quant
