// Matrix products per weight type: decode (1 activation row, GB/s of weights
// read) and prefill (64 rows, GFLOP/s), on the pool's threads. The numbers to
// compare against are the machine's read bandwidth (decode) and its int8/fp
// peak (prefill); see docs/performance.md.
#include <benchmark/benchmark.h>

#include <vector>

#include "base/random.hpp"
#include "base/thread_pool.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/packed_weights.hpp"
#include "quant/quantize.hpp"

namespace {

using cortiq::GgmlType;

// A 2048 x 2048 matrix (a Llama-1B attention projection) of the given type.
struct Matrix {
  static constexpr int64_t kRows = 2048, kCols = 2048;
  GgmlType type;
  std::vector<std::byte> bytes;
  cortiq::kernels::PackedWeightStore packed;
  cortiq::kernels::WeightView view;

  explicit Matrix(GgmlType t) : type(t) {
    const size_t row_bytes = *cortiq::ggml_row_bytes(t, kCols);
    bytes.resize(row_bytes * kRows);
    cortiq::NormalSampler normal(1);
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      for (auto& v : row) v = static_cast<float>(normal.next() / 45.0);
      cortiq::quantize_row(t, row, {bytes.data() + r * row_bytes, row_bytes});
    }
    // Packed as a model load packs it (Q4_0, Q8_0), so the kernels measured
    // are the ones a forward pass runs.
    view = packed.pack({t, kRows, kCols, row_bytes, bytes.data(), "bench"});
  }
};

void run_matmul(benchmark::State& state, GgmlType type, int64_t n_rows_x) {
  static cortiq::ThreadPool pool(2);
  const Matrix w(type);
  std::vector<float> x(static_cast<size_t>(n_rows_x * Matrix::kCols), 0.5f);
  std::vector<float> y(static_cast<size_t>(n_rows_x * Matrix::kRows));
  cortiq::kernels::MatmulScratch scratch;
  for (auto _ : state) {
    cortiq::kernels::matmul(w.view, x, n_rows_x, y, Matrix::kRows, pool, scratch);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes.size()));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * Matrix::kRows * Matrix::kCols * static_cast<double>(n_rows_x) *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_MatmulDecode(benchmark::State& state) {
  run_matmul(state, static_cast<GgmlType>(state.range(0)), 1);
}
void BM_MatmulPrefill64(benchmark::State& state) {
  run_matmul(state, static_cast<GgmlType>(state.range(0)), 64);
}

void weight_types(benchmark::internal::Benchmark* b) {
  for (const GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
        GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4,
        GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    b->Arg(static_cast<int64_t>(t));
  }
  b->ArgName("type")->UseRealTime();
}

BENCHMARK(BM_MatmulDecode)->Apply(weight_types);
BENCHMARK(BM_MatmulPrefill64)->Apply(weight_types);

}  // namespace
