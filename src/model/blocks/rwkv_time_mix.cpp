#include "model/blocks/rwkv_time_mix.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/norm.hpp"
#include "kernels/cpu/rwkv_wkv.hpp"
#include "kv/kv_cache.hpp"
#include "model/blocks/head_states.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

namespace {

std::string tensor(int64_t layer, std::string_view what) {
  return layer_tensor_name(layer, std::string(what) + ".weight");
}

// Consecutive pieces of one scratch buffer.
class Scratch {
 public:
  explicit Scratch(std::span<float> all) : all_(all) {}
  std::span<float> take(size_t n) {
    const auto piece = all_.subspan(at_, n);
    at_ += n;
    return piece;
  }

 private:
  std::span<float> all_;
  size_t at_ = 0;
};

// y = layer_norm per head(y) * ln + ln_bias (eps 64e-5, llama.cpp's constant).
void norm_heads(const ModelHParams& hp, std::span<const float> ln, std::span<const float> bias,
                std::span<float> y) {
  const auto d = static_cast<size_t>(hp.rwkv.head_size);
  const auto width = static_cast<size_t>(hp.n_embd);
  for (size_t at = 0; at < y.size(); at += d) {
    const size_t c = at % width;
    kernels::layer_norm(y.subspan(at, d), ln.subspan(c, d), bias.subspan(c, d), 64e-5f,
                        y.subspan(at, d));
  }
}

}  // namespace

void Rwkv6TimeMixWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const int64_t e = hp.n_embd, mix = hp.rwkv.mix_rank, d = hp.rwkv.head_size;
  const auto name = [&](std::string_view what) { return tensor(layer, what); };
  v.shaped(lerp_x, name("time_mix_lerp_x"), {e, 1, 1}, TensorKind::bias);
  // The converter fuses the five lerps; llama.cpp also reads them apart
  // (and then needs lerp_w), and uses the fused one when both are there.
  if (v.has(name("time_mix_lerp_fused"), true)) {
    v.shaped(lerp, name("time_mix_lerp_fused"), {e, 1, 1, 5}, TensorKind::bias);
    for (const char* part : {"w", "k", "v", "r", "g"}) {
      v.without_effect(name(std::string("time_mix_lerp_") + part), e, TensorKind::bias);
    }
  } else {
    lerp.clear();
    for (const char* part : {"w", "k", "v", "r", "g"}) {
      std::vector<float> one;
      v.shaped(one, name(std::string("time_mix_lerp_") + part), {e, 1, 1}, TensorKind::bias);
      lerp.insert(lerp.end(), one.begin(), one.end());
    }
  }
  v.router(w1, name("time_mix_w1"), e, 5 * mix);
  v.experts(w2, name("time_mix_w2"), mix, e, 5);
  v.table(first, name("time_mix_first"), d, e / d, TensorKind::bias);
  v.vector(decay, name("time_mix_decay"), e, TensorKind::bias);
  v.router(decay_w1, name("time_mix_decay_w1"), e, hp.rwkv.decay_rank);
  v.router(decay_w2, name("time_mix_decay_w2"), hp.rwkv.decay_rank, e);
  v.matrix(key, name("time_mix_key"), e, e);
  v.matrix(value, name("time_mix_value"), e, e);
  v.matrix(receptance, name("time_mix_receptance"), e, e);
  v.matrix(gate, name("time_mix_gate"), e, e);
  v.vector(ln, name("time_mix_ln"), e, TensorKind::norm);
  v.vector(ln_bias, layer_tensor_name(layer, "time_mix_ln.bias"), e, TensorKind::bias);
  v.matrix(output, name("time_mix_output"), e, e);
}

