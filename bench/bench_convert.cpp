// Row conversions fp16/bf16 <-> fp32 at each SIMD level, in GB/s of input.
#include <benchmark/benchmark.h>

#include <vector>

#include "base/cpu_features.hpp"
#include "kernels/cpu/convert.hpp"

namespace {

void BM_Fp16ToFp32(benchmark::State& state) {
  const auto level = static_cast<cortiq::SimdLevel>(state.range(0));
  cortiq::set_simd_level(level);
  if (cortiq::simd_level() != level) {
    state.SkipWithError("SIMD level not available on this CPU");
    return;
  }
  std::vector<uint16_t> src(1 << 16, 0x3c00);
  std::vector<float> dst(src.size());
  for (auto _ : state) {
    cortiq::kernels::fp16_to_fp32_row(src, dst);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * src.size() * 2));
  state.SetLabel(cortiq::simd_level_name(level));
}
BENCHMARK(BM_Fp16ToFp32)->Arg(0)->Arg(1)->Arg(2);

}  // namespace
