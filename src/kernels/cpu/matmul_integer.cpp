#include "kernels/cpu/matmul_integer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>

#include "base/fp16.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/dot_kquants.hpp"
#include "kernels/cpu/dot_kquants_packed.hpp"
#include "kernels/cpu/dot_packed.hpp"
#include "kernels/cpu/dot_quants32.hpp"
#include "kernels/cpu/q8_activations.hpp"
#include "kernels/cpu/work_items.hpp"

namespace cortiq::kernels {

namespace {

// Activation rows one kernel call takes (the kernels' n_act limit), unless
// the kernel takes a whole pass (packed_dot_max_rows).
constexpr int kActTile = 4;
// Activation rows per pass over the weights: a pass's blocks must stay in
// the core's L2 (512 KiB here, with room left for the weights and outputs)
// while every weight unit of the thread meets them, so wide rows (8192
// inputs: ffn_down) take fewer per pass. At most kActRowsPerPass.
constexpr int64_t kActRowsPerPass = 64;
constexpr int64_t kPassBytes = 192 << 10;

int64_t rows_per_pass(int64_t act_row_bytes) {
  return std::clamp<int64_t>(kPassBytes / std::max<int64_t>(act_row_bytes, 1), int64_t{kActTile},
                             kActRowsPerPass);
}
// The most weight rows one kernel call covers (a pair of packed groups).
constexpr int64_t kMaxUnitRows = 2 * kPackRows;
// At most this many matrices in one call (Q, K, V; the gate and up
// matrices of every expert a decode row chose).
constexpr size_t kMaxOutputs = 32;

enum class ActFormat { q8_0, q8_k };

// One weight matrix ready for the integer kernels. A unit is what one
// kernel call covers: a packed group of 8 rows, or one row of the file.
struct IntegerMatrix {
  ActFormat act = ActFormat::q8_0;
  PackedDot group = nullptr;
  PackedKDot kgroup = nullptr;  // packed K layouts (Q8BlockK activations)
  RowDot row = nullptr;
  MinCorrection min_correction = nullptr;  // Q4_1/Q5_1: the peer's Q8_1 block sums
  KQuantDot kquant = nullptr;
  const std::byte* base = nullptr;
  size_t unit_bytes = 0;
  int64_t unit_rows = 1;
  int64_t n_units = 0;
  int64_t n_blocks = 0;    // activation blocks per row
  int max_act = kActTile;  // activation rows per kernel call
  float* y = nullptr;
  int64_t y_stride = 0;
  // Where this matrix's activation rows start among the call's quantized
  // blocks (and corrections): 0 when every matrix reads the same input.
  int64_t act_offset = 0;
};

std::optional<IntegerMatrix> integer_matrix(const WeightView& w, int64_t n_act_rows) {
  IntegerMatrix m;
  if (const PackedLayout layout = packed_layout(w.type, w.n_rows);
      w.packed && layout != PackedLayout::none) {
    if (is_k_layout(layout)) {
      m.kgroup = packed_kquant_dot(layout);
      m.act = ActFormat::q8_k;
      m.n_blocks = w.n_cols / 256;
    } else {
      m.group = packed_dot(layout);
      m.n_blocks = w.n_cols / 32;
      m.max_act = std::min<int>(packed_dot_max_rows(layout), kActRowsPerPass);
    }
    m.base = w.packed;
    m.unit_rows = kPackRows;
    m.unit_bytes = static_cast<size_t>(m.n_blocks) * packed_block_bytes(layout);
    // The AVX-512 kernels take two groups per call (one register holds both
    // groups' lanes) when the matrix has an even number of them. Except a
    // decode (one activation row), which only streams weights: one group at
    // a time, one read stream per thread, is faster there. Measured, 2
    // threads, Zen 4: Q4_0 Llama-1B 46-47 against 43-44 t/s, Phi-3-mini and
    // Gemma-2-2B 4-7 % too (the AVX-512 one-group kernel has since removed
    // the pair's lead on long rows, ffn_down's 8192+ inputs); MXFP4
    // (GPT-OSS-20B geometry, 4 layers) 61-62 against 48-54 t/s; Q4_K_M
    // Llama-1B 34.5-38.7 against 20.4-21.7 t/s (BM_MatmulDecodeFromMemory:
    // Q4_K 17 -> 22-24, Q6_K 12 -> 16-23, Q8_0 22-26 -> 23-28 GB/s). The
    // bits are the same either way.
    const PackedDot pair = packed_dot_pair(layout);
    const PackedKDot kpair = packed_kquant_dot_pair(layout);
    const bool streaming = n_act_rows == 1;
    if ((pair || kpair) && !streaming && (w.n_rows / kPackRows) % 2 == 0) {
      if (pair) m.group = pair;
      if (kpair) m.kgroup = kpair;
      m.max_act = kActRowsPerPass;
      m.unit_rows = kMaxUnitRows;
      m.unit_bytes *= 2;
    }
  } else if ((m.row = row_dot(w.type))) {
    m.n_blocks = w.n_cols / 32;
    m.min_correction = q8_1_min_correction(w.type);
  } else if ((m.kquant = kquant_dot(w.type))) {
    m.act = ActFormat::q8_k;
    m.n_blocks = w.n_cols / 256;
  } else {
    return std::nullopt;
  }
  if (!m.group && !m.kgroup) {
    m.base = w.data;
    m.unit_bytes = w.row_bytes;
  }
  m.n_units = w.n_rows / m.unit_rows;
  return m;
}

// One unit against activation rows [begin, end), in tiles. `corrections`
// holds each activation row's Q8_1 block-sum corrections where a matrix
// needs them (null otherwise).
template <typename Block>
void run_unit(const IntegerMatrix& m, int64_t u, const Block* act, const float* corrections,
              int64_t begin, int64_t end) {
  std::array<float, kActRowsPerPass * kMaxUnitRows> out;
  const std::byte* unit = m.base + static_cast<size_t>(u) * m.unit_bytes;
  for (int64_t i = begin; i < end; i += m.max_act) {
    const int n_act = static_cast<int>(std::min<int64_t>(m.max_act, end - i));
    const Block* a = act + i * m.n_blocks;
    if constexpr (std::is_same_v<Block, Q8BlockK>) {
      if (m.kgroup) {
        m.kgroup(unit, a, m.n_blocks, n_act, m.n_blocks, out.data());
      } else {
        m.kquant(unit, a, m.n_blocks, n_act, m.n_blocks, out.data());
      }
    } else if (m.group) {
      m.group(unit, a, m.n_blocks, n_act, m.n_blocks, out.data());
    } else {
      m.row(unit, a, m.n_blocks, n_act, m.n_blocks, out.data());
      if (m.min_correction) {
        m.min_correction(unit, corrections + i * m.n_blocks, m.n_blocks, n_act, m.n_blocks,
                         out.data());
      }
    }
    for (int j = 0; j < n_act; ++j) {
      float* dst = m.y + (i + j) * m.y_stride + u * m.unit_rows;
      // A fixed-size copy for groups: a library memmove per 8 floats cost
      // ~5 % of prefill.
      if (m.unit_rows == kPackRows) {
        std::memcpy(dst, out.data() + j * kPackRows, kPackRows * sizeof(float));
      } else if (m.unit_rows == kMaxUnitRows) {
        std::memcpy(dst, out.data() + j * kMaxUnitRows, kMaxUnitRows * sizeof(float));
      } else {
        *dst = out[static_cast<size_t>(j)];
      }
    }
  }
}

// What the peer's Q8_1 block sum (q8_1_block_sum) adds to the kernels'
// a.d * sum: the correction matmul's float path makes too
// (round_q8_1_block in matmul.cpp).
float q8_1_sum_correction(const float* x, const Q8Block32& block) {
  return q8_1_block_sum(x, block.sum) - block.d * static_cast<float>(block.sum);
}

// Rows of x quantized once, on the pool when there are several, with the
// Q8_1 corrections of every block when `corrections` is not null.
template <typename Block>
void quantize_rows(std::span<const float> x, int64_t n_rows_x, int64_t n_cols, Block* out,
                   float* corrections, ThreadPool& pool) {
  const int64_t n_blocks = n_cols / static_cast<int64_t>(sizeof(Block::qs));
  auto quantize = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x.data() + r * n_cols;
      if constexpr (std::is_same_v<Block, Q8BlockK>) {
        quantize_q8_k(row, out + r * n_blocks, n_cols);
      } else {
        quantize_q8_0(row, out + r * n_blocks, n_cols);
        if (!corrections) continue;
        for (int64_t b = 0; b < n_blocks; ++b) {
          corrections[r * n_blocks + b] = q8_1_sum_correction(row + 32 * b, out[r * n_blocks + b]);
        }
      }
    }
  };
  if (n_rows_x < kActTile) return quantize(0, n_rows_x);
  pool.parallel_for(n_rows_x, quantize);
}

