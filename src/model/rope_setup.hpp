// Turns a model's RoPE hyper-parameters (and its rope_freqs.weight, when the
// file has one) into the kernel's parameters. llama3 scaling is applied as
// per-pair frequency factors: from the tensor when the converter wrote one
// (the usual case), else computed from the rope.scaling.* keys as Hugging
// Face transformers does.
#pragma once

#include <vector>

#include "kernels/cpu/rope.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class WeightBinder;

struct RopeSetup {
  kernels::RopeParams params;       // params.freq_factors points into freq_factors
  std::vector<float> freq_factors;  // n_dims / 2 values, or empty

  RopeSetup() = default;
  RopeSetup(const RopeSetup&) = delete;  // params holds a view of freq_factors
  RopeSetup& operator=(const RopeSetup&) = delete;
};

// Fills `setup` (not copyable: its params view its own factors).
void setup_rope(const ModelHParams& hp, const WeightBinder& binder, RopeSetup& setup);

// llama3's frequency factors (divisors of theta) for n_dims / 2 pairs.
std::vector<float> llama3_freq_factors(const RopeHParams& rope, int64_t n_dims);

}  // namespace cortiq
