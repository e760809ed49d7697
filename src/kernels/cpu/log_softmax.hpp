// Log-softmax of one row of logits in double precision: the reduction that
// perplexity, KL divergence, calibration and explain are built on.
//
// log p_i = l_i - max - log(sum_j exp(l_j - max)), each exp and the sum in
// double, the terms added in index order (one fixed order: the same row
// always gives the same bits). The logits are used as the model produced
// them: any logit scale or final softcap is already in them and is not
// applied again.
#pragma once

#include <cstdint>
#include <span>

namespace cortiq::kernels {

struct LogSoftmax {
  float max = 0.0f;          // the largest logit
  int32_t argmax = 0;        // its lowest index
  double log_sum_exp = 0.0;  // log(sum exp(l - max))

  double log_prob(float logit) const { return static_cast<double>(logit) - max - log_sum_exp; }
  double log_prob(std::span<const float> row, int32_t id) const {
    return log_prob(row[static_cast<size_t>(id)]);
  }
};

// An empty row, a NaN or +inf logit, or a row of -inf only throws
// cortiq::Error (-inf entries are fine: probability 0).
LogSoftmax log_softmax(std::span<const float> logits);

}  // namespace cortiq::kernels
