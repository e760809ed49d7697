// matmul: the integer kernels (activations quantized once to 8-bit blocks)
// for the types that have them, else the float path — activations rounded
// through the peer's vec_dot_type, weight rows dequantized to f32, one
// fixed-order f32 dot per output element.
#include "kernels/cpu/matmul.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "base/error.hpp"
#include "base/fp16.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/convert.hpp"
#include "kernels/cpu/dequantize_fast.hpp"
#include "kernels/cpu/matmul_float.hpp"
#include "kernels/cpu/matmul_integer.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "quant/blocks.hpp"
#include "quant/quantize.hpp"
#include "quant/scalar_math.hpp"

namespace cortiq::kernels {
namespace {

constexpr int64_t kBlock32 = 32;
constexpr int64_t kBlockK = 256;
// Output rows per unit of work: enough to keep the split cheap, small
// enough that narrow matrices still spread over the threads.
constexpr int64_t kRowGrain = 8;

// A Q8_0 or Q8_1 block of 32, quantized and dequantized again; returns the
// sum of the codes. The values are those of the peer's x86
// quantize_row_q8_0/q8_1 (what its AVX/AVX2 builds use for activations):
// id = 127 / amax and round-half-to-even, where the portable reference has
// 1 / d and roundf; they differ only on ties and in the last bit of id. The
// dequantized value uses d as stored (fp16, returned in `d`), as the
// integer dot products do.
int round_q8_block(const float* x, float* out, float& d) {
  float amax = 0.0f;
  for (int64_t j = 0; j < kBlock32; ++j) amax = std::max(amax, std::fabs(x[j]));
  d = fp16_to_fp32(fp32_to_fp16(amax / 127.0f));
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  int sum = 0;
  for (int64_t j = 0; j < kBlock32; ++j) {
    const int q = quant::nearest_int(x[j] * id);
    sum += q;
    out[j] = static_cast<float>(q) * d;
  }
  return sum;
}

void round_q8_0_block(const float* x, float* out) {
  float d;
  round_q8_block(x, out, d);
}

// Q8_1 also stores its block sum s (q8_1_block_sum), and the peer's
// Q4_1/Q5_1 dots multiply the weight block's min by s rather than by the
// sum of the dequantized activations (fp16(d) * sum). The two differ by
// fp16 rounding, which moves matmul outputs by up to 5e-4 relative L2; this
// returns s minus the dequantized sum, the correction matmul adds back per
// block (times the min).
float round_q8_1_block(const float* x, float* out) {
  float d;
  const int sum = round_q8_block(x, out, d);
  return q8_1_block_sum(x, sum) - d * static_cast<float>(sum);
}

// A Q8_K block of 256 as quantize_row_q8_K_ref makes it (the peer uses the
// reference on every CPU): the scale comes from the signed value of largest
// magnitude (the first one on ties), d = 1 / iscale stays a float, and the
// codes are clamped to 127 (the opposite end may reach -127 only).
void round_q8_k_block(const float* x, float* out) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int64_t j = 0; j < kBlockK; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::fill(out, out + kBlockK, 0.0f);
    return;
  }
  const float iscale = -127.0f / max;
  const float d = 1.0f / iscale;
  for (int64_t j = 0; j < kBlockK; ++j) {
    const int q = std::min(127, quant::nearest_int(iscale * x[j]));
    out[j] = d * static_cast<float>(q);
  }
}

template <typename BlockFn>
void round_blocks(std::span<const float> x, std::span<float> out, int64_t block, BlockFn fn) {
  const auto n = static_cast<int64_t>(x.size());
  if (n % block != 0) {
    throw Error("round_activations: row of " + std::to_string(n) +
                " elements is not a whole number of " + std::to_string(block) + "-element blocks");
  }
  for (int64_t i = 0; i < n; i += block) fn(x.data() + i, out.data() + i);
}