void Rwkv7TimeMixWeights::visit(TensorVisitor& v, const ModelHParams& hp, int64_t layer) {
  const int64_t e = hp.n_embd;
  const auto& rk = hp.rwkv;
  const auto name = [&](std::string_view what) { return tensor(layer, what); };
  v.shaped(lerp, name("time_mix_lerp_fused"), {e, 1, 1, 6}, TensorKind::bias);
  v.vector(w0, name("time_mix_w0"), e, TensorKind::bias);
  v.router(w1, name("time_mix_w1"), e, rk.decay_rank);
  v.router(w2, name("time_mix_w2"), rk.decay_rank, e);
  v.vector(a0, name("time_mix_a0"), e, TensorKind::bias);
  v.matrix(a1, name("time_mix_a1"), e, rk.iclr_rank);
  v.matrix(a2, name("time_mix_a2"), rk.iclr_rank, e);
  // The first layer's value mix is a placeholder its converter writes (as
  // wide as the a vectors) and llama.cpp's graph never runs: bound, unused.
  const int64_t value_rank = layer == 0 ? rk.iclr_rank : rk.value_mix_rank;
  v.vector(v0, name("time_mix_v0"), e, TensorKind::bias);
  v.matrix(v1, name("time_mix_v1"), e, value_rank);
  v.matrix(v2, name("time_mix_v2"), value_rank, e);
  v.matrix(g1, name("time_mix_g1"), e, rk.gate_rank);
  v.matrix(g2, name("time_mix_g2"), rk.gate_rank, e);
  v.vector(k_k, name("time_mix_k_k"), e, TensorKind::bias);
  v.vector(k_a, name("time_mix_k_a"), e, TensorKind::bias);
  v.vector(r_k, name("time_mix_r_k"), e, TensorKind::bias);
  v.matrix(key, name("time_mix_key"), e, e);
  v.matrix(value, name("time_mix_value"), e, e);
  v.matrix(receptance, name("time_mix_receptance"), e, e);
  v.vector(ln, name("time_mix_ln"), e, TensorKind::norm);
  v.vector(ln_bias, layer_tensor_name(layer, "time_mix_ln.bias"), e, TensorKind::bias);
  v.matrix(output, name("time_mix_output"), e, e);
}

void rwkv_token_shift(const ModelHParams& hp, std::span<const BatchRow> rows, int64_t layer,
                      int64_t offset, KvCache& cache, std::span<const float> x,
                      std::span<float> sx) {
  const auto width = static_cast<size_t>(hp.n_embd);
  for (size_t r = 0; r < rows.size(); ++r) {
    const auto held = cache.state(layer, rows[r].seq).subspan(static_cast<size_t>(offset), width);
    const auto row = x.subspan(r * width, width);
    float* const diff = sx.data() + r * width;
    for (size_t i = 0; i < width; ++i) diff[i] = held[i] - row[i];
    std::copy(row.begin(), row.end(), held.begin());
  }
}

void rwkv_lerp_rows(std::span<const float> sx, std::span<const float> lerp,
                    std::span<const float> x, std::span<float> out) {
  const size_t width = lerp.size();
  for (size_t i = 0; i < x.size(); ++i) out[i] = sx[i] * lerp[i % width] + x[i];
}