// The units of all matrices, laid end to end by work (rows x blocks), are
// cut into slices (work_items.hpp) and shared out as work items.
template <typename Block>
void run_matrices(std::span<const IntegerMatrix> matrices, const Block* act,
                  const float* corrections, int64_t n_rows_x, ThreadPool& pool) {
  int64_t total = 0;
  int64_t total_units = 0;
  int64_t total_bytes = 0;
  for (const IntegerMatrix& m : matrices) {
    total += m.n_units * m.unit_rows * m.n_blocks;
    total_units += m.n_units;
    total_bytes += m.n_units * static_cast<int64_t>(m.unit_bytes);
  }
  const int64_t per_pass =
      rows_per_pass(matrices[0].n_blocks * static_cast<int64_t>(sizeof(Block)));
  const int64_t n_passes = (n_rows_x + per_pass - 1) / per_pass;
  const int64_t threads = pool.size();
  const Slices slices = call_slices(n_passes, total, total_units, total_bytes, threads);
  const int64_t n_slices = slices.count;
  run_work_items(pool, n_passes, n_slices, [&](int, int64_t pass_index, int64_t slice) {
    const int64_t pass = pass_index * per_pass;
    const int64_t pass_end = std::min(n_rows_x, pass + per_pass);
    const int64_t begin = slices.begin(slice);
    const int64_t end = slices.end(slice);
    int64_t at = 0;  // work before the current matrix
    for (const IntegerMatrix& m : matrices) {
      const int64_t unit_work = m.unit_rows * m.n_blocks;
      // Units u with begin <= at + u * unit_work < end.
      const int64_t first =
          std::clamp((begin - at + unit_work - 1) / unit_work, int64_t{0}, m.n_units);
      const int64_t last =
          std::clamp((end - at + unit_work - 1) / unit_work, int64_t{0}, m.n_units);
      const Block* m_act = act + m.act_offset;
      const float* m_corrections = corrections ? corrections + m.act_offset : nullptr;
      for (int64_t u = first; u < last; ++u) {
        run_unit(m, u, m_act, m_corrections, pass, pass_end);
      }
      at += m.n_units * unit_work;
    }
  });
}

}  // namespace

