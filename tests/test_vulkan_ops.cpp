// The Vulkan backend (src/backends/vulkan) on whatever device the loader
// finds: in CI, Mesa's software device (lavapipe). Kernels are checked
// against the CPU reference (dequantize_row, then a double-precision dot;
// kernels/cpu/norm.hpp), and for batch invariance bit for bit.
#include <gtest/gtest.h>

#if CORTIQ_HAVE_VULKAN

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/vulkan/spirv_modules.hpp"
#include "backends/vulkan/vulkan_buffer.hpp"
#include "backends/vulkan/vulkan_commands.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#include "backends/vulkan/vulkan_error.hpp"
#include "backends/vulkan/vulkan_matrix.hpp"
#include "backends/vulkan/vulkan_ops.hpp"
#include "backends/vulkan/vulkan_pipeline.hpp"
#include "base/error.hpp"
#include "base/fp16.hpp"
#include "base/random.hpp"
#include "kernels/cpu/norm.hpp"
#include "quant/quantize.hpp"
#include "test_support.hpp"
#include "vulkan_test_device.hpp"

namespace cortiq::vulkan {
namespace {

using test::normal_values;

constexpr GgmlType kTypes[] = {GgmlType::F32,    GgmlType::F16,   GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0,   GgmlType::Q4_1,  GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K,
                               GgmlType::Q4_K,   GgmlType::Q5_K,  GgmlType::Q6_K, GgmlType::IQ4_XS};

// Worst error of a matmul element over the sum of |w x| of its dot (the
// error a float sum can make scales with that, not with the dot, which may
// be near zero). Measured on lavapipe (Mesa 22.3.6): worst 6.1e-8 (Q5_0,
// n_cols 256), 1.3e-8 to 1.7e-8 at n_cols 4096; the bound is twice the worst.
constexpr double kMatmulTolerance = 1.2e-7;
// The K-quants' 256-element super-blocks: at n_cols 256 one invocation sums
// a whole row alone (no tree), so the error is that of a 256-term float sum:
// measured 1.5e-7 (Q3_K) to 2.2e-7 (Q5_K); at 4096, 2.5e-8 to 3.2e-8. The
// bound is about twice the worst.
constexpr double kSuperBlockMatmulTolerance = 4e-7;

double matmul_tolerance(GgmlType type) {
  return ggml_type_traits(type).block_elems == 256 ? kSuperBlockMatmulTolerance : kMatmulTolerance;
}
// rms_norm: worst |gpu - cpu| / |cpu|. Measured 0 on lavapipe (the float
// tree sum rounds to the reference's float mean here); the bound allows the
// sum of squares in float against the reference's double, and sqrt and
// division at Vulkan's precision (a few ulp).
constexpr double kRmsNormTolerance = 1e-6;

std::vector<std::byte> quantized(GgmlType type, std::span<const float> values, int64_t n_cols) {
  const uint64_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(n_cols));
  const int64_t n_rows = static_cast<int64_t>(values.size()) / n_cols;
  std::vector<std::byte> bytes(row_bytes * static_cast<uint64_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_row(type, values.subspan(static_cast<size_t>(r * n_cols), static_cast<size_t>(n_cols)),
                 std::span(bytes).subspan(static_cast<size_t>(r) * row_bytes, row_bytes));
  }
  return bytes;
}

std::vector<float> dequantized(GgmlType type, std::span<const std::byte> bytes, int64_t n_rows,
                               int64_t n_cols) {
  const uint64_t row_bytes = *ggml_row_bytes(type, static_cast<uint64_t>(n_cols));
  std::vector<float> values(static_cast<size_t>(n_rows * n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(
        type, bytes.subspan(static_cast<size_t>(r) * row_bytes, row_bytes),
        std::span(values).subspan(static_cast<size_t>(r * n_cols), static_cast<size_t>(n_cols)));
  }
  return values;
}

VulkanBuffer device_floats(VulkanDevice& device, std::span<const float> values,
                           HostAccess access = HostAccess::mapped_when_possible) {
  VulkanBuffer buffer(device, values.size_bytes(), MemoryKind::device_local, access);
  buffer.upload(values);
  return buffer;
}

// A random weight matrix of `type` and its host copy.
struct TestMatrix {
  std::vector<std::byte> bytes;
  std::vector<float> decoded;  // what dequantize_row makes of bytes
};

// IQ4_XS has no quantizer: random codes and scales, under an fp16 d that
// keeps the values near 1.
std::vector<std::byte> random_iq4_xs(int64_t n_rows, int64_t n_cols, uint64_t seed) {
  std::vector<std::byte> bytes(*ggml_row_bytes(GgmlType::IQ4_XS, static_cast<uint64_t>(n_cols)) *
                               static_cast<uint64_t>(n_rows));
  SplitMix64 bits(seed);
  for (std::byte& b : bytes) b = static_cast<std::byte>(bits.next() & 0xff);
  const size_t block_bytes = ggml_type_traits(GgmlType::IQ4_XS).block_bytes;
  for (size_t at = 0; at < bytes.size(); at += block_bytes) {
    const uint16_t d = fp32_to_fp16(0.0005f * static_cast<float>(1 + (at / block_bytes) % 3));
    std::memcpy(bytes.data() + at, &d, sizeof(d));
  }
  return bytes;
}

TestMatrix random_matrix(GgmlType type, int64_t n_rows, int64_t n_cols, uint64_t seed) {
  const std::vector<float> values = normal_values(seed, static_cast<size_t>(n_rows * n_cols));
  TestMatrix m;
  m.bytes = type == GgmlType::IQ4_XS ? random_iq4_xs(n_rows, n_cols, seed)
                                     : quantized(type, values, n_cols);
  m.decoded = dequantized(type, m.bytes, n_rows, n_cols);
  return m;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST(VulkanError, NamesTheCallAndTheResult) {
  EXPECT_NO_THROW(check(VK_SUCCESS, "vkCreateBuffer"));
  try {
    check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkAllocateMemory");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY");
  }
  try {
    check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
    FAIL() << "no exception";
  } catch (const DeviceLost& e) {
    EXPECT_NE(std::string(e.what()).find("vkQueueSubmit: VK_ERROR_DEVICE_LOST"), std::string::npos);
  }
  EXPECT_THROW(check(static_cast<VkResult>(-12345), "vkX"), Error);
}

TEST(VulkanShaders, AreEmbeddedAndLookedUpByName) {
  EXPECT_GE(spirv_modules().size(), 8u);
  for (const SpirvModule& module : spirv_modules()) {
    ASSERT_FALSE(module.words.empty()) << module.name;
    EXPECT_EQ(module.words[0], 0x07230203u) << module.name << ": not SPIR-V";  // the magic
  }
  // The lookup finds each module by its name.
  for (const SpirvModule& module : spirv_modules()) {
    EXPECT_EQ(spirv_module(module.name).data(), module.words.data()) << module.name;
  }
  for (const char* name : {"attention", "elementwise", "rms_norm", "rope"}) {
    EXPECT_FALSE(spirv_module(name).empty()) << name;
  }
  EXPECT_THROW(spirv_module("no_such_shader"), Error);
}

TEST(VulkanDevice, EveryDeviceListsAndOpens) {
  const std::vector<VulkanDeviceInfo> devices = list_vulkan_devices();
  if (devices.empty()) GTEST_SKIP() << "no Vulkan device found";
  for (const VulkanDeviceInfo& info : devices) {
    std::printf("vulkan device %u: %s\n", info.index, describe(info).c_str());
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.subgroup_size, 0u);
    EXPECT_LE(info.min_subgroup_size, info.subgroup_size);
    EXPECT_GE(info.max_subgroup_size, info.subgroup_size);
    if (info.api_version < VK_API_VERSION_1_2) {
      EXPECT_THROW(VulkanDevice{info.index}, Error) << info.name;
      continue;
    }
    const VulkanDevice device(info.index);
    EXPECT_EQ(device.info().name, info.name);
    EXPECT_GT(device.limits().max_storage_buffer_range, 0u);
  }
  EXPECT_THROW(VulkanDevice{static_cast<uint32_t>(devices.size())}, Error);
}

// Both ways in and out: through the mapping where the memory has one, and
// through a staging buffer (the path of a discrete GPU).
TEST(VulkanBuffer, UploadsAndDownloadsEveryWay) {
  REQUIRE_VULKAN_DEVICE(device);
  std::vector<std::byte> bytes(1001);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7 + 3);
  for (const MemoryKind kind : {MemoryKind::device_local, MemoryKind::host_visible}) {
    for (const HostAccess access : {HostAccess::mapped_when_possible, HostAccess::staging_only}) {
      VulkanBuffer buffer(device, bytes.size(), kind, access);
      buffer.upload(bytes);
      std::vector<std::byte> back(bytes.size());
      buffer.download(back);
      EXPECT_EQ(back, bytes);
      // A part at an odd offset.
      buffer.upload(std::span(bytes).first(10), 333);
      std::vector<std::byte> part(10);
      buffer.download(part, 333);
      EXPECT_EQ(part, std::vector<std::byte>(bytes.begin(), bytes.begin() + 10));
      EXPECT_THROW(buffer.upload(bytes, 1), Error);
    }
  }
}

