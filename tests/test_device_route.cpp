// --device (runtime/device_route.hpp): a model loaded for a device runs its
// sessions' passes there, KV cache included, and a family the device cannot
// run declines at load and runs on the CPU. Generation on the device gives
// the CPU's tokens (greedy, F32 weights) and keeps a conversation's cache
// across turns.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "base/log.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/family.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"
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
  // A family the device declines runs on the CPU, and the warning names
  // the block that kept it there.
  const std::string mamba = "run -m " + test::test_model_path({.arch = "mamba"}).string() +
                            " -p 'Hello there' -n 2 --temp 0 --device vulkan";
  std::string declined;
  ASSERT_EQ(test::run_cli(mamba, &declined), 0) << declined;
  EXPECT_NE(declined.find("declines mamba, which runs on the CPU: the vulkan backend has no ops "
                          "for Mamba's selective scan yet (host code only)"),
            std::string::npos)
      << declined;
}

// Device faults (base/fault_injection.hpp's device sites) before any state
// moved: opening the device and its probe meet an allocation that fails,
// a device lost at the probe's submit, or a shader that is not there; the
// model declines and runs on the CPU, giving its tokens.
TEST(DeviceRoute, ADeviceFaultAtLoadDeclinesAndTheModelRunsOnTheCpu) {
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  const test::TestModelSpec spec{.arch = "llama"};
  const std::vector<TokenId> prompt = test::prompt_of(7, 6);
  Session on_cpu(load_on(spec, "cpu"));
  const auto expected = on_cpu.generate(std::span<const TokenId>(prompt), greedy(6)).tokens;
  for (const fault::Site site :
       {fault::Site::device_alloc, fault::Site::device_lost, fault::Site::shader}) {
    SCOPED_TRACE(std::string(fault::site_name(site)));
    fault::arm(site, 1);
    const auto model = load_on(spec, "vulkan");
    const bool struck = !fault::due(site);  // the armed arrival was taken
    fault::disarm();
    EXPECT_TRUE(struck) << "loading never reached the fault";
    EXPECT_EQ(model->device_route(), nullptr);
    Session session(model);
    EXPECT_EQ(session.generate(std::span<const TokenId>(prompt), greedy(6)).tokens, expected);
  }
}

// Device faults after the pass began: an allocation that fails as a longer
// prompt grows the pass's buffers, a device lost at a submit. The request
// ends with the device's error (not a cancellation), the session is left
// empty, and the next requests give the CPU's tokens.
TEST(DeviceRoute, ADeviceFaultMidPassFailsTheRequestAndLeavesTheSessionEmpty) {
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  const test::TestModelSpec spec{.arch = "llama", .n_layer = 3};
  const auto device_model = load_on(spec, "vulkan");
  ASSERT_NE(device_model->device_route(), nullptr);
  Session on_cpu(load_on(spec, "cpu"));
  const std::vector<TokenId> short_prompt = test::prompt_of(4, 8),
                             long_prompt = test::prompt_of(60, 9);
  const auto expected = on_cpu.generate(std::span<const TokenId>(long_prompt), greedy(5)).tokens;
  const struct {
    fault::Site site;
    const char* says;
  } faults[] = {{fault::Site::device_alloc, "VK_ERROR_OUT_OF_DEVICE_MEMORY"},
                {fault::Site::device_lost, "VK_ERROR_DEVICE_LOST"}};
  for (const auto& [site, says] : faults) {
    SCOPED_TRACE(std::string(fault::site_name(site)));
    Session session(device_model);
    session.generate(std::span<const TokenId>(short_prompt), greedy(2));
    session.reset();
    fault::arm(site, 1);
    std::string error;
    try {
      session.generate(std::span<const TokenId>(long_prompt), greedy(5));
    } catch (const Error& e) {
      error = e.what();
    }
    fault::disarm();
    EXPECT_NE(error.find(says), std::string::npos) << "the request ended with: " << error;
    EXPECT_TRUE(session.history().empty());
    EXPECT_EQ(session.cache_rows(), 0);
    EXPECT_EQ(session.generate(std::span<const TokenId>(long_prompt), greedy(5)).tokens, expected);
  }
}

