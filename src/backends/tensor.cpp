#include "backends/tensor.hpp"

#include "base/error.hpp"

namespace cortiq {

void throw_device_tensor_on_host() {
  throw Error(
      "a block that runs on the host only (its math is not on the backend's ops yet) was handed "
      "a tensor in device memory");
}

}  // namespace cortiq