TEST(VulkanBuffer, AllocationBeyondTheDeviceIsAnError) {
  REQUIRE_VULKAN_DEVICE(device);
  const uint64_t huge = uint64_t{1} << 50;
  try {
    VulkanBuffer buffer(device, huge);
    FAIL() << "a 1 PiB buffer was allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge)), std::string::npos) << e.what();
  }
  // Twice the device's memory passes the size limits on some devices and
  // must then fail at the heap check or in vkAllocateMemory, still an Error.
  const uint64_t twice = 2 * device.info().device_local_bytes + 4096;
  EXPECT_THROW((VulkanBuffer{device, twice}), Error);
  EXPECT_THROW((VulkanBuffer{device, 0}), Error);
  // The device is still usable afterwards.
  VulkanBuffer small(device, 16);
  small.upload(std::vector<float>{1, 2, 3, 4});
  EXPECT_EQ(small.download_floats(), (std::vector<float>{1, 2, 3, 4}));
}

TEST(VulkanPipeline, IsBuiltOnceAndKeepsItsInterface) {
  REQUIRE_VULKAN_DEVICE(device);
  // rms_norm's interface: three buffers, six 32-bit push constants, binding 2 written.
  const PipelineSpec spec{"rms_norm", 3, 24, 1u << 2};
  const ComputePipeline& first = device.pipelines().get(spec);
  EXPECT_EQ(&device.pipelines().get(spec), &first);
  EXPECT_THROW(device.pipelines().get(PipelineSpec{"rms_norm", 2, 24, 1u << 1}), Error);
  EXPECT_THROW(device.pipelines().get(PipelineSpec{"nope", 1, 0, 0}), Error);
}