// The families whose every block is on the op layer and that the Vulkan
// backend runs whole (docs/vulkan.md lists them); every other family
// declines at load. A family that starts (or stops) running on the device
// fails the test until this list and the docs say so.
constexpr std::string_view kOnTheDevice[] = {
    "llama", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "mistral3", "seed_oss", "exaone",
    "smollm3", "granite", "minicpm", "olmo2", "exaone4", "starcoder2", "orion", "internlm2",
    "xverse", "baichuan", "pangu-embedded", "plamo", "nanbeige", "codeshell", "phi3", "phi2",
    "command-r", "cohere2", "glm4", "chatglm", "arcee", "nemotron", "jais2", "gpt2", "starcoder",
    "bloom", "jais", "refact", "falcon", "gptneox", "olmo", "qwen", "hunyuan-dense", "maincoder",
    "openelm", "qwen2vl", "qwen3vl", "deci", "ernie4_5", "plamo3", "bitnet", "stablelm", "mpt",
    "apertus", "gemma4", "bert", "nomic-bert",
    // Latent attention (dense, and DeepSeek's experts).
    "minicpm3", "deepseek2", "mistral4",
    // Mixtures of experts.
    "granitemoe", "phimoe", "qwen3vlmoe", "qwen2moe", "qwen3moe", "olmoe", "ernie4_5-moe",
    "hunyuan-moe", "minimax-m2", "smallthinker", "deepseek", "dots1", "gpt-oss", "glm4moe",
    "bailingmoe2", "hy_v3", "arctic", "dbrx", "llama4", "mimo2", "grok", "laguna"};

// Every batch of a 20-row prefill (past the test models' 16-position
// windows) and 3 decode steps through `model`'s passes (on its route, if it
// has one), each batch's logits (an encoder's hidden rows) in turn.
std::vector<std::vector<float>> pass_outputs(const Model& model) {
  const DecoderModel& decoder = model.decoder();
  const ModelHParams& hp = decoder.hparams();
  const std::vector<TokenId> ids = test::prompt_of(23, 9);
  std::vector<std::vector<BatchRow>> batches(1);
  for (int32_t pos = 0; pos < 23; ++pos) {
    if (!hp.encoder && pos >= 20) batches.emplace_back();
    batches.back().push_back({ids[static_cast<size_t>(pos)], pos, 0, true});
  }
  const std::unique_ptr<KvCache> cache =
      model.make_kv_cache(decoder.kv_cache_shape(64, 1, KvType::f32));
  ForwardBuffers buffers;
  std::vector<std::vector<float>> outputs;
  for (const auto& batch : batches) {
    const auto width = static_cast<size_t>(hp.encoder ? hp.n_embd : hp.n_vocab);
    std::vector<float>& out = outputs.emplace_back(batch.size() * width);
    model.run_pass(buffers, [&](ForwardContext& ctx) {
      if (hp.encoder) ctx.output = RowOutput::hidden;
      decoder.forward(batch, *cache, ctx, out);
    });
  }
  return outputs;
}

using test::relative_l2;

// Per family (F32 weights, two layers): on the device when it is on the
// list, the logits within 1e-4 (relative L2) of the CPU's at every batch of
// a prefill and decode; declined otherwise.
TEST(DeviceRoute, TheFamiliesOnTheDeviceMatchTheCpuAndTheOthersDecline) {
  if (!have_vulkan_device()) GTEST_SKIP() << "no Vulkan device (or built without the backend)";
  const struct QuietLog {  // the declines' warnings, one per family
    LogLevel was = log_level();
    QuietLog() { set_log_level(LogLevel::error); }
    ~QuietLog() { set_log_level(was); }
  } quiet;
  double worst = 0;
  std::string worst_family;
  for (const Family* family : families()) {
    const std::string arch(family->arch);
    SCOPED_TRACE(arch);
    const test::TestModelSpec spec{.arch = arch};
    const auto on_device = load_on(spec, "vulkan");
    const bool listed = std::ranges::find(kOnTheDevice, arch) != std::end(kOnTheDevice);
    const bool runs = on_device->device_route() != nullptr;
    EXPECT_EQ(runs, listed) << (listed ? "declined, but kOnTheDevice lists it"
                                       : "runs, but kOnTheDevice lacks it");
    if (!listed || !runs) continue;
    const auto expected = pass_outputs(*load_on(spec, "cpu"));
    const auto got = pass_outputs(*on_device);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t b = 0; b < got.size(); ++b) {
      const double err = relative_l2(got[b], expected[b]);
      EXPECT_LE(err, 1e-4) << "batch " << b;
      if (std::getenv("CORTIQ_TEST_VERBOSE")) std::printf("%s %zu %.2g\n", arch.c_str(), b, err);
      if (err > worst) {
        worst = err;
        worst_family = arch;
      }
    }
  }
  std::printf("[ device ] %zu families on the device; worst relative L2 %.2g (%s)\n",
              std::size(kOnTheDevice), worst, worst_family.c_str());
}

}  // namespace
}  // namespace cortiq
