#include "model/rope_setup.hpp"

#include <cmath>
#include <numbers>

#include "model/tensor_table.hpp"

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

namespace {

kernels::RopeParams kernel_params(const RopeHParams& r) {
  kernels::RopeParams p;
  p.n_dims = static_cast<int32_t>(r.n_dims);
  p.neox = r.neox;
  p.freq_base = r.freq_base;
  p.freq_scale = r.freq_scale;
  p.ext_factor = r.ext_factor;
  p.attn_factor = r.attn_factor;
  p.beta_fast = r.beta_fast;
  p.beta_slow = r.beta_slow;
  p.n_ctx_orig = static_cast<int32_t>(r.n_ctx_orig);
  if (r.mrope_sections != std::array<int32_t, 4>{}) {
    p.mrope = r.mrope_interleaved ? kernels::MRope::interleaved : kernels::MRope::sections;
    p.mrope_sections = r.mrope_sections;
  }
  return p;
}

}  // namespace

void RopeTables::visit(TensorVisitor& v, const ModelHParams& hp, bool required, bool local_too) {
  local_factors_ = local_too;
  auto& global = slots_[static_cast<size_t>(RopeSlot::global)];
  v.vector(global.factors, "rope_freqs.weight", hp.rope.n_dims / 2, TensorKind::norm, required);
}

void RopeTables::visit_longrope(TensorVisitor& v, const ModelHParams& hp, int64_t n_factors) {
  longrope_ = true;
  if (n_factors == 0) n_factors = hp.rope.n_dims / 2;
  v.vector(long_factors_, "rope_factors_long.weight", n_factors, TensorKind::norm,
           /*required=*/false);
  v.vector(short_factors_, "rope_factors_short.weight", n_factors, TensorKind::norm,
           /*required=*/false);
}

void RopeTables::setup(const ModelHParams& hp) {
  for (const LayerSpec& layer : hp.layers) {
    if (layer.rope != RopeSlot::none) slots_[static_cast<size_t>(layer.rope)].used = true;
  }
  auto& global = slots_[static_cast<size_t>(RopeSlot::global)];
  global.params = kernel_params(hp.rope);
  if (longrope_) {
    // llama.cpp compares its context per sequence with n_ctx_orig_yarn; an
    // unknown context (0) is the trained one, as llama.cpp's default.
    const int64_t n_ctx = hp.n_ctx_seq > 0 ? hp.n_ctx_seq : hp.n_ctx_train;
    global.factors = n_ctx > hp.rope.n_ctx_orig ? long_factors_ : short_factors_;
  }
  if (global.factors.empty() && hp.rope.scaling == RopeScalingType::llama3) {
    global.factors = llama3_freq_factors(hp.rope, hp.rope.n_dims);
  }
  global.params.freq_factors = global.factors;
  auto& local = slots_[static_cast<size_t>(RopeSlot::local)];
  local.params = kernel_params(hp.rope_local);
  if (local_factors_) local.params.freq_factors = global.factors;
}

std::array<RopeTable, kRopeSlots> RopeTables::for_rows(std::span<const BatchRow> rows,
                                                       ForwardBuffers& buf) const {
  std::array<RopeTable, kRopeSlots> tables{};
  for (size_t slot = 0; slot < slots_.size(); ++slot) {
    const Slot& s = slots_[slot];
    if (!s.used) continue;
    const auto dims = static_cast<size_t>(s.params.n_dims);
    auto cache = ForwardBuffers::take(buf.rope[slot], rows.size() * dims);
    for (size_t r = 0; r < rows.size(); ++r) {
      kernels::rope_cache(rows[r].pos, s.params, cache.subspan(r * dims, dims));
    }
    tables[slot] = {&s.params, cache};
  }
  return tables;
}

}  // namespace cortiq
