// Integer dot products of Q4_0, Q8_0 and MXFP4 weights with activation rows in
// Q8Block32 blocks: the matmul kernels for these types, over the packed
// 8-row groups (packed_weights.hpp) or, for matrices that could not be
// packed, over the file's rows.
//
// The order of operations, the same on every path and SIMD level (so
// results are the same bits whichever runs): per output, acc = 0, then for
// each 32-element block b in order
//
//   isum = sum of w_code * a_code over the block, exact in int32
//          (Q4_0 codes are nibbles minus 8: sum nibble * a - 8 * a.sum;
//          MXFP4's the nibbles through kMxfp4Values, the E2M1 codes doubled)
//   acc  = fma(float(isum), d_w(b) * a.d(b), acc)
//
// with d_w the block's fp16 scale as a float (MXFP4: its E8M0 exponent as
// the halved scale 2^(e - 128), dot_quants32.hpp's order for MXFP4). This is also the order of the
// peer's repacked AVX2 kernels. Each output has its own accumulator, so the
// result does not depend on how many activation rows are computed together.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::kernels {

// The most activation rows any packed kernel takes in one call.
constexpr int kMaxPackedRows = 64;

// One packed group (8 weight rows) against n_act activation rows, 1 <= n_act
// <= packed_dot_max_rows(layout): out[i * 8 + r] = dot(weight row r of the
// group, activation row i).
// Activation row i is a + i * a_stride (in blocks); n_blocks blocks per row.
using PackedDot = void (*)(const std::byte* group, const Q8Block32* a, int64_t a_stride, int n_act,
                           int64_t n_blocks, float* out);

// One weight row as the file stores it against n_act rows: out[i].
using RowDot = void (*)(const std::byte* row, const Q8Block32* a, int64_t a_stride, int n_act,
                        int64_t n_blocks, float* out);

// The best kernel at this machine's SIMD level; nullptr for layout none.
PackedDot packed_dot(PackedLayout layout);
// How many activation rows one call of packed_dot(layout) takes: Q4_0's
// unpacks each block into registers once for all of them (prefill), Q8_0's
// keeps up to 4 rows' sums in registers.
int packed_dot_max_rows(PackedLayout layout);
// Two adjacent packed groups (16 weight rows: the group at `group` and the
// one n_blocks * packed_block_bytes(layout) bytes after it, as a matrix
// stores them) against n_act rows, 1 <= n_act <= kMaxPackedRows:
// out[i * 16 + r] = dot(weight row r of the pair, activation row i). The
// unit of the AVX-512 level, whose registers hold both groups' lanes; the
// same bits as packed_dot on each group. nullptr below that level.
PackedDot packed_dot_pair(PackedLayout layout);
// Row kernels for Q4_0 and Q8_0, and for Q4_1, Q5_0, Q5_1, IQ4_NL and
// MXFP4 (dot_quants32.hpp, in the order documented there), at this
// machine's SIMD level; nullptr for other types.
RowDot row_dot(GgmlType type);

namespace scalar {
PackedDot packed_dot(PackedLayout layout);
RowDot row_dot(GgmlType type);  // the types of the dispatching row_dot
}  // namespace scalar
namespace avx2 {
PackedDot packed_dot(PackedLayout layout);
}
namespace avx512 {
PackedDot packed_dot(PackedLayout layout);
PackedDot packed_dot_pair(PackedLayout layout);
}  // namespace avx512

}  // namespace cortiq::kernels
