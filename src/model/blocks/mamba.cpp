#include "model/blocks/mamba.hpp"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/causal_conv_rows.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void MambaWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer, bool bcdt_norms) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const auto& s = hp.ssm;
  v.matrix(in_proj, name("ssm_in.weight"), hp.n_embd, 2 * s.d_inner);
  v.table(conv, name("ssm_conv1d.weight"), s.conv_taps, s.d_inner, TensorKind::conv);
  v.vector(conv_bias, name("ssm_conv1d.bias"), s.d_inner, TensorKind::bias);
  v.matrix(x_proj, name("ssm_x.weight"), s.d_inner, s.dt_rank + 2 * s.d_state);
  if (bcdt_norms) v.vector(dt_norm, name("ssm_dt_norm.weight"), s.dt_rank, TensorKind::norm);
  v.matrix(dt_proj, name("ssm_dt.weight"), s.dt_rank, s.d_inner);
  v.vector(dt_bias, name("ssm_dt.bias"), s.d_inner, TensorKind::bias);
  if (bcdt_norms) {
    v.vector(b_norm, name("ssm_b_norm.weight"), s.d_state, TensorKind::norm);
    v.vector(c_norm, name("ssm_c_norm.weight"), s.d_state, TensorKind::norm);
  }
  // No ".weight" after these two (llama.cpp's names).
  v.table(a, name("ssm_a"), s.d_state, s.d_inner, TensorKind::decay);
  v.vector(d, name("ssm_d"), s.d_inner, TensorKind::bias);
  v.matrix(out_proj, name("ssm_out.weight"), s.d_inner, hp.n_embd);
  v.scale(in_scale, name("ssm_in.scale"));
  v.scale(out_scale, name("ssm_out.scale"));
  v.scale_without_effect(name("ssm_in.input_scale"));
  v.scale_without_effect(name("ssm_out.input_scale"));
}

void read_mamba_hparams(const HParamReader& keys, ModelHParams& hp) {
  auto& s = hp.ssm;
  s.conv_taps = keys.required_uint("ssm.conv_kernel");
  s.d_inner = keys.required_uint("ssm.inner_size");
  s.d_state = keys.required_uint("ssm.state_size");
  s.dt_rank = keys.required_uint("ssm.time_step_rank");
  s.dt_b_c_rms = keys.bool_or("ssm.dt_b_c_rms", false);
  if (s.conv_taps < 2 || s.d_state <= 0 || s.dt_rank <= 0) {
    keys.invalid("every ssm size must be positive (ssm.conv_kernel at least 2)");
  }
  if (s.conv_taps > 1024 || s.d_state > 4096 || s.dt_rank > (int64_t{1} << 16)) {
    keys.invalid("ssm.conv_kernel, state_size or time_step_rank is out of range");
  }
  // llama.cpp's loader: "only an expansion factor of 2 is supported for now".
  if (s.d_inner != 2 * hp.n_embd) keys.invalid("ssm.inner_size must be 2 x embedding_length");
}

namespace {

// Channels per thread's share of the scan.
constexpr int64_t kChannelGrain = 64;

// An RMS norm of `x` in place, times `weight` when there is one.
void rms_norm_in_place(std::span<float> x, const std::vector<float>& weight, float eps) {
  kernels::rms_norm_rows(x, weight, eps, x, x.size());
}

// The scan (ggml_ssm_scan with a decay per state element) of channels
// [c0, c1) of one row.
void scan(const MambaWeights& w, const ModelHParams::Ssm& s, const float* x, const float* dt,
          const float* B, const float* C, float* state, float* y, size_t c0, size_t c1) {
  const auto d_state = static_cast<size_t>(s.d_state);
  for (size_t i = c0; i < c1; ++i) {
    const float delta = kernels::softplus(dt[i]);
    const float x_dt = x[i] * delta;
    float* row = state + i * d_state;
    const float* a = w.a.data() + i * d_state;
    float sum = 0.0f;
    for (size_t j = 0; j < d_state; ++j) {
      const float next = row[j] * std::exp(delta * a[j]) + B[j] * x_dt;
      sum += next * C[j];
      row[j] = next;
    }
    y[i] = sum + x[i] * w.d[i];
  }
}

}  // namespace

