#include "backends/tensor.hpp"

#include "base/error.hpp"

namespace cortiq {

void throw_device_tensor_on_host() {
  throw Error(
      "internal: host code was handed a tensor in device memory (an op this backend does not run "
      "reached the host path)");
}

}  // namespace cortiq
