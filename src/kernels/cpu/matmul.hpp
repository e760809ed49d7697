// Products of a weight matrix with rows of activations, the bulk of every
// forward pass: y[r] = W x[r] for each activation row r.
//
// Numerics follow the peer (ggml): before the dot products, each activation
// row is rounded once through the activation format its weight type pairs
// with (activation_type: F16 weights see f16 activations, Q4_0 weights see
// Q8_0 blocks, K-quants see Q8_K blocks, ...). Then every output element is a
// dot product of one weight row with one rounded activation row, computed in
// an order that does not depend on how many rows are in the batch — the
// batch-invariance contract (docs/engine.md): a position's logits are bitwise the
// same whether it was computed alone or with 63 others.
//
// Two paths, chosen by weight type alone (so by the type, never by the
// batch): the integer kernels (dot_packed.hpp for Q4_0 / Q8_0, dot_quants32.hpp
// for Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4, dot_kquants.hpp for the K-quants
// and IQ4_XS) multiply the activations' 8-bit codes with the weight codes
// and scale per block; F32, F16 and BF16 take the float path, converting a
// weight row to f32 and calling dot_f32. Each has one order
// of operations on every SIMD level. Against the peer's own ggml mul_mat on
// the same bytes the float path agrees to about 4e-7 relative L2 (the
// rounded activations are bit-identical; the summation order differs).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/q8_activations.hpp"
#include "kernels/cpu/weight_view.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq {
class ThreadPool;
}

namespace cortiq::kernels {

// The format activations are rounded through before a dot product with a
// weight of this type (ggml's vec_dot_type): F32 -> F32, F16 -> F16,
// BF16 -> BF16; Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4 -> Q8_0; Q4_1, Q5_1 -> Q8_1;
// Q2_K..Q6_K, IQ4_XS -> Q8_K. Throws cortiq::Error for a weight type the
// engine cannot compute with.
GgmlType activation_type(GgmlType weight_type);

// x rounded through activation_type(weight_type), written to out (same
// size; x.size() a whole number of that format's blocks). out may alias x.
// The values are bit for bit those of the peer's x86 activation quantizers
// (Q8_0/Q8_1: id = 127/amax, round half to even, d stored as fp16; Q8_K:
// the reference, float d). Q8_1's stored block sum is not representable
// here: matmul adds its effect (min * (s - sum)) for Q4_1/Q5_1 itself.
void round_activations(GgmlType weight_type, std::span<const float> x, std::span<float> out);

// The dot product behind every matmul output element: product i is added
// into float lane i % 16 by a fused multiply-add (lane = fma(a_i, b_i,
// lane), one rounding, as ggml's float dot products), then the lanes are
// folded pairwise (lane j += lane j + 8, then + 4, + 2, + 1). The order
// depends on n alone, never on the batch, which is what makes matmul batch
// invariant; it is also the lane layout of one AVX-512 or two AVX2
// registers, so SIMD variants reproduce it bit for bit. Defined in dot.cpp, dispatched
// to the SIMD level (dot_avx2.cpp), every level giving the same bits.
float dot_f32(const float* a, const float* b, int64_t n);

namespace scalar {
float dot_f32(const float* a, const float* b, int64_t n);
}
namespace avx2 {
float dot_f32(const float* a, const float* b, int64_t n);
}

// Buffers matmul reuses from call to call so the decode path allocates
// nothing once warm. One per ThreadPool user; not shared between threads
// that call matmul concurrently. matmul grows them as needed and never
// shrinks them: activations to n_rows_x * n_cols floats (not used for F32
// weights; Q4_1/Q5_1 add n_rows_x * n_cols / 32 block-sum corrections),
// weight_rows to pool.size() rows of n_cols floats (rows of F32 weights are
// read in place unless misaligned). Sized once for the largest shapes, they
// serve every smaller call without allocating.
struct MatmulScratch {
  std::vector<float> activations;               // n x n_cols, rounded
  std::vector<std::vector<float>> weight_rows;  // one dequantized row per thread
  std::vector<Q8Block32> q8_blocks;             // n x n_cols / 32, integer kernels
  std::vector<Q8BlockK> q8k_blocks;             // n x n_cols / 256, integer kernels
};

// y[r * y_stride + o] = dot(W row o, x[r * n_cols ...]) for r in [0, n_rows_x)
// and o in [0, w.n_rows). x holds n_rows_x rows of w.n_cols floats,
// contiguous; y_stride >= w.n_rows; y must not overlap x. Work is split
// over the pool by output rows, so each weight row is read once for the
// whole batch. Must not be called from inside a job of `pool`. Throws
// cortiq::Error (naming the tensor) for an unsupported type or sizes that
// do not agree.
void matmul(const WeightView& w, std::span<const float> x, int64_t n_rows_x, std::span<float> y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch);

// One of several matrices applied to the same input: y[r * y_stride + o].
struct MatmulOutput {
  const WeightView* w = nullptr;
  std::span<float> y;
  int64_t y_stride = 0;
};

// matmul of each weight (same n_cols) with the same x — Q, K and
// V, or gate and up. The same bits as separate matmul calls, but the input
// is quantized once and the threads share all the matrices' rows in one
// dispatch, which matters at decode, where each matrix is small work.
void matmul_shared_input(std::span<const MatmulOutput> outputs, std::span<const float> x,
                         int64_t n_rows_x, ThreadPool& pool, MatmulScratch& scratch);

// y_i = w_i x_i for weights of the same width, each with its own single
// input row (a decode row's experts' down projections, each after its own
// activation). The same bits as separate matmul calls, in one dispatch.
void matmul_each_input(std::span<const MatmulOutput> outputs,
                       std::span<const std::span<const float>> inputs, ThreadPool& pool,
                       MatmulScratch& scratch);

// Embedding lookup: row `ids[i]` of `table` dequantized to f32 into
// out[i * table.n_cols ...]. Throws cortiq::Error for an id outside the table.
void get_rows(const WeightView& table, std::span<const int32_t> ids, std::span<float> out);

}  // namespace cortiq::kernels
