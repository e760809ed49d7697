// Matrix products per weight type: decode (1 activation row, GB/s of weights
// read) and prefill (64 rows, GFLOP/s), on the pool's threads. The numbers to
// compare against are the machine's read bandwidth (decode) and its int8/fp
// peak (prefill); see docs/performance.md.
#include <benchmark/benchmark.h>

#include <initializer_list>
#include <memory>
#include <vector>

#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "kernels/cpu/read_bandwidth.hpp"
#include "quant/quantize.hpp"

namespace {

using cortiq::GgmlType;

// A matrix of the given type, by default 2048 x 2048 (a Llama-1B attention
// projection).
struct Matrix {
  static constexpr int64_t kRows = 2048, kCols = 2048;
  GgmlType type;
  int64_t n_rows, n_cols;
  std::vector<std::byte> bytes;
  cortiq::kernels::PackedWeightStore packed;
  cortiq::kernels::WeightView view;

  explicit Matrix(GgmlType t, int64_t rows = kRows, int64_t cols = kCols)
      : type(t), n_rows(rows), n_cols(cols) {
    const size_t row_bytes = *cortiq::ggml_row_bytes(t, cols);
    bytes.resize(row_bytes * rows);
    cortiq::NormalSampler normal(1);
    std::vector<float> row(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = static_cast<float>(normal.next() / 45.0);
      cortiq::quantize_row(t, row, {bytes.data() + r * row_bytes, row_bytes});
    }
    // Packed as a model load packs it (Q4_0, Q8_0), so the kernels measured
    // are the ones a forward pass runs.
    view = packed.pack({t, rows, cols, row_bytes, bytes.data(), "bench"});
  }
};

void run_matmul(benchmark::State& state, const Matrix& w, int64_t n_rows_x) {
  static cortiq::ThreadPool pool(2);
  std::vector<float> x(static_cast<size_t>(n_rows_x * w.n_cols), 0.5f);
  std::vector<float> y(static_cast<size_t>(n_rows_x * w.n_rows));
  cortiq::kernels::MatmulScratch scratch;
  for (auto _ : state) {
    cortiq::kernels::matmul(w.view, x, n_rows_x, y, w.n_rows, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes.size()));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(w.n_rows * w.n_cols * n_rows_x) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// Copies of one matrix, more bytes in all than any L3 here, so a decode
// that goes through them in turn reads every weight from memory, as a
// model's decode does.
struct MatrixCopies {
  static constexpr int kCopies = 24;
  std::vector<std::vector<std::byte>> data, packed;
  std::vector<cortiq::kernels::WeightView> views;

  explicit MatrixCopies(const Matrix& m) {
    data.reserve(kCopies);
    packed.reserve(kCopies);
    for (int i = 0; i < kCopies; ++i) {
      cortiq::kernels::WeightView v = m.view;
      v.data = data.emplace_back(m.bytes).data();
      if (m.view.packed) {
        v.packed = packed.emplace_back(m.view.packed, m.view.packed + m.bytes.size()).data();
      }
      views.push_back(v);
    }
  }
};

void BM_MatmulDecodeFromMemory(benchmark::State& state) {
  static cortiq::ThreadPool pool(2);
  const Matrix m(static_cast<GgmlType>(state.range(0)));
  const MatrixCopies copies(m);
  std::vector<float> x(Matrix::kCols, 0.5f), y(Matrix::kRows);
  cortiq::kernels::MatmulScratch scratch;
  size_t next = 0;
  for (auto _ : state) {
    cortiq::kernels::matmul(copies.views[next], x, 1, y, Matrix::kRows, pool, scratch);
    next = (next + 1) % copies.views.size();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * m.bytes.size()));
}

// The machine's read bandwidth on the same two threads: each streams its
// half of a 512 MiB buffer (the decode roofline to compare the above with).
void BM_ReadBandwidth(benchmark::State& state) {
  static cortiq::ThreadPool pool(2);
  constexpr size_t kBytes = size_t{512} << 20;
  const auto buffer = std::make_unique<std::byte[]>(kBytes);
  pool.run(
      [&](int t, int n) { std::fill_n(buffer.get() + kBytes / n * t, kBytes / n, std::byte{1}); });
  for (auto _ : state) {
    uint64_t sums[2] = {};
    pool.run([&](int t, int n) {
      sums[t] = cortiq::kernels::read_sum(buffer.get() + kBytes / n * t, kBytes / n);
    });
    benchmark::DoNotOptimize(sums);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kBytes));
}

void BM_MatmulDecode(benchmark::State& state) {
  run_matmul(state, Matrix(static_cast<GgmlType>(state.range(0))), 1);
}
void BM_MatmulPrefill64(benchmark::State& state) {
  run_matmul(state, Matrix(static_cast<GgmlType>(state.range(0))), 64);
}
// A pp512 chunk through Llama-1B's FFN down matrix (2048 x 8192): rows four
// times as long as the square matrix's, and 512 activation rows, so the
// passes of activation rows and the caches are those of a model's prefill.
void BM_MatmulPrefill512FfnDown(benchmark::State& state) {
  run_matmul(state, Matrix(static_cast<GgmlType>(state.range(0)), 2048, 8192), 512);
}

// The given weight types as the benchmark's "type" argument.
void with_types(benchmark::internal::Benchmark* b, std::initializer_list<GgmlType> types) {
  for (const GgmlType t : types) b->Arg(static_cast<int64_t>(t));
  b->ArgName("type")->UseRealTime();
}

// Every weight type with a matmul kernel.
void weight_types(benchmark::internal::Benchmark* b) {
  with_types(b, {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                 GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4,
                 GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K});
}

BENCHMARK(BM_MatmulDecode)->Apply(weight_types);
BENCHMARK(BM_MatmulDecodeFromMemory)->Apply([](benchmark::internal::Benchmark* b) {
  with_types(b, {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K});
});
BENCHMARK(BM_ReadBandwidth)->UseRealTime();
BENCHMARK(BM_MatmulPrefill64)->Apply(weight_types);
BENCHMARK(BM_MatmulPrefill512FfnDown)->Apply([](benchmark::internal::Benchmark* b) {
  with_types(b, {GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K});
});

}  // namespace