void mamba(const MambaWeights& w, const ModelHParams& hp, int64_t layer,
           std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
           ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("Mamba's selective scan");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto d_inner = static_cast<size_t>(s.d_inner);
  const auto d_state = static_cast<size_t>(s.d_state);
  const auto dt_rank = static_cast<size_t>(s.dt_rank);
  const auto taps = static_cast<size_t>(s.conv_taps);
  const size_t conv_state = (taps - 1) * d_inner;

  const auto xz = ForwardBuffers::take(buf.qkv, n_rows * 2 * d_inner);
  ctx.backend.matmul(w.in_proj, in.first(n_rows * n_embd), n, xz, 2 * s.d_inner);
  if (w.in_scale != 1.0f) ctx.backend.scale(xz, w.in_scale);
  // The convolution of every row in order through each sequence's state,
  // channels in parallel.
  const auto x = ForwardBuffers::take(buf.q, n_rows * d_inner);
  for (size_t r = 0; r < n_rows; ++r) {
    std::copy_n(xz.begin() + static_cast<std::ptrdiff_t>(r * 2 * d_inner), d_inner,
                x.begin() + static_cast<std::ptrdiff_t>(r * d_inner));
  }
  causal_conv_silu_rows({w.conv, w.conv_bias, taps, d_inner}, rows, layer, cache, ctx.host_pool(),
                        x.data(), d_inner);
  // dt | B | C of every row, dt normed and widened.
  const size_t dbc_width = dt_rank + 2 * d_state;
  const auto dbc = ForwardBuffers::take(buf.k, n_rows * dbc_width);
  ctx.backend.matmul(w.x_proj, x, n, dbc, static_cast<int64_t>(dbc_width));
  const bool normed = s.dt_b_c_rms || !w.dt_norm.empty();
  const auto dt_low = ForwardBuffers::take(buf.latent_a, n_rows * dt_rank);
  for (size_t r = 0; r < n_rows; ++r) {
    const auto row = dbc.subspan(r * dbc_width, dbc_width);
    if (normed) {
      rms_norm_in_place(row.first(dt_rank), w.dt_norm, hp.rms_eps);
      rms_norm_in_place(row.subspan(dt_rank, d_state), w.b_norm, hp.rms_eps);
      rms_norm_in_place(row.subspan(dt_rank + d_state, d_state), w.c_norm, hp.rms_eps);
    }
    std::copy_n(row.begin(), dt_rank, dt_low.begin() + static_cast<std::ptrdiff_t>(r * dt_rank));
  }
  const auto dt = ForwardBuffers::take(buf.v, n_rows * d_inner);
  ctx.backend.matmul(w.dt_proj, dt_low, n, dt, s.d_inner);
  ctx.backend.add_bias_rows(dt, w.dt_bias);
  // The scan of every row in order, channels in parallel; then y * silu(z).
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * d_inner);
  ctx.host_pool().parallel_for(
      s.d_inner,
      [&](int64_t c0, int64_t c1) {
        for (size_t r = 0; r < n_rows; ++r) {
          const float* bc = dbc.data() + r * dbc_width + dt_rank;
          scan(w, s, x.data() + r * d_inner, dt.data() + r * d_inner, bc, bc + d_state,
               cache.state(layer, rows[r].seq).data() + conv_state, y.data() + r * d_inner,
               static_cast<size_t>(c0), static_cast<size_t>(c1));
        }
      },
      kChannelGrain);
  for (size_t r = 0; r < n_rows; ++r) {
    const auto yr = y.subspan(r * d_inner, d_inner);
    kernels::swiglu(xz.subspan(r * 2 * d_inner + d_inner, d_inner), yr, yr);
  }
  const auto out_rows = out.first(n_rows * n_embd);
  ctx.backend.matmul(w.out_proj, y, n, out_rows, hp.n_embd);
  if (w.out_scale != 1.0f) ctx.backend.scale(out_rows, w.out_scale);
}

}  // namespace cortiq