TEST(VulkanMatrix, RefusesWhatTheShadersCannotRead) {
  REQUIRE_VULKAN_DEVICE(device);
  const std::vector<std::byte> bytes(2 * 18);
  EXPECT_NO_THROW((VulkanMatrix{device, GgmlType::Q4_0, 2, 32, bytes}));
  EXPECT_THROW((VulkanMatrix{device, GgmlType::Q4_0, 3, 32, bytes}), Error);  // size
  EXPECT_THROW((VulkanMatrix{device, GgmlType::Q4_0, 2, 48, bytes}), Error);  // blocks
  // A type without a decoder yet.
  EXPECT_THROW((VulkanMatrix{device, GgmlType::IQ2_XXS, 1, 256, std::vector<std::byte>(66)}),
               Error);
}

// Every type against dequantize_row and a double dot, on sizes that are no
// multiple of the workgroup: 67 rows, 1, 5 and 33 tokens (partial tiles).
TEST(VulkanMatmul, MatchesTheReferenceForEveryType) {
  REQUIRE_VULKAN_DEVICE(device);
  const int64_t n_rows = 67;
  const int64_t max_tok = 33;
  for (const int64_t n_cols : {256, 4096}) {
    const std::vector<float> x = normal_values(7, static_cast<size_t>(max_tok * n_cols));
    const VulkanBuffer x_device = device_floats(device, x);
    for (const GgmlType type : kTypes) {
      const TestMatrix m = random_matrix(type, n_rows, n_cols, 11 + n_cols);
      const VulkanMatrix w(device, type, n_rows, n_cols, m.bytes);
      double worst = 0;
      for (const int64_t n_tok : {1, 5, 33}) {
        VulkanBuffer y(device, static_cast<uint64_t>(n_tok * n_rows) * sizeof(float));
        matmul(device, w, x_device, n_tok, y);
        const std::vector<float> got = y.download_floats();
        for (int64_t t = 0; t < n_tok; ++t) {
          for (int64_t r = 0; r < n_rows; ++r) {
            double dot = 0, magnitude = 0;
            for (int64_t c = 0; c < n_cols; ++c) {
              const double p = static_cast<double>(m.decoded[static_cast<size_t>(r * n_cols + c)]) *
                               x[static_cast<size_t>(t * n_cols + c)];
              dot += p;
              magnitude += std::fabs(p);
            }
            const double error =
                std::fabs(got[static_cast<size_t>(t * n_rows + r)] - dot) / magnitude;
            worst = std::max(worst, error);
          }
        }
      }
      std::printf("matmul %-4s n_cols %4lld: worst error / sum|w x| = %.2e (bound %.1e)\n",
                  std::string(ggml_type_name(type)).c_str(), static_cast<long long>(n_cols), worst,
                  matmul_tolerance(type));
      EXPECT_LE(worst, matmul_tolerance(type)) << ggml_type_name(type) << " n_cols " << n_cols;
    }
  }
}

