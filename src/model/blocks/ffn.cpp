#include "model/gated_ffn.hpp"

#include "base/thread_pool.hpp"
#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/norm.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {
// Elements per share of the SwiGLU: below this one thread does it all.
constexpr int64_t kSwigluGrain = 2048;
}  // namespace

GatedFfnWeights GatedFfnWeights::bind(const WeightBinder& b, const ModelHParams& hp,
                                      int64_t layer) {
  const auto name = [&](std::string_view what) { return WeightBinder::layer_name(layer, what); };
  GatedFfnWeights w;
  w.norm = b.vector(name("ffn_norm.weight"), hp.n_embd);
  w.gate = b.matrix(name("ffn_gate.weight"), hp.n_embd, hp.n_ff);
  w.up = b.matrix(name("ffn_up.weight"), hp.n_embd, hp.n_ff);
  w.down = b.matrix(name("ffn_down.weight"), hp.n_ff, hp.n_embd);
  w.gate_b = b.optional_vector(name("ffn_gate.bias"), hp.n_ff);
  w.up_b = b.optional_vector(name("ffn_up.bias"), hp.n_ff);
  w.down_b = b.optional_vector(name("ffn_down.bias"), hp.n_embd);
  return w;
}

void gated_ffn_block(const GatedFfnWeights& w, const ModelHParams& hp, int64_t n_rows,
                     ForwardContext& ctx, std::span<float> residual) {
  auto& buf = ctx.buffers;
  const auto n_embd = static_cast<size_t>(hp.n_embd);
  const auto n_ff = static_cast<size_t>(hp.n_ff);
  const auto rows = static_cast<size_t>(n_rows);
  auto normed = ForwardBuffers::take(buf.normed, rows * n_embd);
  auto gate = ForwardBuffers::take(buf.gate, rows * n_ff);
  auto up = ForwardBuffers::take(buf.up, rows * n_ff);
  auto proj = ForwardBuffers::take(buf.proj, rows * n_embd);

  kernels::rms_norm_rows(residual.first(rows * n_embd), w.norm, hp.rms_eps, normed, n_embd);
  const kernels::MatmulOutput gate_up[] = {{&w.gate, gate, hp.n_ff}, {&w.up, up, hp.n_ff}};
  kernels::matmul_shared_input(gate_up, normed, n_rows, ctx.pool, buf.matmul);
  kernels::add_bias_rows(gate, w.gate_b);
  kernels::add_bias_rows(up, w.up_b);
  // Element-wise, but an exp per element: worth both cores even at decode.
  ctx.pool.parallel_for(
      static_cast<int64_t>(gate.size()),
      [&](int64_t begin, int64_t end) {
        const auto b = static_cast<size_t>(begin), count = static_cast<size_t>(end - begin);
        kernels::swiglu(gate.subspan(b, count), up.subspan(b, count), gate.subspan(b, count));
      },
      kSwigluGrain);
  kernels::matmul(w.down, gate, n_rows, proj, hp.n_embd, ctx.pool, buf.matmul);
  kernels::add_bias_rows(proj, w.down_b);
  kernels::add_inplace(residual.first(rows * n_embd), proj);
}

}  // namespace cortiq
