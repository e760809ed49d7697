// BlinkDL's RWKV-6 "Finch" (`rwkv6`: RWKV-6 World 1.6B-14B) and RWKV-7
// "Goose" (`rwkv7`: RWKV-7 World/G1 0.1B-2.9B): attention-free layers of a
// time mix (blocks/rwkv_time_mix.hpp) and a channel mix, each reading its
// sequence's previous row through a token shift:
//
//   x = layer_norm(token_embd[token]) * token_embd_norm + its bias
//   for each layer:
//     x += time_mix(layer_norm(x) * attn_norm + attn_norm_b)
//     h  = layer_norm(x) * attn_norm_2 + attn_norm_2_b,  sx = prev(h) - h
//     x += rwkv6: sigmoid(channel_mix_receptance · (sx * lerp_r + h))
//                   * (channel_mix_value · relu(channel_mix_key · (sx * lerp_k + h))²)
//          rwkv7: channel_mix_value · relu(channel_mix_key · (sx * lerp_k + h))²
//     rwkv6: x *= 0.5 after every rescale_every_n_layers-th layer
//   logits = output(layer_norm(x) * output_norm + output_norm_b)
//
// Every layer keeps its two shifted rows and its heads' matrices per
// sequence (RWKV-7 also carries the first layer's values through the
// pass); no keys, values or positions. As llama.cpp's loader: head_count
// and head_count_kv are 0 and unused, feed_forward_length sizes the channel
// mix, token_shift_count must be 2, layer_norm_epsilon defaults to 0.
#include <memory>

#include "kernels/cpu/activations.hpp"
#include "kernels/cpu/matmul.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/norm.hpp"
#include "model/blocks/rwkv_time_mix.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

struct ChannelMixWeights {
  std::vector<float> lerp_k, lerp_r;  // lerp_r: RWKV-6 only
  kernels::WeightView key, value, receptance;

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il, bool rwkv6) {
    const int64_t e = hp.n_embd, ff = hp.layer(il).n_ff;
    v.shaped(lerp_k, layer_tensor_name(il, "channel_mix_lerp_k.weight"), {e, 1, 1},
             TensorKind::bias);
    if (rwkv6) {
      v.shaped(lerp_r, layer_tensor_name(il, "channel_mix_lerp_r.weight"), {e, 1, 1},
               TensorKind::bias);
    }
    v.matrix(key, layer_tensor_name(il, "channel_mix_key.weight"), e, ff);
    v.matrix(value, layer_tensor_name(il, "channel_mix_value.weight"), ff, e);
    if (rwkv6) v.matrix(receptance, layer_tensor_name(il, "channel_mix_receptance.weight"), e, e);
  }
};

// out = the channel mix of the rows x (normed), whose shifted rows the
// state keeps after the time mix's.
void channel_mix(const ChannelMixWeights& w, const ModelHParams& hp, int64_t il,
                 std::span<const BatchRow> rows, KvCache& cache, ForwardContext& ctx,
                 std::span<const float> x_all, std::span<float> out) {
  auto& buf = ctx.buffers;
  const size_t n_rows = rows.size();
  const auto n = static_cast<int64_t>(n_rows);
  const auto e = static_cast<size_t>(hp.n_embd);
  const size_t rows_e = n_rows * e;
  const auto x = x_all.first(rows_e);
  const auto sx = ForwardBuffers::take(buf.q, rows_e);
  const auto mixed = ForwardBuffers::take(buf.k, rows_e);
  const auto hidden = ForwardBuffers::take(buf.up, n_rows * static_cast<size_t>(w.key.n_rows));
  rwkv_token_shift(hp, rows, il, rwkv_channel_shift_offset(hp), cache, x, sx);
  rwkv_lerp_rows(sx, w.lerp_k, x, mixed);
  ctx.backend.matmul(w.key, mixed, n, hidden, w.key.n_rows);
  kernels::relu_sqr_inplace(hidden);
  const auto y = out.first(rows_e);
  ctx.backend.matmul(w.value, hidden, n, y, hp.n_embd);
  if (w.receptance.empty()) return;
  rwkv_lerp_rows(sx, w.lerp_r, x, mixed);
  const auto r = ForwardBuffers::take(buf.v, rows_e);
  ctx.backend.matmul(w.receptance, mixed, n, r, hp.n_embd);
  for (size_t i = 0; i < rows_e; ++i) y[i] = kernels::sigmoid(r[i]) * y[i];
}

