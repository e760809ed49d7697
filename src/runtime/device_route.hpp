// Where a model's sessions run their passes when it is not the CPU: a device
// backend (backends/backend.hpp) the model owns, opened at load.
//
// The device may run the last layers only (-ngl N: layers [n_layer - N,
// n_layer) and the output head), the layers before them on the CPU; a pass
// then hands its rows across as hidden states (model/forward_buffers.hpp's
// BackendSplit) and the KV cache keeps each side's layers on its side.
//
// Opening one runs a probe first: one token through the family as it will
// run (on the device, or split), and the same on the CPU. A family whose pass reaches an op the
// device does not run, or whose logits disagree with the CPU's, declines
// there, before any session's state exists, and runs on the CPU (the
// warning names the reason). Passes from several sessions take turns on
// the device (the backend records one pass at a time).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "kv/kv_row_storage.hpp"

namespace cortiq {

class DecoderModel;
struct ForwardBuffers;
struct ForwardContext;

// What runs a forward pass, given the context to run it with.
using PassFn = std::function<void(ForwardContext&)>;

// Every layer on the device (-ngl's default, and any count >= n_layer).
inline constexpr int64_t kAllLayers = -1;

class DeviceRoute {
 public:
  virtual ~DeviceRoute() = default;

  // For `device` ("cpu", "vulkan", "auto") with the last `gpu_layers` of
  // the model's layers on it (kAllLayers: all): null for the CPU (asked
  // for, gpu_layers 0, "auto" without a device that runs the model, or a
  // decline). Throws cortiq::Error for an unknown name or a negative count
  // other than kAllLayers, and for "vulkan" in a build without the backend
  // or on a machine without a device.
  static std::unique_ptr<DeviceRoute> open(std::string_view device, int64_t gpu_layers,
                                           const DecoderModel& model, ThreadPool& pool);

  // "vulkan 0: llvmpipe (LLVM 15.0.6, 256 bits), ..." (what logs name).
  const std::string& description() const { return description_; }
  // The first layer on the device (0: all of them); the head is on it too.
  int64_t first_device_layer() const { return first_device_layer_; }
  // Where a KV cache for the route's passes keeps its rows: the CPU's
  // layers in host memory, the device's (f32) on the device.
  std::vector<KvRowsPart> kv_parts() const;

  // Runs fn with a context whose ops go to the device (after the CPU's
  // layers, on `buffers`, when the route is split), with the device to
  // itself.
  void pass(ForwardBuffers& buffers, const PassFn& fn) const;
  // The passes started on the route so far (what tests and logs count).
  uint64_t passes() const { return passes_; }

 protected:
  DeviceRoute(std::string description, int64_t first_device_layer, ThreadPool& pool)
      : description_(std::move(description)),
        first_device_layer_(first_device_layer),
        pool_(pool) {}
  virtual Backend& backend() const = 0;
  virtual KvRowStorage::Factory device_rows() const = 0;

 private:
  std::string description_;
  int64_t first_device_layer_ = 0;
  ThreadPool& pool_;
  mutable std::mutex mutex_;
  mutable uint64_t passes_ = 0;  // under mutex_
};

}  // namespace cortiq
