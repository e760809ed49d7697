// Where a model's sessions run their passes when it is not the CPU: a device
// backend (backends/backend.hpp) the model owns, opened at load.
//
// Opening one runs a probe first: one token through the family on the
// device, and the same on the CPU. A family whose pass reaches an op the
// device does not run, or whose logits disagree with the CPU's, declines
// there, before any session's state exists, and runs on the CPU (the
// warning names the reason). Passes from several sessions take turns on
// the device (the backend records one pass at a time).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "backends/backend.hpp"
#include "runtime/kv_row_storage.hpp"

namespace cortiq {

class DecoderModel;

class DeviceRoute {
 public:
  virtual ~DeviceRoute() = default;

  // For `device` ("cpu", "vulkan", "auto"): null for the CPU (asked for,
  // or "auto" without a device that runs the model, or a decline). Throws
  // cortiq::Error for an unknown name, and for "vulkan" in a build without
  // the backend or on a machine without a device.
  static std::unique_ptr<DeviceRoute> open(std::string_view device, const DecoderModel& model,
                                           ThreadPool& pool);

  // "vulkan 0: llvmpipe (LLVM 15.0.6, 256 bits), ..." (what logs name).
  const std::string& description() const { return description_; }
  // The KV cache storage its passes read (f32 rows on the device).
  virtual KvRowStorage::Factory kv_rows() const = 0;

  // Runs fn(backend) with the device to itself.
  template <typename Fn>
  decltype(auto) run(Fn&& fn) const {
    const std::lock_guard lock(mutex_);
    return fn(backend());
  }

 protected:
  explicit DeviceRoute(std::string description) : description_(std::move(description)) {}
  virtual Backend& backend() const = 0;

 private:
  std::string description_;
  mutable std::mutex mutex_;
};

}  // namespace cortiq