template <class TimeMix>
struct RwkvLayer {
  Norm attn_norm, ffn_norm;  // attn_norm, attn_norm_2
  TimeMix time_mix;
  ChannelMixWeights channel_mix;
};

template <class TimeMix>
struct RwkvWeights {
  TokenEmbedding embedding;
  Norm embedding_norm;  // token_embd_norm
  OutputHead head;
  RopeTables rope;  // none used
  std::vector<RwkvLayer<TimeMix>> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    constexpr bool rwkv6 = std::is_same_v<TimeMix, Rwkv6TimeMixWeights>;
    embedding.visit(v, hp);
    embedding_norm.visit(v, "token_embd_norm", hp.n_embd, NormKind::layer, hp.norm_eps);
    head.visit(v, hp, embedding, OutputMatrix::own, OutputBias::none, NormKind::layer);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      RwkvLayer<TimeMix>& layer = layers.emplace_back();
      layer.attn_norm.visit(v, layer_tensor_name(il, "attn_norm"), hp.n_embd, NormKind::layer,
                            hp.norm_eps);
      layer.ffn_norm.visit(v, layer_tensor_name(il, "attn_norm_2"), hp.n_embd, NormKind::layer,
                           hp.norm_eps);
      layer.time_mix.visit(v, hp, il);
      layer.channel_mix.visit(v, hp, il, rwkv6);
    }
  }
};

template <class TimeMix>
class RwkvModel final : public FamilyModel<RwkvWeights<TimeMix>> {
 public:
  using FamilyModel<RwkvWeights<TimeMix>>::FamilyModel;