// x through a 16-bit float format and back, a stack buffer at a time, with
// the row converters (every SIMD level gives the scalar conversion's bits).
using ToHalves = void (*)(std::span<const float>, std::span<uint16_t>);
using FromHalves = void (*)(std::span<const uint16_t>, std::span<float>);
void round_through_16_bits(std::span<const float> x, std::span<float> out, ToHalves to,
                           FromHalves from) {
  std::array<uint16_t, 512> halves;
  for (size_t i = 0; i < x.size(); i += halves.size()) {
    const size_t n = std::min(halves.size(), x.size() - i);
    to(x.subspan(i, n), std::span(halves).first(n));
    from(std::span(halves).first(n), out.subspan(i, n));
  }
}

// ggml's vec_dot_type of each weight type we can multiply with.
std::optional<GgmlType> vec_dot_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
      return weight_type;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS:
      return GgmlType::Q8_K;
    default:
      return std::nullopt;
  }
}

std::string tensor_prefix(const WeightView& w, std::string_view op) {
  return std::string(op) + ": tensor " + std::string(w.name) + ": ";
}

// The row length in bytes must be what the type and n_cols say: otherwise
// dequantize_row would throw inside a pool job, or rows would be misread.
void check_rows(const WeightView& w, std::string_view op) {
  require_supported_weight_type(w.type, w.name);
  const auto expected = ggml_row_bytes(w.type, static_cast<uint64_t>(w.n_cols));
  if (w.n_rows < 0 || w.n_cols < 0 || !expected || *expected != w.row_bytes) {
    throw Error(tensor_prefix(w, op) + std::string(ggml_type_name(w.type)) + " rows of " +
                std::to_string(w.n_cols) + " elements cannot be " + std::to_string(w.row_bytes) +
                " bytes long");
  }
  if (w.n_rows > 0 && w.data == nullptr) throw Error(tensor_prefix(w, op) + "no data");
}

bool reads_in_place(const WeightView& w) {
  // Rows of F32 are used where they lie, if the floats are aligned (the
  // mapped file normally aligns tensor data to 32 bytes).
  return w.type == GgmlType::F32 && reinterpret_cast<uintptr_t>(w.data) % alignof(float) == 0 &&
         w.row_bytes % alignof(float) == 0;
}

// Weight row o as f32: in place, or dequantized into buf.
const float* weight_row(const WeightView& w, int64_t o, bool in_place, std::span<float> buf) {
  if (in_place) return reinterpret_cast<const float*>(w.row(o).data());
  const std::span<float> row = buf.first(static_cast<size_t>(w.n_cols));
  dequantize_row_fast(w.type, w.row(o), row);
  return row.data();
}

void prepare_scratch(const WeightView& w, int64_t n_activations, bool in_place, int n_threads,
                     MatmulScratch& scratch) {
  if (n_activations > 0 && scratch.activations.size() < static_cast<size_t>(n_activations)) {
    scratch.activations.resize(static_cast<size_t>(n_activations));
  }
  if (scratch.weight_rows.size() < static_cast<size_t>(n_threads)) {
    scratch.weight_rows.resize(static_cast<size_t>(n_threads));
  }
  if (in_place) return;
  for (int t = 0; t < n_threads; ++t) {
    std::vector<float>& row = scratch.weight_rows[static_cast<size_t>(t)];
    if (row.size() < static_cast<size_t>(w.n_cols)) row.resize(static_cast<size_t>(w.n_cols));
  }
}

// The weight type's activation format, after checking every size: errors
// must surface here, not inside a pool job.
GgmlType check_matmul(const WeightView& w, std::span<const float> x, int64_t n_rows_x,
                      std::span<const float> y, int64_t y_stride) {
  const std::optional<GgmlType> act_type = vec_dot_type(w.type);
  if (!act_type) {
    throw Error(tensor_prefix(w, "matmul") + "no matmul kernel for weight type " +
                std::string(ggml_type_name(w.type)));
  }
  check_rows(w, "matmul");
  const int64_t n_x = n_rows_x * w.n_cols;
  if (n_rows_x < 0 || static_cast<int64_t>(x.size()) < n_x) {
    throw Error(tensor_prefix(w, "matmul") + std::to_string(n_rows_x) + " rows of " +
                std::to_string(w.n_cols) + " inputs need " + std::to_string(n_x) + " floats, got " +
                std::to_string(x.size()));
  }
  if (n_rows_x > 0 && w.n_rows > 0 &&
      (y_stride < w.n_rows ||
       static_cast<int64_t>(y.size()) < (n_rows_x - 1) * y_stride + w.n_rows)) {
    throw Error(tensor_prefix(w, "matmul") + "output of " + std::to_string(y.size()) +
                " floats with stride " + std::to_string(y_stride) + " cannot hold " +
                std::to_string(n_rows_x) + " rows of " + std::to_string(w.n_rows));
  }
  return *act_type;
}

