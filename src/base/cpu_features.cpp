#include "base/cpu_features.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "base/log.hpp"

namespace cortiq {

namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  // libgcc's checks include the OS support bits (XGETBV), so a feature
  // reported here is usable.
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = __builtin_cpu_supports("f16c");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
#elif defined(__aarch64__)
  f.neon = true;
#endif
  return f;
}

SimdLevel best_level(const CpuFeatures& f) {
  if (f.neon) return SimdLevel::neon;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni && f.avx2 && f.fma &&
      f.f16c) {
    return SimdLevel::avx512;
  }
  if (f.avx2 && f.fma && f.f16c) return SimdLevel::avx2;
  return SimdLevel::scalar;
}

SimdLevel clamp_level(SimdLevel wanted, SimdLevel best) {
  if (wanted == SimdLevel::neon || best == SimdLevel::neon) {
    return wanted == SimdLevel::scalar ? SimdLevel::scalar : best;
  }
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

SimdLevel initial_level() {
  const SimdLevel best = best_level(cpu_features());
  const char* env = std::getenv("CORTIQ_SIMD");
  if (env == nullptr || *env == '\0') return best;
  for (SimdLevel l : {SimdLevel::scalar, SimdLevel::avx2, SimdLevel::avx512, SimdLevel::neon}) {
    if (std::strcmp(env, simd_level_name(l)) == 0) return clamp_level(l, best);
  }
  LOG_WARN("CORTIQ_SIMD=%s is not one of scalar|avx2|avx512|neon; using %s", env,
           simd_level_name(best));
  return best;
}

std::atomic<SimdLevel>& level_storage() {
  static std::atomic<SimdLevel> level{initial_level()};
  return level;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

SimdLevel simd_level() {
  return level_storage().load(std::memory_order_relaxed);
}

void set_simd_level(SimdLevel level) {
  level_storage().store(clamp_level(level, best_level(cpu_features())), std::memory_order_relaxed);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::scalar:
      return "scalar";
    case SimdLevel::avx2:
      return "avx2";
    case SimdLevel::avx512:
      return "avx512";
    case SimdLevel::neon:
      return "neon";
  }
  return "?";
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  auto add = [&s](bool has, const char* name) {
    if (!has) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.neon, "neon");
  return s.empty() ? "none" : s;
}

}  // namespace cortiq
