#include "model/rope_setup.hpp"

#include <cmath>
#include <numbers>

#include "model/weights.hpp"

namespace cortiq {

std::vector<float> llama3_freq_factors(const RopeHParams& rope, int64_t n_dims) {
  const double factor = rope.scaling_factor;
  const double low = rope.llama3_low_freq_factor;
  const double high = rope.llama3_high_freq_factor;
  const double orig = static_cast<double>(rope.n_ctx_orig);
  const double low_freq_wavelen = orig / low;
  const double high_freq_wavelen = orig / high;
  std::vector<float> factors(static_cast<size_t>(n_dims / 2));
  for (size_t i = 0; i < factors.size(); ++i) {
    const double freq =
        1.0 / std::pow(static_cast<double>(rope.freq_base), 2.0 * static_cast<double>(i) / n_dims);
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_freq_wavelen) {
      f = factor;
    } else if (wavelen >= high_freq_wavelen && high != low) {
      const double smooth = (orig / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    factors[i] = static_cast<float>(f);
  }
  return factors;
}

void setup_rope(const ModelHParams& hp, const WeightBinder& binder, RopeSetup& setup) {
  const RopeHParams& r = hp.rope;
  auto& p = setup.params;
  p.n_dims = static_cast<int32_t>(r.n_dims);
  p.neox = r.neox;
  p.freq_base = r.freq_base;
  p.freq_scale = r.freq_scale;
  p.ext_factor = r.ext_factor;
  p.attn_factor = r.attn_factor;
  p.beta_fast = r.beta_fast;
  p.beta_slow = r.beta_slow;
  p.n_ctx_orig = static_cast<int32_t>(r.n_ctx_orig);
  setup.freq_factors = binder.optional_vector("rope_freqs.weight", r.n_dims / 2);
  if (setup.freq_factors.empty() && r.scaling == RopeScalingType::llama3) {
    setup.freq_factors = llama3_freq_factors(r, r.n_dims);
  }
  p.freq_factors = setup.freq_factors;
}

}  // namespace cortiq