void rwkv6_time_mix(const Rwkv6TimeMixWeights& w, const ModelHParams& hp, int64_t layer,
                    std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                    ConstTensor x_all_tensor, Tensor out_tensor) {
  ctx.host_only("RWKV-6's time mix");
  const std::span<const float> x_all = x_all_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto e = static_cast<size_t>(hp.n_embd);
  const auto mix = static_cast<size_t>(hp.rwkv.mix_rank);
  const auto d = static_cast<size_t>(hp.rwkv.head_size);
  const size_t rows_e = n_rows * e;
  const auto x = x_all.first(rows_e);
  Scratch scratch(ForwardBuffers::take(
      buf.mixer, n_rows * (7 * e + 6 * mix + static_cast<size_t>(hp.rwkv.decay_rank))));
  const auto sx = scratch.take(rows_e);
  const auto xxx = scratch.take(rows_e);
  const auto low = scratch.take(n_rows * 5 * mix);
  const auto low_part = scratch.take(n_rows * mix);
  const auto parts = scratch.take(5 * rows_e);  // x_w, x_k, x_v, x_r, x_g
  const auto decay_low = scratch.take(n_rows * static_cast<size_t>(hp.rwkv.decay_rank));
  const auto part = [&](size_t p) { return parts.subspan(p * rows_e, rows_e); };

  rwkv_token_shift(hp, rows, layer, 0, cache, x, sx);
  rwkv_lerp_rows(sx, w.lerp_x, x, xxx);
  ctx.backend.matmul(w.w1, xxx, n, low, static_cast<int64_t>(5 * mix));
  for (float& t : low) t = std::tanh(t);
  for (size_t p = 0; p < 5; ++p) {
    for (size_t r = 0; r < n_rows; ++r) {
      const auto from = low.subspan((r * 5 + p) * mix, mix);
      std::copy(from.begin(), from.end(), low_part.begin() + static_cast<ptrdiff_t>(r * mix));
    }
    const auto xp = part(p);
    ctx.backend.matmul(w.w2[p], low_part, n, xp, static_cast<int64_t>(e));
    const auto lerp = std::span<const float>(w.lerp).subspan(p * e, e);
    for (size_t i = 0; i < rows_e; ++i) xp[i] = (xp[i] + lerp[i % e]) * sx[i] + x[i];
  }

  // r, k, v, g, then w, into the first rows of the buffers they replace.
  const auto r = ForwardBuffers::take(buf.q, rows_e);
  const auto k = ForwardBuffers::take(buf.k, rows_e);
  const auto v = ForwardBuffers::take(buf.v, rows_e);
  const auto g = ForwardBuffers::take(buf.attn_gate, rows_e);
  ctx.backend.matmul(w.receptance, part(3), n, r, hp.n_embd);
  ctx.backend.matmul(w.key, part(1), n, k, hp.n_embd);
  ctx.backend.matmul(w.value, part(2), n, v, hp.n_embd);
  ctx.backend.matmul(w.gate, part(4), n, g, hp.n_embd);
  kernels::silu_inplace(g);
  const auto decay = xxx;  // free again
  ctx.backend.matmul(w.decay_w1, part(0), n, decay_low, hp.rwkv.decay_rank);
  for (float& t : decay_low) t = std::tanh(t);
  ctx.backend.matmul(w.decay_w2, decay_low, n, decay, hp.n_embd);
  for (size_t i = 0; i < rows_e; ++i) decay[i] = std::exp(-std::exp(decay[i] + w.decay[i % e]));

  const auto y = ForwardBuffers::take(buf.attn_out, rows_e);
  step_heads_in_row_order(rows, layer, cache, ctx.host_pool(), 2 * e, e / d, d,
                          [&](float* state, size_t row, size_t h) {
                            const size_t c = h * d, at = row * e + c;
                            kernels::wkv6_step(state, r.data() + at, k.data() + at, v.data() + at,
                                               w.first.data() + c, decay.data() + at, y.data() + at,
                                               static_cast<int64_t>(d));
                          });
  norm_heads(hp, w.ln, w.ln_bias, y);
  for (size_t i = 0; i < rows_e; ++i) y[i] *= g[i];
  ctx.backend.matmul(w.output, y, n, out.first(rows_e), hp.n_embd);
}

