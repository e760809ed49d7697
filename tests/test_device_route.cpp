// --device (runtime/device_route.hpp): a model loaded for a device runs its
// sessions' passes there, KV cache included, and a family the device cannot
// run declines at load and runs on the CPU. Generation on the device gives
// the CPU's tokens (greedy, F32 weights) and keeps a conversation's cache
// across turns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "model/family.hpp"
#include "runtime/device_route.hpp"
#include "test_support.hpp"

#if CORTIQ_HAVE_VULKAN
#include "backends/vulkan/vulkan_device.hpp"
#endif

namespace cortiq {
namespace {

std::shared_ptr<const Model> load_on(const test::TestModelSpec& spec, const std::string& device,
                                     int64_t gpu_layers = kAllLayers) {
  LoadOptions options;
  options.threads = 2;
  options.kv_type = KvType::f32;
  options.device = device;
  options.gpu_layers = gpu_layers;
  return Model::load(test::test_model_path(spec), options);
}

using test::greedy;

bool have_vulkan_device() {
#if CORTIQ_HAVE_VULKAN
  return !vulkan::list_vulkan_devices().empty();
#else
  return false;
#endif
}

TEST(DeviceRoute, TheCpuIsNoRouteAndAnUnknownDeviceIsRefused) {
  const auto model = load_on({.arch = "llama"}, "cpu");
  EXPECT_EQ(model->device_route(), nullptr);
  try {
    load_on({.arch = "llama"}, "gpu");
    FAIL() << "an unknown device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu, vulkan or auto"), std::string::npos) << e.what();
  }
  if (!have_vulkan_device()) {
    // Asked for by name, a missing device (or backend) is an error; auto is the CPU.
    EXPECT_THROW(load_on({.arch = "llama"}, "vulkan"), Error);
    EXPECT_EQ(load_on({.arch = "llama"}, "auto")->device_route(), nullptr);
  }
}

TEST(DeviceRoute, ALlamaSessionOnTheDeviceGeneratesTheCpusTokens) {
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  const test::TestModelSpec spec{.arch = "llama", .n_layer = 3};
  const auto cpu_model = load_on(spec, "cpu");
  const auto device_model = load_on(spec, "vulkan");
  ASSERT_NE(device_model->device_route(), nullptr);
  EXPECT_NE(device_model->device_route()->description().find("vulkan 0"), std::string::npos);
  Session cpu(cpu_model), device(device_model);
  const std::vector<TokenId> turn1 = test::prompt_of(11, 3), turn2 = test::prompt_of(5, 4);
  for (const auto& turn : {turn1, turn2}) {
    const auto expected = cpu.generate(std::span<const TokenId>(turn), greedy(10));
    const auto got = device.generate(std::span<const TokenId>(turn), greedy(10));
    EXPECT_EQ(got.tokens, expected.tokens);
    EXPECT_EQ(got.cached_tokens, expected.cached_tokens);
  }
  // "auto" takes the device too.
  EXPECT_NE(load_on(spec, "auto")->device_route(), nullptr);
}

// -ngl N: the last N layers and the head on the device, the others on the
// CPU, their rows on the host; at every N the CPU's tokens, over two turns
// that reuse the cache. -ngl 0 is the CPU; a negative count other than -1
// is refused.
TEST(DeviceRoute, EverySplitOfALlamaBetweenTheCpuAndTheDeviceGeneratesTheCpusTokens) {
  constexpr int64_t kLayers = 3;
  const test::TestModelSpec spec{.arch = "llama", .n_layer = kLayers};
  EXPECT_EQ(load_on(spec, "vulkan", 0)->device_route(), nullptr);
  try {
    load_on(spec, "vulkan", -2);
    FAIL() << "-ngl -2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-ngl must be a layer count"), std::string::npos)
        << e.what();
  }
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  const auto cpu_model = load_on(spec, "cpu");
  const std::vector<TokenId> turn1 = test::prompt_of(11, 3), turn2 = test::prompt_of(5, 4);
  for (int64_t ngl = 1; ngl <= kLayers + 1; ++ngl) {
    SCOPED_TRACE("-ngl " + std::to_string(ngl));
    const auto device_model = load_on(spec, "vulkan", ngl);
    const DeviceRoute* route = device_model->device_route();
    ASSERT_NE(route, nullptr);
    EXPECT_EQ(route->first_device_layer(), std::max<int64_t>(kLayers - ngl, 0));
    if (ngl < kLayers) {
      const std::string on_device = ngl == 1 ? "layer 2" : "layers 1..2";
      const std::string on_cpu = ngl == 1 ? "layers 0..1" : "layer 0";
      EXPECT_NE(route->description().find(", with " + on_device + " and the output head (" +
                                          on_cpu + " on the CPU)"),
                std::string::npos)
          << route->description();
    }
    Session cpu(cpu_model), device(device_model);
    for (const auto& turn : {turn1, turn2}) {
      const auto expected = cpu.generate(std::span<const TokenId>(turn), greedy(10));
      const auto got = device.generate(std::span<const TokenId>(turn), greedy(10));
      EXPECT_EQ(got.tokens, expected.tokens);
      EXPECT_EQ(got.cached_tokens, expected.cached_tokens);
    }
  }
}

TEST(DeviceRoute, AFamilyTheDeviceCannotRunDeclinesAtLoadAndRunsOnTheCpu) {
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  // Mamba's state-space mixer is host code: the probe meets a device
  // tensor there, and the family stays on the CPU.
  const test::TestModelSpec spec{.arch = "mamba"};
  const auto model = load_on(spec, "vulkan");
  EXPECT_EQ(model->device_route(), nullptr);
  Session on_cpu(load_on(spec, "cpu")), declined(model);
  const std::vector<TokenId> prompt = test::prompt_of(6, 5);
  EXPECT_EQ(declined.generate(std::span<const TokenId>(prompt), greedy(6)).tokens,
            on_cpu.generate(std::span<const TokenId>(prompt), greedy(6)).tokens);
}

// The command line: `cortiq run --device vulkan` prints the CPU's greedy
// text; a name it does not know is a usage error that lists the choices.
TEST(DeviceRoute, RunTakesTheDeviceOption) {
  // The log goes to the output run_cli returns: only warnings, so that the
  // texts compare.
  struct QuietLog {
    QuietLog() { ::setenv("CORTIQ_LOG", "warn", 1); }
    ~QuietLog() { ::unsetenv("CORTIQ_LOG"); }
  } const quiet;
  const std::string run = "run -m " + test::test_model_path({.arch = "llama"}).string() +
                          " -p 'Hello there' -n 8 --temp 0 --ignore-eos --kv-type f32";
  std::string cpu_out, device_out, bad;
  ASSERT_EQ(test::run_cli(run + " --device cpu", &cpu_out), 0) << cpu_out;
  EXPECT_NE(test::run_cli(run + " --device tpu", &bad), 0);
  EXPECT_NE(bad.find("cpu, vulkan or auto"), std::string::npos) << bad;
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  ASSERT_EQ(test::run_cli(run + " --device vulkan", &device_out), 0) << device_out;
  EXPECT_EQ(device_out, cpu_out);
  ASSERT_EQ(test::run_cli(run + " --device vulkan -ngl 1", &device_out), 0) << device_out;
  EXPECT_EQ(device_out, cpu_out);
}

}  // namespace
}  // namespace cortiq
