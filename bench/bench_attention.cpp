// Attention over an f16 KV cache with a Llama-1B layer's shape (32 query
// heads, 8 KV heads, head size 64): decode (one row attending to n_kv
// positions) and a prefill tile (16 consecutive rows), in GFLOP/s of the
// two products (q . k and p . v, 2 flops per multiply-add). The number to
// compare against is the machine's f32 FMA peak; see docs/performance.md.
// The Window cases attend to the last 512 positions only (Gemma/Mistral
// sliding windows): their time should not grow with n_kv. The Variants case
// adds a softcap, sinks and ALiBi to plain decode.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/fp16.hpp"
#include "base/random.hpp"
#include "kernels/cpu/attention.hpp"

namespace {

using cortiq::kernels::AttentionShape;
using cortiq::kernels::KvRowsView;

constexpr AttentionShape kShape{32, 8, 64, 64, 0.125f};

struct Cache {
  std::vector<uint16_t> keys, values;
  std::vector<int32_t> cells;
  KvRowsView k, v;

  explicit Cache(int64_t n_kv) {
    const int64_t width = kShape.n_head_kv * kShape.head_dim_k;
    cortiq::NormalSampler normal(7);
    keys.resize(static_cast<size_t>(n_kv * width));
    values.resize(keys.size());
    for (auto& h : keys) h = cortiq::fp32_to_fp16(static_cast<float>(normal.next()));
    for (auto& h : values) h = cortiq::fp32_to_fp16(static_cast<float>(normal.next()));
    for (int32_t c = 0; c < n_kv; ++c) cells.push_back(c);
    const auto row_bytes = static_cast<size_t>(width) * sizeof(uint16_t);
    k = {reinterpret_cast<const std::byte*>(keys.data()), row_bytes, true, cells};
    v = {reinterpret_cast<const std::byte*>(values.data()), row_bytes, true, cells};
  }
};

struct Options {
  int64_t rows = 1;
  int64_t window = 0;     // 0: from position 0
  bool variants = false;  // softcap, sinks and ALiBi
};

// rows consecutive query rows ending at position n_kv - 1.
void run_attention(benchmark::State& state, Options options) {
  const int64_t n_kv = state.range(0), rows = options.rows;
  const Cache cache(n_kv);
  cortiq::NormalSampler normal(3);
  std::vector<float> q(static_cast<size_t>(rows * kShape.n_head * kShape.head_dim_k));
  for (auto& x : q) x = static_cast<float>(normal.next());
  std::vector<float> out(static_cast<size_t>(rows * kShape.n_head * kShape.head_dim_v));
  AttentionShape shape = kShape;
  std::vector<float> sinks(static_cast<size_t>(kShape.n_head), 0.5f);
  if (options.variants) {
    shape.softcap = 50.0f;
    shape.alibi_max_bias = 8.0f;
    shape.sinks = sinks;
  }
  std::vector<int64_t> starts, counts;
  double macs = 0;
  for (int64_t r = 0; r < rows; ++r) {
    counts.push_back(n_kv - rows + 1 + r);
    starts.push_back(options.window > 0 ? std::max<int64_t>(0, counts.back() - options.window) : 0);
    macs += static_cast<double>(counts.back() - starts.back()) * kShape.n_head *
            static_cast<double>(kShape.head_dim_k + kShape.head_dim_v);
  }
  const int64_t span = counts.back() - starts.front();
  std::vector<float> scratch(cortiq::kernels::attention_scratch_floats(shape, rows, span));
  for (auto _ : state) {
    if (options.window > 0) {
      cortiq::kernels::attention_rows(q, starts, counts, cache.k, cache.v, shape, out, scratch, 0,
                                      kShape.n_head_kv);
    } else {
      cortiq::kernels::attention_rows(q, counts, cache.k, cache.v, shape, out, scratch, 0,
                                      kShape.n_head_kv);
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * macs * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void BM_AttentionDecode(benchmark::State& state) {
  run_attention(state, {});
}
void BM_AttentionPrefillTile16(benchmark::State& state) {
  run_attention(state, {.rows = 16});
}
void BM_AttentionDecodeWindow512(benchmark::State& state) {
  run_attention(state, {.window = 512});
}
void BM_AttentionPrefillTile16Window512(benchmark::State& state) {
  run_attention(state, {.rows = 16, .window = 512});
}
void BM_AttentionDecodeVariants(benchmark::State& state) {
  run_attention(state, {.variants = true});
}

BENCHMARK(BM_AttentionDecode)->Arg(128)->Arg(512)->Arg(2048)->UseRealTime();
BENCHMARK(BM_AttentionPrefillTile16)->Arg(128)->Arg(512)->Arg(2048)->UseRealTime();
BENCHMARK(BM_AttentionDecodeWindow512)->Arg(2048)->Arg(8192)->UseRealTime();
BENCHMARK(BM_AttentionPrefillTile16Window512)->Arg(2048)->Arg(8192)->UseRealTime();
BENCHMARK(BM_AttentionDecodeVariants)->Arg(512)->Arg(2048)->UseRealTime();

}  // namespace
