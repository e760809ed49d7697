// Integer dot products of K-quant weight rows (and IQ4_XS) with activation
// rows quantized to Q8_K blocks: the matmul kernels for these types.
//
// The order of operations is defined by the scalar kernels (namespace
// scalar) and every SIMD level reproduces it bit for bit: per 256-element
// super-block, in order, the integer part (codes times codes, times the
// sub-block scales, and the min terms against Q8BlockK::bsums) is summed
// exactly in int32, then folded into one float accumulator per output with a
// fixed, short sequence of float operations on the block scales (see each
// kernel). Because the accumulator is per output and the sequence does not
// depend on how many activation rows are computed together, a product is
// the same bits whether it runs for 1 row or for 4 — the batch invariance
// matmul promises.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/q8_activations.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::kernels {

// out[i] = dot(weight row, activation row i) for i in [0, n_act), 1 <= n_act
// <= 4. `row` holds n_blocks super-blocks of the weight type as the file
// stores them; activation row i is a + i * a_stride (a_stride in blocks,
// >= n_blocks). One weight row against several activation rows at once so
// that prefill decodes each weight block once for up to four rows.
using KQuantDot = void (*)(const std::byte* row, const Q8BlockK* a, int64_t a_stride, int n_act,
                           int64_t n_blocks, float* out);

// The best kernel for `type` at this machine's SIMD level; nullptr when the
// type has no integer kernel (matmul then uses its float path).
KQuantDot kquant_dot(GgmlType type);

namespace scalar {
KQuantDot kquant_dot(GgmlType type);
// One super-block of the canonical order: acc after the block, given acc
// before it, the block's bytes as the file stores them and its activation
// block. The row kernels, and the scalar kernels over packed layouts (which
// put a row's block back together first), are this step in a loop.
using KQuantBlockStep = float (*)(float acc, const std::byte* block, const Q8BlockK& x);
KQuantBlockStep kquant_block_step(GgmlType type);  // nullptr without a kernel
}  // namespace scalar
namespace avx2 {
KQuantDot kquant_dot(GgmlType type);  // nullptr where no AVX2 variant exists
}

}  // namespace cortiq::kernels
