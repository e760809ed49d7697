#include "model/blocks/plamo2_mamba.hpp"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/causal_conv_rows.hpp"
#include "model/blocks/mamba2.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

void Plamo2MambaWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const auto& s = hp.ssm;
  const int64_t dt_dim = plamo2_dt_dim(hp);
  v.matrix(in_proj, name("ssm_in.weight"), hp.n_embd, 2 * s.d_inner);
  v.table(conv, name("ssm_conv1d.weight"), s.conv_taps, s.d_inner, TensorKind::conv);
  v.matrix(x_proj, name("ssm_x.weight"), s.d_inner, dt_dim + 2 * s.d_state);
  v.matrix(dt_proj, name("ssm_dt.weight"), dt_dim, s.n_head);
  v.vector(dt_bias, name("ssm_dt.bias"), s.n_head, TensorKind::bias);
  // No ".weight" after these (llama.cpp's names).
  v.vector(a, name("ssm_a"), s.n_head, TensorKind::decay);
  v.vector(d, name("ssm_d"), s.n_head, TensorKind::bias);
  v.matrix(out_proj, name("ssm_out.weight"), s.d_inner, hp.n_embd);
  v.vector(dt_norm, name("ssm_dt_norm"), dt_dim, TensorKind::norm);
  v.vector(b_norm, name("ssm_b_norm"), s.d_state, TensorKind::norm);
  v.vector(c_norm, name("ssm_c_norm"), s.d_state, TensorKind::norm);
  // Loaded by llama.cpp's generic pass, passed to no product by its graph.
  for (const char* matrix : {"ssm_in", "ssm_out"}) {
    v.scale_without_effect(name(std::string(matrix) + ".scale"));
    v.scale_without_effect(name(std::string(matrix) + ".input_scale"));
  }
}

namespace {

// RMS norm in place, times `weight`.
void rms_norm_in_place(std::span<float> x, const std::vector<float>& weight, float eps) {
  kernels::rms_norm_rows(x, weight, eps, x, x.size());
}

}  // namespace

void plamo2_mamba(const Plamo2MambaWeights& w, const ModelHParams& hp, int64_t layer,
                  std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                  ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("PLaMo-2's Mamba mixer");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto d_inner = static_cast<size_t>(s.d_inner);
  const auto d_state = static_cast<size_t>(s.d_state);
  const auto n_head = static_cast<size_t>(s.n_head);
  const auto head_dim = static_cast<size_t>(s.head_dim());
  const auto dt_dim = static_cast<size_t>(plamo2_dt_dim(hp));
  const auto taps = static_cast<size_t>(s.conv_taps);
  const size_t conv_state = (taps - 1) * d_inner;

  const auto zx = ForwardBuffers::take(buf.qkv, n_rows * 2 * d_inner);
  ctx.backend.matmul(w.in_proj, in.first(n_rows * n_embd), n, zx, 2 * s.d_inner);
  // Each head's x, convolved in row order through each sequence's state,
  // channels in parallel.
  const auto x = ForwardBuffers::take(buf.q, n_rows * d_inner);
  for (size_t r = 0; r < n_rows; ++r) {
    const float* zxr = zx.data() + r * 2 * d_inner;
    for (size_t h = 0; h < n_head; ++h) {
      std::copy_n(zxr + h * 2 * head_dim + head_dim, head_dim,
                  x.data() + r * d_inner + h * head_dim);
    }
  }
  causal_conv_silu_rows({w.conv, {}, taps, d_inner}, rows, layer, cache, ctx.host_pool(), x.data(),
                        d_inner);
  // B | C | dt of every row, normed; dt widened to one per head.
  const size_t bcdt_width = 2 * d_state + dt_dim;
  const auto bcdt = ForwardBuffers::take(buf.k, n_rows * bcdt_width);
  ctx.backend.matmul(w.x_proj, x, n, bcdt, static_cast<int64_t>(bcdt_width));
  const auto dt_low = ForwardBuffers::take(buf.latent_a, n_rows * dt_dim);
  for (size_t r = 0; r < n_rows; ++r) {
    const auto row = bcdt.subspan(r * bcdt_width, bcdt_width);
    rms_norm_in_place(row.first(d_state), w.b_norm, hp.rms_eps);
    rms_norm_in_place(row.subspan(d_state, d_state), w.c_norm, hp.rms_eps);
    rms_norm_in_place(row.subspan(2 * d_state, dt_dim), w.dt_norm, hp.rms_eps);
    std::copy_n(row.begin() + static_cast<std::ptrdiff_t>(2 * d_state), dt_dim,
                dt_low.begin() + static_cast<std::ptrdiff_t>(r * dt_dim));
  }
  const auto dt = ForwardBuffers::take(buf.v, n_rows * n_head);
  ctx.backend.matmul(w.dt_proj, dt_low, n, dt, s.n_head);
  // The scan of every row in order (Mamba-2's, one B and C for every head),
  // heads in parallel; then y * silu(z), z each head's first half.
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * d_inner);
  const SelectiveScanHeads scan{w.dt_bias, w.a, w.d, s.n_head, s.head_dim(), s.d_state, 1};
  ctx.host_pool().parallel_for(s.n_head, [&](int64_t h0, int64_t h1) {
    for (size_t r = 0; r < n_rows; ++r) {
      const float* bc = bcdt.data() + r * bcdt_width;
      selective_scan_heads(scan, x.data() + r * d_inner, bc, bc + d_state, dt.data() + r * n_head,
                           cache.state(layer, rows[r].seq).data() + conv_state,
                           y.data() + r * d_inner, static_cast<size_t>(h0),
                           static_cast<size_t>(h1));
    }
  });
  for (size_t r = 0; r < n_rows; ++r) {
    const float* zxr = zx.data() + r * 2 * d_inner;
    for (size_t h = 0; h < n_head; ++h) {
      const auto z = std::span<const float>(zxr + h * 2 * head_dim, head_dim);
      const auto yh = y.subspan(r * d_inner + h * head_dim, head_dim);
      kernels::swiglu(z, yh, yh);
    }
  }
  ctx.backend.matmul(w.out_proj, y, n, out.first(n_rows * n_embd), hp.n_embd);
}

}  // namespace cortiq