  // RWKV-7: the stream and the first layer's values.
  int64_t stage_width() const override {
    return (kCarriesFirstValues ? 2 : 1) * this->hparams_.n_embd;
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = this->hparams_;
    const auto& w = this->w_;
    const LayerStream s = start_layers(h, rows, cells, ctx, w.embedding, w.rope, &w.embedding_norm);
    const auto n_embd = static_cast<size_t>(h.n_embd);
    const auto v_first = ForwardBuffers::take(ctx.buffers.value_first, rows.size() * n_embd);
    // RWKV-7's first layer's values, which every later layer reads, cross
    // into a stage that starts later beside the stream.
    if (kCarriesFirstValues && ctx.stage.first > 0) ctx.stage.read_input(v_first, n_embd, n_embd);
    for (const int64_t il : ctx.stage.layers()) {
      const RwkvLayer<TimeMix>& layer = w.layers[static_cast<size_t>(il)];
      layer.attn_norm.apply(ctx, s.x, s.normed);
      if constexpr (std::is_same_v<TimeMix, Rwkv6TimeMixWeights>) {
        rwkv6_time_mix(layer.time_mix, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        rwkv7_time_mix(layer.time_mix, h, il, rows, cache, ctx, s.normed, v_first, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
      layer.ffn_norm.apply(ctx, s.x, s.normed);
      channel_mix(layer.channel_mix, h, il, rows, cache, ctx, s.normed, s.branch);
      ctx.backend.add(s.x, s.branch);
      const int64_t every = h.rwkv.rescale_every;
      if (every > 0 && (il + 1) % every == 0) ctx.backend.scale(s.x, 0.5f);
    }
    w.head.apply(h, rows, s.x, ctx, logits);
    if (kCarriesFirstValues && !ctx.stage.ends_in_head()) {
      ctx.stage.write_output(v_first, n_embd, logits, n_embd);
    }
  }

  static constexpr bool kCarriesFirstValues = !std::is_same_v<TimeMix, Rwkv6TimeMixWeights>;
};

// What both read: layer norms, the head size, two shifted rows per layer.
void read_rwkv_common(const HParamReader& keys, ModelHParams& hp, RecurrentKind kind) {
  hp.uses_rms_norm = false;
  hp.norm_eps = keys.float_or("attention.layer_norm_epsilon", 0.0f);
  auto& rk = hp.rwkv;
  rk.head_size = keys.required_uint("wkv.head_size");
  if (rk.head_size <= 0 || rk.head_size > 1024 || hp.n_embd % rk.head_size != 0) {
    keys.invalid("wkv.head_size must divide embedding_length (and be at most 1024)");
  }
  if (keys.uint_or("token_shift_count", 2) != 2) {
    keys.invalid("token_shift_count must be 2 (llama.cpp's rwkv6 and rwkv7 graphs)");
  }
  for (LayerSpec& layer : hp.layers) {
    // llama.cpp sizes every layer's channel mix by the first layer's.
    if (layer.n_ff <= 0 || layer.n_ff != hp.layers.front().n_ff) {
      keys.invalid("feed_forward_length must be positive and the same for every layer");
    }
    layer = LayerSpec{.n_ff = layer.n_ff,
                      .rope = RopeSlot::none,
                      .state_width = rwkv_state_width(hp),
                      .recurrent = kind};
  }
}

int64_t positive_rank(const HParamReader& keys, std::string_view key) {
  const int64_t rank = keys.required_uint(key);
  if (rank <= 0 || rank > 65536) keys.invalid(std::string(key) + " must be 1 to 65536");
  return rank;
}

void read_rwkv6(const HParamReader& keys, ModelHParams& hp) {
  read_rwkv_common(keys, hp, RecurrentKind::rwkv6);
  hp.rwkv.mix_rank = positive_rank(keys, "time_mix_extra_dim");
  hp.rwkv.decay_rank = positive_rank(keys, "time_decay_extra_dim");
  hp.rwkv.rescale_every = keys.uint_or("rescale_every_n_layers", 0);
}

void read_rwkv7(const HParamReader& keys, ModelHParams& hp) {
  read_rwkv_common(keys, hp, RecurrentKind::rwkv7);
  auto& rk = hp.rwkv;
  rk.decay_rank = positive_rank(keys, "attention.decay_lora_rank");
  rk.iclr_rank = positive_rank(keys, "attention.iclr_lora_rank");
  rk.value_mix_rank = positive_rank(keys, "attention.value_residual_mix_lora_rank");
  // Optional in llama.cpp's reader, but its loader requires g1 and g2.
  rk.gate_rank = positive_rank(keys, "attention.gate_lora_rank");
}

// The converters' keys: no heads (head_count 0), layer norms, heads of 64.
void write_rwkv_common(const ModelGeometry& g, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "attention.head_count" || kv.key == p + "attention.head_count_kv") {
      kv.value = u32_value(0);
    }
  }
  keys.push_back({p + "attention.layer_norm_epsilon", gguf::Value(1e-5f)});
  keys.push_back({p + "wkv.head_size", u32_value(g.resolved_head_dim())});
}

// RWKV-6 1.6B's shape in small: heads of n_embd / n_head (64 in the real
// models), mix rank 32, decay rank 64, the residual halved every 2 layers
// (every 6 in the real ones).
void write_rwkv6(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_rwkv_common(g, "rwkv6", keys);
  keys.push_back({"rwkv6.time_mix_extra_dim", u32_value(32)});
  keys.push_back({"rwkv6.time_decay_extra_dim", u32_value(64)});
  keys.push_back({"rwkv6.rescale_every_n_layers", u32_value(2)});
}

// RWKV-7 0.1B's ranks: decay 64, in-context learning rate 64, value mix
// 32, gate 128.
void write_rwkv7(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_rwkv_common(g, "rwkv7", keys);
  keys.push_back({"rwkv7.attention.decay_lora_rank", u32_value(64)});
  keys.push_back({"rwkv7.attention.iclr_lora_rank", u32_value(64)});
  keys.push_back({"rwkv7.attention.value_residual_mix_lora_rank", u32_value(32)});
  keys.push_back({"rwkv7.attention.gate_lora_rank", u32_value(128)});
}

}  // namespace

const Family kRwkv6Family{.arch = "rwkv6",
                          .make = make_model<RwkvModel<Rwkv6TimeMixWeights>>,
                          .read_hparams = read_rwkv6,
                          .tensors = tensors_of<RwkvWeights<Rwkv6TimeMixWeights>>,
                          .write_hparams = write_rwkv6,
                          .layers_may_lack_parts = true};
const Family kRwkv7Family{.arch = "rwkv7",
                          .make = make_model<RwkvModel<Rwkv7TimeMixWeights>>,
                          .read_hparams = read_rwkv7,
                          .tensors = tensors_of<RwkvWeights<Rwkv7TimeMixWeights>>,
                          .write_hparams = write_rwkv7,
                          .layers_may_lack_parts = true};

}  // namespace cortiq