void rwkv7_time_mix(const Rwkv7TimeMixWeights& w, const ModelHParams& hp, int64_t layer,
                    std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                    ConstTensor x_all_tensor, Tensor v_first_tensor, Tensor out_tensor) {
  ctx.host_only("RWKV-7's time mix");
  const std::span<const float> x_all = x_all_tensor;
  const std::span<float> v_first = v_first_tensor;
  const std::span<float> out = out_tensor;
  auto& buf = ctx.buffers;
  const auto& rk = hp.rwkv;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto e = static_cast<size_t>(hp.n_embd);
  const auto d = static_cast<size_t>(rk.head_size);
  const size_t rows_e = n_rows * e;
  const auto x = x_all.first(rows_e);
  const auto widest_rank =
      static_cast<size_t>(std::max({rk.decay_rank, rk.iclr_rank, rk.value_mix_rank, rk.gate_rank}));
  Scratch scratch(ForwardBuffers::take(buf.mixer, n_rows * (11 * e + widest_rank)));
  const auto sx = scratch.take(rows_e);
  const auto parts = scratch.take(6 * rows_e);  // x_r, x_w, x_k, x_v, x_a, x_g
  const auto decay = scratch.take(rows_e);
  const auto a = scratch.take(rows_e);
  const auto kk = scratch.take(rows_e);
  const auto g = scratch.take(rows_e);
  const auto low = scratch.take(n_rows * widest_rank);
  const auto part = [&](size_t p) { return parts.subspan(p * rows_e, rows_e); };
  // dst = up · f(down · in), f applied to the low-rank product.
  const auto low_rank = [&](const kernels::WeightView& down, const kernels::WeightView& up,
                            std::span<const float> in, auto f, std::span<float> dst) {
    const auto lo = low.first(n_rows * static_cast<size_t>(down.n_rows));
    ctx.backend.matmul(down, in, n, lo, down.n_rows);
    for (float& t : lo) t = f(t);
    ctx.backend.matmul(up, lo, n, dst, hp.n_embd);
  };
  const auto same = [](float t) { return t; };

  rwkv_token_shift(hp, rows, layer, 0, cache, x, sx);
  for (size_t p = 0; p < 6; ++p) {
    rwkv_lerp_rows(sx, std::span<const float>(w.lerp).subspan(p * e, e), x, part(p));
  }
  const auto r = ForwardBuffers::take(buf.q, rows_e);
  const auto k = ForwardBuffers::take(buf.k, rows_e);
  const auto v = ForwardBuffers::take(buf.v, rows_e);
  ctx.backend.matmul(w.receptance, part(0), n, r, hp.n_embd);
  low_rank(
      w.w1, w.w2, part(1), [](float t) { return std::tanh(t); }, decay);
  for (size_t i = 0; i < rows_e; ++i) {
    decay[i] = std::exp(kernels::sigmoid(decay[i] + w.w0[i % e]) * -0.606531f);
  }
  ctx.backend.matmul(w.key, part(2), n, k, hp.n_embd);
  ctx.backend.matmul(w.value, part(3), n, v, hp.n_embd);
  if (layer == 0) {
    std::copy(v.begin(), v.end(), v_first.begin());
  } else {
    const auto mix = g;  // g is computed below
    low_rank(w.v1, w.v2, part(3), same, mix);
    for (size_t i = 0; i < rows_e; ++i) {
      v[i] = v[i] + (v_first[i] - v[i]) * kernels::sigmoid(mix[i] + w.v0[i % e]);
    }
  }
  low_rank(
      w.g1, w.g2, part(5), [](float t) { return kernels::sigmoid(t); }, g);
  low_rank(w.a1, w.a2, part(4), same, a);
  for (size_t i = 0; i < rows_e; ++i) a[i] = kernels::sigmoid(a[i] + w.a0[i % e]);

  // kk = l2_norm(k * k_k) per head; k += a * (k * k_a) - k * k_a; then the
  // kernel's a and b: -kk and kk * a (into kk and a).
  for (size_t i = 0; i < rows_e; ++i) kk[i] = k[i] * w.k_k[i % e];
  for (size_t at = 0; at < rows_e; at += d) kernels::l2_norm(kk.subspan(at, d), 1e-12f);
  for (size_t i = 0; i < rows_e; ++i) {
    const float ka = k[i] * w.k_a[i % e];
    k[i] = k[i] + (a[i] * ka - ka);
    a[i] = kk[i] * a[i];
    kk[i] = -kk[i];
  }
  const auto y = ForwardBuffers::take(buf.attn_out, rows_e);
  step_heads_in_row_order(
      rows, layer, cache, ctx.host_pool(), 2 * e, e / d, d,
      [&](float* state, size_t row, size_t h) {
        const size_t at = row * e + h * d;
        kernels::wkv7_step(state, r.data() + at, decay.data() + at, k.data() + at, v.data() + at,
                           kk.data() + at, a.data() + at, y.data() + at, static_cast<int64_t>(d));
      });
  norm_heads(hp, w.ln, w.ln_bias, y);
  // The bonus: y += v * sum per head(k * r * r_k) (llama.cpp's sum_rows: in double).
  for (size_t at = 0; at < rows_e; at += d) {
    double sum = 0.0;
    for (size_t i = at; i < at + d; ++i) sum += static_cast<double>(k[i] * r[i] * w.r_k[i % e]);
    const auto bonus = static_cast<float>(sum);
    for (size_t i = at; i < at + d; ++i) y[i] = y[i] + v[i] * bonus;
  }
  for (size_t i = 0; i < rows_e; ++i) y[i] *= g[i];
  ctx.backend.matmul(w.output, y, n, out.first(rows_e), hp.n_embd);
}

}  // namespace cortiq