// Sum over the blocks of weight row o of min * correction (see
// round_q8_1_block), in block order. Q4_1 and Q5_1 keep the min, an fp16,
// at the same offset.
static_assert(offsetof(quant::BlockQ4_1, m) == offsetof(quant::BlockQ5_1, m));
float min_term(const WeightView& w, int64_t o, const float* corrections) {
  const std::byte* block = w.row(o).data() + offsetof(quant::BlockQ4_1, m);
  const size_t block_bytes = ggml_type_traits(w.type).block_bytes;
  float sum = 0.0f;
  for (int64_t b = 0; b < w.n_cols / kBlock32; ++b, block += block_bytes) {
    uint16_t m;
    std::memcpy(&m, block, sizeof(m));
    sum += fp16_to_fp32(m) * corrections[b];
  }
  return sum;
}

}  // namespace

GgmlType activation_type(GgmlType weight_type) {
  if (const auto type = vec_dot_type(weight_type)) return *type;
  throw Error("no matmul kernel for weight type " + std::string(ggml_type_name(weight_type)));
}

void round_activations(GgmlType weight_type, std::span<const float> x, std::span<float> out) {
  if (out.size() != x.size()) {
    throw Error("round_activations: " + std::to_string(x.size()) + " inputs but " +
                std::to_string(out.size()) + " outputs");
  }
  switch (activation_type(weight_type)) {
    case GgmlType::F32:
      if (out.data() != x.data()) std::copy(x.begin(), x.end(), out.begin());
      return;
    case GgmlType::F16:
      return round_through_16_bits(x, out, fp32_to_fp16_row, fp16_to_fp32_row);
    case GgmlType::BF16:
      return round_through_16_bits(x, out, fp32_to_bf16_row, bf16_to_fp32_row);
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
      return round_blocks(x, out, kBlock32, round_q8_0_block);
    default:  // Q8_K
      return round_blocks(x, out, kBlockK, round_q8_k_block);
  }
}

void matmul(const WeightView& w, std::span<const float> x, int64_t n_rows_x, std::span<float> y,
            int64_t y_stride, ThreadPool& pool, MatmulScratch& scratch) {
  const GgmlType act_type = check_matmul(w, x, n_rows_x, y, y_stride);
  if (n_rows_x == 0 || w.n_rows == 0) return;
  const MatmulOutput output{&w, y, y_stride};
  if (matmul_integer({&output, 1}, x, n_rows_x, pool, scratch)) return;
  const int64_t n_cols = w.n_cols;
  const bool in_place = reads_in_place(w);
  const bool round = act_type != GgmlType::F32;
  const bool min_terms = act_type == GgmlType::Q8_1;
  const int64_t n_blocks = n_cols / kBlock32;
  const int64_t n_rounded = n_rows_x * n_cols;
  const int64_t n_scratch = !round ? 0 : n_rounded + (min_terms ? n_rows_x * n_blocks : 0);
  prepare_scratch(w, n_scratch, in_place, pool.size(), scratch);

  // Rounded rows first, then (Q8_1 only) the block-sum corrections per row.
  const float* act = x.data();
  const float* corrections = nullptr;
  if (round) {
    float* rounded = scratch.activations.data();
    float* corr = rounded + n_rounded;
    pool.parallel_for(n_rows_x, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* from = x.data() + r * n_cols;
        float* to = rounded + r * n_cols;
        if (min_terms) {
          for (int64_t b = 0; b < n_blocks; ++b) {
            corr[r * n_blocks + b] = round_q8_1_block(from + b * kBlock32, to + b * kBlock32);
          }
        } else {
          round_activations(w.type, {from, static_cast<size_t>(n_cols)},
                            {to, static_cast<size_t>(n_cols)});
        }
      }
    });
    act = rounded;
    if (min_terms) corrections = corr;
  }

  // F32, F16 and BF16 weights in register tiles where the level has them
  // (the same bits as below).
  if (!min_terms && matmul_float_tiles(w, act, n_rows_x, y, y_stride, pool, scratch)) return;

  // Each output row is one weight row against every activation row, so the
  // weight bytes are decoded once per call whatever the batch size.
  pool.run([&](int thread, int n_threads) {
    const ThreadPool::Range range = ThreadPool::split_range(w.n_rows, kRowGrain, thread, n_threads);
    const std::span<float> buf = scratch.weight_rows[static_cast<size_t>(thread)];
    for (int64_t o = range.begin; o < range.end; ++o) {
      const float* row = weight_row(w, o, in_place, buf);
      for (int64_t r = 0; r < n_rows_x; ++r) {
        float sum = dot_f32(row, act + r * n_cols, n_cols);
        if (corrections) sum += min_term(w, o, corrections + r * n_blocks);
        y[static_cast<size_t>(r * y_stride + o)] = sum;
      }
    }
  });
}

