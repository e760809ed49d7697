// Small seeded generators for reproducible data: SplitMix64 for bits and a
// Box-Muller normal sampler on top of it. Both are fully specified here (no
// std:: distributions, whose output differs between standard libraries), so
// a seed gives the same numbers wherever the libm's log/cos/sin agree.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace cortiq {

// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit counter passed through a
// strong mixing function. Every seed, 0 included, gives a good stream.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix(state_);
  }
  // Uniform in (0, 1]: never 0, so log() of it is finite.
  double uniform_open_closed() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // The finalizer alone, also a good 64-bit hash mixer.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Standard normal samples by the Box-Muller transform, computed in double:
// each pair of uniforms (u1, u2) gives r*cos(t) and then r*sin(t), with
// r = sqrt(-2 ln u1), t = 2 pi u2.
class NormalSampler {
 public:
  explicit NormalSampler(uint64_t seed) : bits_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double radius = std::sqrt(-2.0 * std::log(bits_.uniform_open_closed()));
    const double angle = 2.0 * std::numbers::pi * bits_.uniform();
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

 private:
  SplitMix64 bits_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// FNV-1a, 64-bit: a stable hash of a name (seeds per tensor).
inline uint64_t fnv1a64(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : text) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace cortiq
