// Integer dot products of Q4_K and Q6_K weights in packed 8-row groups
// (packed_weights.hpp: q4_Kx8, q6_Kx8) with activation rows in Q8BlockK
// blocks: the matmul kernels for these types when the matrix's row count is
// a multiple of 8.
//
// The order of operations is that of the per-row kernels (dot_kquants.cpp),
// output by output: per super-block, in order, the exact int32 integer part,
// then the same float operations on the block scales. So a packed product is
// the same bits as the per-row one, at every SIMD level and for any number
// of activation rows per call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/q8_activations.hpp"

namespace cortiq::kernels {

// One packed group (8 weight rows) against n_act activation rows, 1 <= n_act
// <= 4: out[i * 8 + r] = dot(weight row r of the group, activation row i).
// Activation row i is a + i * a_stride (in blocks); n_blocks super-blocks
// per row.
using PackedKDot = void (*)(const std::byte* group, const Q8BlockK* a, int64_t a_stride, int n_act,
                            int64_t n_blocks, float* out);

// The best kernel at this machine's SIMD level; nullptr unless `layout` is a
// K layout (is_k_layout).
PackedKDot packed_kquant_dot(PackedLayout layout);

// Two adjacent packed groups (16 weight rows; the second group starts
// n_blocks * packed_block_bytes(layout) bytes after the first) against any
// n_act >= 1 activation rows: out[i * 16 + r]. The AVX-512 level's unit;
// the same bits as packed_kquant_dot on each group. nullptr below that
// level.
PackedKDot packed_kquant_dot_pair(PackedLayout layout);

namespace scalar {
PackedKDot packed_kquant_dot(PackedLayout layout);
}
namespace avx2 {
PackedKDot packed_kquant_dot(PackedLayout layout);
}
namespace avx512 {
PackedKDot packed_kquant_dot_pair(PackedLayout layout);
}

}  // namespace cortiq::kernels