bool has_integer_kernel(const WeightView& w) {
  return integer_matrix(w, 1).has_value();
}

namespace {

// The matrices of a call as IntegerMatrix, or nothing when one has no
// integer kernel or their activation formats differ.
std::optional<std::array<IntegerMatrix, kMaxOutputs>> integer_matrices(
    std::span<const MatmulOutput> outputs, int64_t n_rows_x) {
  if (outputs.empty() || outputs.size() > kMaxOutputs) return std::nullopt;
  std::array<IntegerMatrix, kMaxOutputs> matrices;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::optional<IntegerMatrix> m = integer_matrix(*outputs[i].w, n_rows_x);
    if (!m) return std::nullopt;
    matrices[i] = *m;
    matrices[i].y = outputs[i].y.data();
    matrices[i].y_stride = outputs[i].y_stride;
  }
  for (size_t i = 1; i < outputs.size(); ++i) {
    if (matrices[i].act != matrices[0].act) return std::nullopt;
  }
  return matrices;
}

// Quantizes each input (n_rows_x rows each) once, into consecutive blocks,
// then runs every matrix against its own input's rows (act_offset).
void quantize_and_run(std::span<IntegerMatrix> used, std::span<const std::span<const float>> inputs,
                      int64_t n_rows_x, int64_t n_cols, ThreadPool& pool, MatmulScratch& scratch) {
  const auto n_inputs = static_cast<int64_t>(inputs.size());
  const int64_t input_blocks = n_rows_x * used[0].n_blocks;
  if (inputs.size() > 1) {
    for (size_t i = 0; i < used.size(); ++i)
      used[i].act_offset = static_cast<int64_t>(i) * input_blocks;
  }
  if (used[0].act == ActFormat::q8_k) {
    const auto n = static_cast<size_t>(n_inputs * input_blocks);
    if (scratch.q8k_blocks.size() < n) scratch.q8k_blocks.resize(n);
    for (int64_t i = 0; i < n_inputs; ++i) {
      quantize_rows(inputs[static_cast<size_t>(i)], n_rows_x, n_cols,
                    scratch.q8k_blocks.data() + i * input_blocks, nullptr, pool);
    }
    run_matrices<Q8BlockK>(used, scratch.q8k_blocks.data(), nullptr, n_rows_x, pool);
    return;
  }
  const auto n = static_cast<size_t>(n_inputs * input_blocks);
  if (scratch.q8_blocks.size() < n) scratch.q8_blocks.resize(n);
  // One float per block for Q4_1/Q5_1, in the float path's buffer (this
  // call does not take the float path).
  float* corrections = nullptr;
  if (std::any_of(used.begin(), used.end(),
                  [](const IntegerMatrix& m) { return m.min_correction != nullptr; })) {
    if (scratch.activations.size() < n) scratch.activations.resize(n);
    corrections = scratch.activations.data();
  }
  for (int64_t i = 0; i < n_inputs; ++i) {
    const int64_t offset = i * input_blocks;
    quantize_rows(inputs[static_cast<size_t>(i)], n_rows_x, n_cols,
                  scratch.q8_blocks.data() + offset, corrections ? corrections + offset : nullptr,
                  pool);
  }
  run_matrices<Q8Block32>(used, scratch.q8_blocks.data(), corrections, n_rows_x, pool);
}

}  // namespace

bool matmul_integer(std::span<const MatmulOutput> outputs, std::span<const float> x,
                    int64_t n_rows_x, ThreadPool& pool, MatmulScratch& scratch) {
  auto matrices = integer_matrices(outputs, n_rows_x);
  if (!matrices) return false;
  quantize_and_run(std::span(*matrices).first(outputs.size()), {&x, 1}, n_rows_x,
                   outputs[0].w->n_cols, pool, scratch);
  return true;
}

bool matmul_integer_each_input(std::span<const MatmulOutput> outputs,
                               std::span<const std::span<const float>> inputs, ThreadPool& pool,
                               MatmulScratch& scratch) {
  auto matrices = integer_matrices(outputs, 1);
  if (!matrices) return false;
  quantize_and_run(std::span(*matrices).first(outputs.size()), inputs, 1, outputs[0].w->n_cols,
                   pool, scratch);
  return true;
}

}  // namespace cortiq::kernels