// Token t of a 37-token call (every slot of the 4-token tiles, a partial
// last tile) has the bits of the same row run alone.
TEST(VulkanMatmul, IsBatchInvariant) {
  REQUIRE_VULKAN_DEVICE(device);
  const int64_t n_rows = 67;
  const int64_t n_cols = 4096;
  const int64_t n_tok = 37;
  const std::vector<float> x = normal_values(21, static_cast<size_t>(n_tok * n_cols));
  const VulkanBuffer x_all = device_floats(device, x);
  std::vector<VulkanBuffer> x_rows;
  for (int64_t t = 0; t < n_tok; ++t) {
    x_rows.push_back(device_floats(device, std::span(x).subspan(static_cast<size_t>(t * n_cols),
                                                                static_cast<size_t>(n_cols))));
  }
  for (const GgmlType type : kTypes) {
    const TestMatrix m = random_matrix(type, n_rows, n_cols, 5);
    const VulkanMatrix w(device, type, n_rows, n_cols, m.bytes);
    VulkanBuffer y_all(device, static_cast<uint64_t>(n_tok * n_rows) * sizeof(float));
    std::vector<VulkanBuffer> y_rows;
    // One batch: the whole call and every single-token call.
    CommandBatch batch(device);
    matmul(batch, w, x_all, n_tok, y_all);
    for (int64_t t = 0; t < n_tok; ++t) {
      y_rows.emplace_back(device, static_cast<uint64_t>(n_rows) * sizeof(float));
      matmul(batch, w, x_rows[static_cast<size_t>(t)], 1, y_rows.back());
    }
    batch.submit_and_wait();
    const std::vector<float> all = y_all.download_floats();
    for (int64_t t = 0; t < n_tok; ++t) {
      const std::vector<float> alone = y_rows[static_cast<size_t>(t)].download_floats();
      EXPECT_TRUE(bitwise_equal(
          std::span(all).subspan(static_cast<size_t>(t * n_rows), static_cast<size_t>(n_rows)),
          alone))
          << ggml_type_name(type) << " token " << t;
    }
  }
}

TEST(VulkanRmsNorm, MatchesTheCpuKernel) {
  REQUIRE_VULKAN_DEVICE(device);
  const float eps = 1e-5f;
  double worst = 0;
  for (const int64_t width : {67, 4096}) {
    const int64_t n_rows = 5;
    const std::vector<float> x = normal_values(3, static_cast<size_t>(width * n_rows), 3.0);
    const std::vector<float> weight = normal_values(4, static_cast<size_t>(width));
    const VulkanBuffer x_device = device_floats(device, x);
    const VulkanBuffer w_device = device_floats(device, weight);
    for (const bool weighted : {true, false}) {
      std::vector<float> want(x.size());
      kernels::rms_norm_rows(x,
                             weighted ? std::span<const float>(weight) : std::span<const float>(),
                             eps, want, static_cast<size_t>(width));
      VulkanBuffer out(device, x.size() * sizeof(float));
      rms_norm_rows(device, x_device, weighted ? &w_device : nullptr, eps, out, width, n_rows);
      // In place, as the CPU kernel allows.
      VulkanBuffer in_place = device_floats(device, x);
      rms_norm_rows(device, in_place, weighted ? &w_device : nullptr, eps, in_place, width, n_rows);
      const std::vector<float> got = out.download_floats();
      EXPECT_TRUE(bitwise_equal(got, in_place.download_floats()));
      for (size_t i = 0; i < got.size(); ++i) {
        worst =
            std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) / std::fabs(want[i]));
      }
    }
  }
  std::printf("rms_norm: worst relative error %.2e (bound %.1e)\n", worst, kRmsNormTolerance);
  EXPECT_LE(worst, kRmsNormTolerance);
}

