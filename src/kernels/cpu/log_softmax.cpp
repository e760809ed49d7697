#include "kernels/cpu/log_softmax.hpp"

#include <cmath>

#include "base/error.hpp"

namespace cortiq::kernels {

LogSoftmax log_softmax(std::span<const float> logits) {
  if (logits.empty()) throw Error("log_softmax: empty row of logits");
  LogSoftmax r;
  r.max = logits[0];
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == INFINITY) {
      throw Error("log_softmax: logit " + std::to_string(i) + " is not finite");
    }
    if (logits[i] > r.max) {
      r.max = logits[i];
      r.argmax = static_cast<int32_t>(i);
    }
  }
  if (r.max == -INFINITY) throw Error("log_softmax: every logit is -inf");
  const double max = r.max;
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - max);
  r.log_sum_exp = std::log(sum);
  return r;
}

}  // namespace cortiq::kernels
