#include "runtime/device_route.hpp"

#include <array>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"

#if CORTIQ_HAVE_VULKAN
#include "backends/vulkan/vulkan_backend.hpp"
#include "backends/vulkan/vulkan_device.hpp"
#endif

namespace cortiq {

namespace {

// The probe's tolerance: logits further than this (relative L2) from the
// CPU's mean the device computes something else; the families that run
// measure ~5e-7 with F32 weights and ~6e-3 with quantized ones.
constexpr double kProbeTolerance = 5e-2;

// Logits of one token at position 0, its cache's rows in `parts`, through
// the passes `run` makes.
std::vector<float> probe_logits(const DecoderModel& model, std::span<const KvRowsPart> parts,
                                const std::function<void(ForwardBuffers&, const PassFn&)>& run) {
  const KvCacheShape shape = model.kv_cache_shape(16, 1, KvType::f32);
  KvCache cache(shape, parts);
  ForwardBuffers buffers;
  const BatchRow row{1, 0, 0, true};
  const auto& hp = model.hparams();
  std::vector<float> out(static_cast<size_t>(hp.encoder ? hp.n_embd : hp.n_vocab));
  run(buffers, [&](ForwardContext& ctx) {
    if (hp.encoder) ctx.output = RowOutput::hidden;
    model.forward(std::span(&row, 1), cache, ctx, out);
  });
  return out;
}

double relative_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

#if CORTIQ_HAVE_VULKAN
class VulkanRoute final : public DeviceRoute {
 public:
  VulkanRoute(std::unique_ptr<vulkan::VulkanDevice> device, std::string placement,
              int64_t first_device_layer, ThreadPool& pool)
      : DeviceRoute("vulkan 0: " + vulkan::describe(device->info()) + placement, first_device_layer,
                    pool),
        device_(std::move(device)),
        backend_(std::make_unique<vulkan::VulkanBackend>(*device_, pool)) {}

 protected:
  Backend& backend() const override { return *backend_; }
  KvRowStorage::Factory device_rows() const override { return backend_->kv_rows(); }

 private:
  std::unique_ptr<vulkan::VulkanDevice> device_;
  std::unique_ptr<vulkan::VulkanBackend> backend_;  // destroyed before the device
};
#endif

// Whether the family runs on the route: the probe on both, compared.
// Returns the reason it does not, or "".
std::string probe(const DeviceRoute& route, const DecoderModel& model, ThreadPool& pool) {
  try {
    const std::array host_rows{KvRowsPart{0, HostKvRows::make}};
    const std::vector<float> expected =
        probe_logits(model, host_rows, [&](ForwardBuffers& buffers, const PassFn& fn) {
          CpuBackend cpu(pool, buffers.cpu);
          ForwardContext ctx{cpu, buffers};
          fn(ctx);
        });
    const std::vector<float> got =
        probe_logits(model, route.kv_parts(),
                     [&](ForwardBuffers& buffers, const PassFn& fn) { route.pass(buffers, fn); });
    const double err = relative_l2(got, expected);
    if (!(err <= kProbeTolerance)) {
      return strfmt("its logits differ from the CPU's (relative L2 %.2g)", err);
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// The first layer on the device for -ngl `gpu_layers`: the last ones count.
int64_t first_layer_for(int64_t gpu_layers, int64_t n_layer) {
  if (gpu_layers < 0 && gpu_layers != kAllLayers) {
    throw Error(strfmt("-ngl must be a layer count (or -1 for all), got %lld",
                       static_cast<long long>(gpu_layers)));
  }
  if (gpu_layers == kAllLayers || gpu_layers >= n_layer) return 0;
  return n_layer - gpu_layers;
}

// "layer 3" or "layers 3..5".
std::string layer_span(int64_t first, int64_t last) {
  if (first == last) return strfmt("layer %lld", static_cast<long long>(first));
  return strfmt("layers %lld..%lld", static_cast<long long>(first), static_cast<long long>(last));
}

// What the description adds for a split: which layers the device runs.
std::string placement(int64_t first, int64_t n_layer) {
  if (first == 0) return "";
  return ", with " + layer_span(first, n_layer - 1) + " and the output head (" +
         layer_span(0, first - 1) + " on the CPU)";
}

}  // namespace

std::vector<KvRowsPart> DeviceRoute::kv_parts() const {
  if (first_device_layer_ == 0) return {{0, device_rows()}};
  return {{0, HostKvRows::make}, {first_device_layer_, device_rows()}};
}

void DeviceRoute::pass(ForwardBuffers& buffers, const PassFn& fn) const {
  const std::lock_guard lock(mutex_);
  ++passes_;
  try {
    if (first_device_layer_ == 0) {
      ForwardContext ctx{backend(), buffers};
      return fn(ctx);
    }
    CpuBackend cpu(pool_, buffers.cpu);
    ForwardContext ctx{cpu, buffers};
    ctx.split = {.backend = &backend(), .layer = first_device_layer_};
    fn(ctx);
  } catch (...) {
    // The pass ends with its error (the cache rolled its rows back); what
    // it left recorded on the device must not run with the next one.
    backend().abandon_pass();
    throw;
  }
}

std::unique_ptr<DeviceRoute> DeviceRoute::open(std::string_view device, int64_t gpu_layers,
                                               const DecoderModel& model, ThreadPool& pool) {
  if (device == "cpu") return nullptr;
  if (device != "vulkan" && device != "auto") {
    throw Error("--device must be cpu, vulkan or auto, got " + std::string(device));
  }
  const int64_t n_layer = model.hparams().n_layer;
  const int64_t first = first_layer_for(gpu_layers, n_layer);
  if (gpu_layers == 0) {
    LOG_INFO("-ngl 0: every layer runs on the CPU");
    return nullptr;
  }
  const bool required = device == "vulkan";
#if CORTIQ_HAVE_VULKAN
  if (vulkan::list_vulkan_devices().empty()) {
    if (required) throw Error("--device vulkan: no Vulkan device found");
    return nullptr;
  }
  std::unique_ptr<DeviceRoute> route;
  try {
    route = std::make_unique<VulkanRoute>(std::make_unique<vulkan::VulkanDevice>(0),
                                          placement(first, n_layer), first, pool);
  } catch (const Error& e) {
    // A device that is there but cannot be opened declines as a probe would.
    LOG_WARN("vulkan 0 cannot be opened, %s runs on the CPU: %s", model.hparams().arch.c_str(),
             e.what());
    return nullptr;
  }
  if (const std::string reason = probe(*route, model, pool); !reason.empty()) {
    LOG_WARN("%s declines %s, which runs on the CPU: %s", route->description().c_str(),
             model.hparams().arch.c_str(), reason.c_str());
    return nullptr;
  }
  LOG_INFO("running on %s", route->description().c_str());
  return route;
#else
  (void)first;
  (void)pool;
  if (required) throw Error("--device vulkan: this build has no Vulkan backend");
  return nullptr;
#endif
}

}  // namespace cortiq
