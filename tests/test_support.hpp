// Helpers shared by the tests: where data lives, temporary files, a seeded
// generator.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "base/random.hpp"
#include "quant/ggml_type.hpp"

namespace cortiq::test {

// ../shared/data, or $CORTIQ_SHARED_DATA; empty when absent.
std::filesystem::path shared_data_dir();
// Skips the current test with a clear message when shared data is absent.
#define CORTIQ_REQUIRE_SHARED_DATA()                                                   \
  do {                                                                                 \
    if (::cortiq::test::shared_data_dir().empty())                                     \
      GTEST_SKIP() << "../shared/data not found (set CORTIQ_SHARED_DATA to run this)"; \
  } while (0)

std::filesystem::path golden_dir();

// |got - want|_2 / |want|_2, in double: how far a backend's floats are
// from the reference's.
double relative_l2(std::span<const float> got, std::span<const float> want);

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

std::vector<uint8_t> read_file_bytes(const std::filesystem::path& path);
void write_file_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes);

// Runs the cortiq CLI with the given argument string; returns the exit code
// and fills `output` with stdout+stderr.
int run_cli(const std::string& args, std::string* output = nullptr);

// Deterministic English-like text of at least min_bytes (words drawn by a
// seeded generator), for tests that need a long input but not a given one.
std::string sample_text(size_t min_bytes, uint64_t seed = 1);

// n normal(0, scale) floats from a seeded NormalSampler.
std::vector<float> normal_values(uint64_t seed, size_t n, double scale = 1.0);

// Caps the address space of this process at what it maps now plus
// `headroom` bytes, so that a larger allocation fails. Only for the child of
// a death test (EXPECT_EXIT): the limit stays for the rest of the process.
void limit_address_space(uint64_t headroom);

// AddressSanitizer reserves terabytes of shadow memory up front, so tests
// that limit the address space cannot run under it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// The library's seeded generator (base/random.hpp), used for test data.
using SplitMix64 = ::cortiq::SplitMix64;

}  // namespace cortiq::test

namespace cortiq {
// gtest prints parameters through ADL: name the type instead of its bytes.
inline void PrintTo(GgmlType type, std::ostream* os) {
  *os << ggml_type_name(type);
}
}  // namespace cortiq
