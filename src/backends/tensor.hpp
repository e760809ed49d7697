// Activations as the op layer (backends/backend.hpp) sees them: a run of
// floats that lives either in host memory or in a device's memory.
//
// A host tensor is a span, and any span converts to one, so host code keeps
// reading its buffers directly. A device tensor is a region of a buffer the
// backend made (an opaque id and an offset); only that backend's ops read it,
// and host() refuses it instead of handing out memory the CPU cannot read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace cortiq {

// Where a device tensor lives: which of its backend's buffers, and from
// which float on. The id means something only to the backend that gave it.
struct DeviceRegion {
  uint32_t buffer = 0;
  uint64_t offset = 0;  // in floats
};

[[noreturn]] void throw_device_tensor_on_host();

template <typename T>
class TensorView;
template <typename T>
constexpr bool is_tensor_view = false;
template <typename T>
constexpr bool is_tensor_view<TensorView<T>> = true;

// T is float (a tensor an op writes) or const float (one it only reads).
template <typename T>
class TensorView {
 public:
  TensorView() = default;
  // Host memory. Implicit: a span (or anything that is one: a vector, a
  // span of floats read as const) is a host tensor.
  template <typename R>
  requires(!is_tensor_view<std::remove_cvref_t<R>> && std::is_convertible_v<R&&, std::span<T>>)
      TensorView(R&& host) {  // NOLINT
    const std::span<T> s(host);
    host_ = s.data();
    size_ = s.size();
  }
  // A writable tensor reads as a read-only one.
  template <typename U>
  requires(std::is_const_v<T>&& std::is_same_v<std::remove_const_t<T>, U>)
      TensorView(const TensorView<U>& other)  // NOLINT
      : host_(other.host_), region_(other.region_), size_(other.size_) {}

  static TensorView on_device(DeviceRegion region, size_t size) {
    TensorView t;
    t.region_ = region;
    t.size_ = size;
    return t;
  }

  bool on_host() const { return host_ != nullptr || size_ == 0; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The floats, for host code. Throws cortiq::Error for a device tensor.
  std::span<T> host() const {
    if (!on_host()) throw_device_tensor_on_host();
    return {host_, size_};
  }
  // Host code reads a tensor as a span: the blocks that run no ops (and so
  // decline every device at load) keep their host loops. A device tensor
  // that reaches one throws, as host() does.
  operator std::span<T>() const { return host(); }  // NOLINT
  operator std::span<const float>() const           // NOLINT
      requires(!std::is_const_v<T>) {
    return host();
  }
  // The device region (meaningful only when !on_host()).
  DeviceRegion region() const { return region_; }

  TensorView subspan(size_t offset, size_t count) const {
    TensorView t = *this;
    if (host_ != nullptr) t.host_ += offset;
    t.region_.offset += offset;
    t.size_ = count;
    return t;
  }
  // From offset to the end, as std::span::subspan(offset).
  TensorView subspan(size_t offset) const { return subspan(offset, size_ - offset); }
  TensorView first(size_t count) const { return subspan(0, count); }

 private:
  template <typename U>
  friend class TensorView;

  T* host_ = nullptr;
  DeviceRegion region_ = {};
  size_t size_ = 0;
};

using Tensor = TensorView<float>;
using ConstTensor = TensorView<const float>;

}  // namespace cortiq