namespace {

// The matrices of one multi-matrix call must all take rows as wide.
void check_same_width(const MatmulOutput& out, std::span<const MatmulOutput> outputs) {
  if (out.w->n_cols != outputs[0].w->n_cols) {
    throw Error(tensor_prefix(*out.w, "matmul") + "takes rows of " + std::to_string(out.w->n_cols) +
                " inputs, the others " + std::to_string(outputs[0].w->n_cols));
  }
}

}  // namespace

void matmul_shared_input(std::span<const MatmulOutput> outputs, std::span<const float> x,
                         int64_t n_rows_x, ThreadPool& pool, MatmulScratch& scratch) {
  for (const MatmulOutput& out : outputs) {
    check_matmul(*out.w, x, n_rows_x, out.y, out.y_stride);
    check_same_width(out, outputs);
  }
  if (n_rows_x == 0) return;
  if (matmul_integer(outputs, x, n_rows_x, pool, scratch)) return;
  for (const MatmulOutput& out : outputs)
    matmul(*out.w, x, n_rows_x, out.y, out.y_stride, pool, scratch);
}

void matmul_each_input(std::span<const MatmulOutput> outputs,
                       std::span<const std::span<const float>> inputs, ThreadPool& pool,
                       MatmulScratch& scratch) {
  if (inputs.size() != outputs.size()) {
    throw Error("matmul_each_input: " + std::to_string(outputs.size()) + " weights, " +
                std::to_string(inputs.size()) + " inputs");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const MatmulOutput& out = outputs[i];
    check_matmul(*out.w, inputs[i], 1, out.y, out.y_stride);
    check_same_width(out, outputs);
  }
  if (outputs.empty() || matmul_integer_each_input(outputs, inputs, pool, scratch)) return;
  for (size_t i = 0; i < outputs.size(); ++i) {
    matmul(*outputs[i].w, inputs[i], 1, outputs[i].y, outputs[i].y_stride, pool, scratch);
  }
}

void get_rows(const WeightView& table, std::span<const int32_t> ids, std::span<float> out) {
  check_rows(table, "get_rows");
  const auto n_cols = static_cast<size_t>(table.n_cols);
  if (out.size() != ids.size() * n_cols) {
    throw Error(tensor_prefix(table, "get_rows") + std::to_string(ids.size()) + " rows of " +
                std::to_string(n_cols) + " need " + std::to_string(ids.size() * n_cols) +
                " floats, got " + std::to_string(out.size()));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= table.n_rows) {
      throw Error(tensor_prefix(table, "get_rows") + "row id " + std::to_string(id) +
                  " is outside [0, " + std::to_string(table.n_rows) + ")");
    }
    dequantize_row_fast(table.type, table.row(id), out.subspan(i * n_cols, n_cols));
  }
}

}  // namespace cortiq::kernels