// A chain of dependent ops (norm, matmul, matmul, norm in place, ...) with
// independent ones between them, recorded into one command buffer and
// submitted once, gives the bits of the same ops each submitted alone.
TEST(VulkanCommands, OneSubmitEqualsSeparateSubmits) {
  REQUIRE_VULKAN_DEVICE(device);
  const int64_t width = 256;
  const int64_t n_tok = 3;
  const int steps = 8;
  const TestMatrix m1 = random_matrix(GgmlType::Q4_0, width, width, 1);
  const TestMatrix m2 = random_matrix(GgmlType::Q8_0, width, width, 2);
  const VulkanMatrix w1(device, GgmlType::Q4_0, width, width, m1.bytes);
  const VulkanMatrix w2(device, GgmlType::Q8_0, width, width, m2.bytes);
  const std::vector<float> x = normal_values(9, static_cast<size_t>(width * n_tok));
  const std::vector<float> norm_weight = normal_values(10, static_cast<size_t>(width));
  const VulkanBuffer weight = device_floats(device, norm_weight);
  const uint64_t bytes = static_cast<uint64_t>(width * n_tok) * sizeof(float);

  // Runs the chain, each op through run_norm / run_matmul (recording into a
  // batch, or submitting alone); finish() runs before the results are read.
  const auto chain = [&](auto&& run_norm, auto&& run_matmul, auto&& finish) {
    VulkanBuffer a = device_floats(device, x);
    VulkanBuffer b(device, bytes), c(device, bytes), side(device, bytes);
    for (int s = 0; s < steps; ++s) {
      run_norm(a, b);           // b = norm(a)
      run_matmul(w1, b, c);     // c = W1 b
      run_matmul(w2, b, side);  // independent of the line above
      run_matmul(w2, c, a);     // a = W2 c: a was read by the norm
      run_norm(a, a);           // in place
    }
    finish();
    std::vector<float> out = a.download_floats();
    const std::vector<float> extra = side.download_floats();
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  };

  const auto started = std::chrono::steady_clock::now();
  CommandBatch batch(device);
  const std::vector<float> together =
      chain([&](const VulkanBuffer& in,
                VulkanBuffer& out) { rms_norm_rows(batch, in, &weight, 1e-6f, out, width, n_tok); },
            [&](const VulkanMatrix& w, const VulkanBuffer& in, VulkanBuffer& out) {
              matmul(batch, w, in, n_tok, out);
            },
            [&] { batch.submit_and_wait(); });
  const auto batched_done = std::chrono::steady_clock::now();
  const std::vector<float> apart = chain(
      [&](const VulkanBuffer& in, VulkanBuffer& out) {
        rms_norm_rows(device, in, &weight, 1e-6f, out, width, n_tok);
      },
      [&](const VulkanMatrix& w, const VulkanBuffer& in, VulkanBuffer& out) {
        matmul(device, w, in, n_tok, out);
      },
      [] {});
  const auto apart_done = std::chrono::steady_clock::now();
  EXPECT_TRUE(bitwise_equal(together, apart));
  EXPECT_EQ(batch.recorded(), static_cast<uint32_t>(5 * steps));
  // The independent matmul shares a barrier with its neighbour: four
  // barriers a step, less the first op's.
  EXPECT_EQ(batch.barriers(), static_cast<uint32_t>(4 * steps - 1));
  const auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("%d ops: one submit %.1f ms, a submit each %.1f ms\n", 5 * steps,
              ms(batched_done - started), ms(apart_done - batched_done));
  EXPECT_THROW(batch.submit_and_wait(), Error);  // once only
}

// The staging path (a discrete GPU's) computes the same as the mapped one.
TEST(VulkanMatmul, StagedBuffersGiveTheSameResult) {
  REQUIRE_VULKAN_DEVICE(device);
  const int64_t n_rows = 67, n_cols = 256, n_tok = 5;
  const TestMatrix m = random_matrix(GgmlType::Q5_1, n_rows, n_cols, 8);
  const std::vector<float> x = normal_values(6, static_cast<size_t>(n_tok * n_cols));
  std::vector<std::vector<float>> results;
  for (const HostAccess access : {HostAccess::mapped_when_possible, HostAccess::staging_only}) {
    const VulkanMatrix w(device, GgmlType::Q5_1, n_rows, n_cols, m.bytes, access);
    const VulkanBuffer x_device = device_floats(device, x, access);
    VulkanBuffer y(device, static_cast<uint64_t>(n_tok * n_rows) * sizeof(float),
                   MemoryKind::device_local, access);
    matmul(device, w, x_device, n_tok, y);
    results.push_back(y.download_floats());
  }
  EXPECT_TRUE(bitwise_equal(results[0], results[1]));
}

}  // namespace
}  // namespace cortiq::vulkan

#else  // !CORTIQ_HAVE_VULKAN

TEST(VulkanBackend, NotBuilt) {
  GTEST_SKIP() << "built without the Vulkan backend";
}

#endif
