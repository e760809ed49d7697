#include "runtime/device_route.hpp"

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "model/decoder_model.hpp"
#include "runtime/kv_cache.hpp"

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

// Logits of one token at position 0 through `backend`, its cache's rows in
// `rows` (host rows when null).
std::vector<float> probe_logits(const DecoderModel& model, Backend& backend,
                                const KvRowStorage::Factory* rows) {
  const KvCacheShape shape = model.kv_cache_shape(16, 1, KvType::f32);
  KvCache cache(shape, rows != nullptr ? *rows : KvRowStorage::Factory(HostKvRows::make));
  ForwardBuffers buffers;
  ForwardContext ctx{backend, buffers};
  const BatchRow row{1, 0, 0, true};
  const auto& hp = model.hparams();
  std::vector<float> out(static_cast<size_t>(hp.encoder ? hp.n_embd : hp.n_vocab));
  if (hp.encoder) ctx.output = RowOutput::hidden;
  model.forward(std::span(&row, 1), cache, ctx, out);
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
  VulkanRoute(std::unique_ptr<vulkan::VulkanDevice> device, ThreadPool& pool)
      : DeviceRoute("vulkan 0: " + vulkan::describe(device->info())),
        device_(std::move(device)),
        backend_(std::make_unique<vulkan::VulkanBackend>(*device_, pool)) {}

  KvRowStorage::Factory kv_rows() const override { return backend_->kv_rows(); }

 protected:
  Backend& backend() const override { return *backend_; }

 private:
  std::unique_ptr<vulkan::VulkanDevice> device_;
  std::unique_ptr<vulkan::VulkanBackend> backend_;  // destroyed before the device
};
#endif

// Whether the family runs on the route: the probe on both, compared.
// Returns the reason it does not, or "".
std::string probe(const DeviceRoute& route, const DecoderModel& model, ThreadPool& pool) {
  try {
    ForwardBuffers cpu_buffers;
    CpuBackend cpu(pool, cpu_buffers);
    const std::vector<float> expected = probe_logits(model, cpu, nullptr);
    const KvRowStorage::Factory rows = route.kv_rows();
    const std::vector<float> got =
        route.run([&](Backend& backend) { return probe_logits(model, backend, &rows); });
    const double err = relative_l2(got, expected);
    if (!(err <= kProbeTolerance)) {
      return strfmt("its logits differ from the CPU's (relative L2 %.2g)", err);
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

std::unique_ptr<DeviceRoute> DeviceRoute::open(std::string_view device, const DecoderModel& model,
                                               ThreadPool& pool) {
  if (device == "cpu") return nullptr;
  if (device != "vulkan" && device != "auto") {
    throw Error("--device must be cpu, vulkan or auto, got " + std::string(device));
  }
  const bool required = device == "vulkan";
#if CORTIQ_HAVE_VULKAN
  if (vulkan::list_vulkan_devices().empty()) {
    if (required) throw Error("--device vulkan: no Vulkan device found");
    return nullptr;
  }
  std::unique_ptr<DeviceRoute> route =
      std::make_unique<VulkanRoute>(std::make_unique<vulkan::VulkanDevice>(0), pool);
  if (const std::string reason = probe(*route, model, pool); !reason.empty()) {
    LOG_WARN("%s declines %s, which runs on the CPU: %s", route->description().c_str(),
             model.hparams().arch.c_str(), reason.c_str());
    return nullptr;
  }
  LOG_INFO("running on %s", route->description().c_str());
  return route;
#else
  (void)model;
  (void)pool;
  if (required) throw Error("--device vulkan: this build has no Vulkan backend");
  return nullptr;
#endif
}

}  // namespace cortiq
