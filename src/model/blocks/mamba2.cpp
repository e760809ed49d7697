#include "model/blocks/mamba2.hpp"

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

void Mamba2Weights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer,
                          bool norm_optional) {
  const auto name = [&](std::string_view what) { return layer_tensor_name(layer, what); };
  const auto& s = hp.ssm;
  v.matrix(in_proj, name("ssm_in.weight"), hp.n_embd, s.d_inner + s.conv_width() + s.n_head);
  v.table(conv, name("ssm_conv1d.weight"), s.conv_taps, s.conv_width(), TensorKind::conv);
  v.vector(conv_bias, name("ssm_conv1d.bias"), s.conv_width(), TensorKind::bias);
  v.vector(dt_bias, name("ssm_dt.bias"), s.n_head, TensorKind::bias);
  // No ".weight" after these two (llama.cpp's names).
  v.table(a, name("ssm_a"), 1, s.n_head, TensorKind::decay);
  v.table(d, name("ssm_d"), 1, s.n_head, TensorKind::bias);
  v.table(norm, name("ssm_norm.weight"), s.d_inner / s.n_group, s.n_group, TensorKind::norm,
          !norm_optional);
  v.matrix(out_proj, name("ssm_out.weight"), s.d_inner, hp.n_embd);
  v.scale(in_scale, name("ssm_in.scale"));
  v.scale(out_scale, name("ssm_out.scale"));
  v.scale_without_effect(name("ssm_in.input_scale"));
  v.scale_without_effect(name("ssm_out.input_scale"));
}

void read_ssm_hparams(const HParamReader& keys, ModelHParams& hp, SsmGroups groups) {
  auto& s = hp.ssm;
  s.conv_taps = keys.required_uint("ssm.conv_kernel");
  s.d_inner = keys.required_uint("ssm.inner_size");
  s.d_state = keys.required_uint("ssm.state_size");
  s.n_head = keys.required_uint("ssm.time_step_rank");
  s.n_group = keys.required_uint("ssm.group_count");
  const bool grouped = groups == SsmGroups::at_least_one;
  if (s.conv_taps < 2 || s.d_inner <= 0 || s.d_state <= 0 || s.n_head <= 0 ||
      (grouped && s.n_group <= 0)) {
    keys.invalid("every ssm size must be positive (ssm.conv_kernel at least 2)");
  }
  // Bounds that keep the state's size products far from overflow.
  if (s.conv_taps > 1024 || s.d_inner > (int64_t{1} << 20) || s.d_state > 4096) {
    keys.invalid("ssm.conv_kernel, inner_size or state_size is out of range");
  }
  if (!grouped) {
    if (s.n_group != 0) keys.invalid("ssm.group_count must be 0 (one B and C for every head)");
    if (s.d_inner % s.n_head != 0) {
      keys.invalid("ssm.inner_size must split into time_step_rank heads");
    }
  } else if (s.d_inner % s.n_head != 0 || s.n_head % s.n_group != 0) {
    keys.invalid("ssm.inner_size must split into time_step_rank heads, and those into groups");
  }
}

void selective_scan_heads(const SelectiveScanHeads& p, const float* x, const float* B,
                          const float* C, const float* dt, float* state, float* y, size_t h0,
                          size_t h1) {
  const auto head_dim = static_cast<size_t>(p.head_dim);
  const auto d_state = static_cast<size_t>(p.d_state);
  const auto heads_per_group = static_cast<size_t>(p.n_head / p.n_group);
  for (size_t h = h0; h < h1; ++h) {
    const float delta = kernels::softplus(dt[h] + p.dt_bias[h]);
    const float decay = std::exp(delta * p.a[h]);
    const size_t g = h / heads_per_group;
    for (size_t i = 0; i < head_dim; ++i) {
      const size_t ii = h * head_dim + i;
      const float x_dt = x[ii] * delta;
      float* row = state + ii * d_state;
      float sum = 0.0f;
      for (size_t j = 0; j < d_state; ++j) {
        const float next = row[j] * decay + B[g * d_state + j] * x_dt;
        sum += next * C[g * d_state + j];
        row[j] = next;
      }
      y[ii] = sum + x[ii] * p.d[h];
    }
  }
}

namespace {

// The scan of every row in order, heads in parallel (each its own state).
void scan_rows(const Mamba2Weights& w, const ModelHParams::Ssm& s, std::span<const BatchRow> rows,
               int64_t layer, KvCache& cache, ThreadPool& pool, std::span<const float> proj,
               size_t proj_width, std::span<float> y) {
  const auto d_inner = static_cast<size_t>(s.d_inner);
  const auto conv_state =
      static_cast<size_t>(s.conv_taps - 1) * static_cast<size_t>(s.conv_width());
  const SelectiveScanHeads scan{w.dt_bias, w.a, w.d, s.n_head, s.head_dim(), s.d_state, s.n_group};
  pool.parallel_for(s.n_head, [&](int64_t begin, int64_t end) {
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* x = proj.data() + r * proj_width + d_inner;
      const float* B = x + d_inner;
      const float* C = B + s.n_group * s.d_state;
      selective_scan_heads(
          scan, x, B, C, x + s.conv_width(), cache.state(layer, rows[r].seq).data() + conv_state,
          y.data() + r * d_inner, static_cast<size_t>(begin), static_cast<size_t>(end));
    }
  });
}

}  // namespace

void mamba2(const Mamba2Weights& w, const ModelHParams& hp, int64_t layer,
            std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
            ConstTensor in_tensor, Tensor out_tensor) {
  ctx.host_only("Mamba-2's selective scan");
  const std::span<const float> in = in_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& s = hp.ssm;
  const size_t n_rows = rows.size();
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto d_inner = static_cast<size_t>(s.d_inner);
  const auto conv_width = static_cast<size_t>(s.conv_width());
  const size_t proj_width = d_inner + conv_width + static_cast<size_t>(s.n_head);
  const auto n = static_cast<int64_t>(n_rows);
  const auto proj = ForwardBuffers::take(buf.qkv, n_rows * proj_width);
  ctx.backend.matmul(w.in_proj, in.first(n_rows * n_embd), n, proj,
                     static_cast<int64_t>(proj_width));
  if (w.in_scale != 1.0f) ctx.backend.scale(proj, w.in_scale);
  causal_conv_silu_rows({w.conv, w.conv_bias, static_cast<size_t>(s.conv_taps), conv_width}, rows,
                        layer, cache, ctx.host_pool(), proj.data() + d_inner, proj_width);
  const auto y = ForwardBuffers::take(buf.attn_out, n_rows * d_inner);
  scan_rows(w, s, rows, layer, cache, ctx.host_pool(), proj, proj_width, y);
  for (size_t r = 0; r < n_rows; ++r) {
    const auto z = proj.subspan(r * proj_width, d_inner);
    const auto yr = y.subspan(r * d_inner, d_inner);
    kernels::swiglu(z, yr, yr);
    if (w.norm.empty()) continue;
    const auto group = d_inner / static_cast<size_t>(s.n_group);
    for (size_t g = 0; g < static_cast<size_t>(s.n_group); ++g) {
      const auto part = yr.subspan(g * group, group);
      ctx.backend.rms_norm_rows(part, std::span<const float>(w.norm).subspan(g * group, group),
                                hp.rms_eps, part, group);
    }
  }
  const auto out_rows = out.first(n_rows * n_embd);
  ctx.backend.matmul(w.out_proj, y, n, out_rows, hp.n_embd);
  if (w.out_scale != 1.0f) ctx.backend.scale(out_rows, w.out_scale);
}

}  // namespace cortiq
