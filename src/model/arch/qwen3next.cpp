// Alibaba's hybrid Qwen models: Qwen3-Next (`qwen3next`: 80B-A3B), Qwen3.5
// (`qwen35`: 0.8B ... 27B) and Qwen3.5-MoE (`qwen35moe`: 35B-A3B ...
// 397B-A17B). Three layers in four are Gated DeltaNet linear attention
// (blocks/gated_delta_net.hpp), the fourth full attention:
//
//   x = token_embd[token]
//   for each layer:
//     h  = rms_norm(x) * attn_norm
//     x += recurrent ? gated_delta_net(h)
//                    : attention(h)     q | gate = attn_q · h per head; per-head
//                                       Q/K RMS norms, NeoX RoPE over
//                                       rope.dimension_count, scores by
//                                       attention.scale (0: 1/sqrt(head size)),
//                                       the output times sigmoid(gate)
//     h  = rms_norm(x) * post_attention_norm
//     x += qwen35: down(silu(gate(h)) * up(h))
//          else  : moe(h) + sigmoid(ffn_gate_inp_shexp · h) * shared(h)
//                  (softmax routing, renormalized)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// A layer is recurrent as attention.recurrent_layers says, or else unless
// (layer + 1) is a multiple of full_attention_interval (default 4).
// Qwen3.5 turns its heads with interleaved M-RoPE (rope.dimension_sections,
// required), which for text is NeoX RoPE but for the extra section's pairs.
// The three differ in their Gated DeltaNet tensors too (GatedDeltaNetTensors).
// Multi-token-prediction layers (nextn_predict_layers, one full-attention
// layer each) are bound and checked, not run, as llama.cpp without a draft.
#include <memory>

#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/recurrent_layers.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/gated_delta_net.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/nextn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

bool is_qwen35(const ModelHParams& hp) {
  return hp.arch == "qwen35";
}
bool is_qwen35_family(const ModelHParams& hp) {
  return hp.arch == "qwen35" || hp.arch == "qwen35moe";
}

struct Qwen3NextLayer {
  std::vector<float> attn_norm, post_norm;
  GatedDeltaNetWeights linear;  // recurrent layers
  AttentionWeights attn;        // the others
  FfnWeights ffn;               // qwen35
  MoeWeights moe;               // qwen3next, qwen35moe
  NextnTensors nextn;           // MTP layers only

  void visit(TensorVisitor& v, const ModelHParams& hp, int64_t il) {
    v.vector(attn_norm, layer_tensor_name(il, "attn_norm.weight"), hp.n_embd, TensorKind::norm);
    v.vector(post_norm, layer_tensor_name(il, "post_attention_norm.weight"), hp.n_embd,
             TensorKind::norm);
    if (hp.layer(il).is_recurrent()) {
      linear.visit(v, hp, il, {.qwen35 = is_qwen35_family(hp)});
    } else {
      attn.visit(v, hp, il, {.qk_norm = QkNorm::required, .gate = OutputGate::sigmoid_query});
    }
    if (is_qwen35(hp)) {
      ffn.visit(v, hp, il, {});
    } else {
      moe.visit(v, hp, il,
                {.scales_applied = true,
                 .shared_expert = SharedExpert::gated,
                 .shared_scales_applied = true,
                 .fused_gate_up = true});
    }
  }
};

struct Qwen3NextWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<Qwen3NextLayer> layers;
  std::vector<Qwen3NextLayer> mtp;  // bound, not run

  // As llama.cpp's loaders of the three.
  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) layers.emplace_back().visit(v, hp, il);
    // llama.cpp skips the MTP layers without a draft: a file may leave them out.
    visit_mtp_layers(v, hp, /*required=*/false,
                     [&](TensorVisitor& mtp_v, const ModelHParams& all, int64_t il) {
                       Qwen3NextLayer& layer = mtp.emplace_back();
                       layer.visit(mtp_v, all, il);
                       layer.nextn.visit(mtp_v, hp, il);
                     });
  }
};

class Qwen3NextModel final : public FamilyModel<Qwen3NextWeights> {
 public:
  using FamilyModel::FamilyModel;

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    const auto& h = hparams_;
    const auto n = static_cast<int64_t>(rows.size());
    const LayerStream s = start_layers(h, rows, cells, ctx, w_.embedding, w_.rope);
    for (const int64_t il : ctx.stage.layers()) {
      const Qwen3NextLayer& layer = w_.layers[static_cast<size_t>(il)];
      rms_norm(ctx, h, s.x, layer.attn_norm, s.normed);
      if (h.layer(il).is_recurrent()) {
        gated_delta_net(layer.linear, h, il, rows, cache, ctx, s.normed, s.branch);
      } else {
        attention(layer.attn, h, il, s.pass, cache, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
      rms_norm(ctx, h, s.x, layer.post_norm, s.normed);
      if (is_qwen35(h)) {
        ffn(layer.ffn, FfnActivation::swiglu, h, il, n, ctx, s.normed, s.branch);
      } else {
        moe_ffn(layer.moe, h, il, n, ctx, s.normed, s.branch);
      }
      ctx.backend.add(s.x, s.branch);
    }
    w_.head.apply(h, rows, s.x, ctx, logits);
  }
};

void read_qwen3next_layers(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  read_gated_delta_net_hparams(keys, hp);
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  const int64_t n_all = std::ssize(hp.layers);
  const std::vector<bool> recurrent =
      recurrent_layers(keys, hp.n_layer, n_all, /*default_interval=*/4);
  for (int64_t il = 0; il < n_all; ++il) {
    LayerSpec& layer = hp.layers[static_cast<size_t>(il)];
    if (!recurrent[static_cast<size_t>(il)]) continue;
    if (il >= hp.n_layer) keys.invalid("a multi-token-prediction layer cannot be recurrent");
    layer.n_head = 0;
    layer.n_head_kv = 0;
    layer.rope = RopeSlot::none;
    layer.state_width = gated_delta_net_state_width(hp);
    layer.recurrent = RecurrentKind::gated_delta_net;
  }
}

// The experts of qwen3next and qwen35moe: softmax routing renormalized, a
// gated shared expert expert_shared_feed_forward_length (or n_ff) wide.
void read_qwen3next_experts(const HParamReader& keys, ModelHParams& hp) {
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/true);
  hp.router.gating = RouterGating::softmax;
  hp.router.normalize = true;
}

// Qwen3.5's interleaved M-RoPE sections, required (llama.cpp's loader).
void read_qwen35_sections(const HParamReader& keys, ModelHParams& hp) {
  keys.require("rope.dimension_sections");
  const auto sections = keys.per_layer_uint("rope.dimension_sections", 4, 0);
  int64_t sum = 0;
  for (size_t i = 0; i < 4; ++i) {
    hp.rope.mrope_sections[i] = static_cast<int32_t>(sections[i]);
    sum += sections[i];
  }
  // What ggml asserts (as for Qwen3-VL): a section among the first three,
  // at most a head's width in all.
  if (sections[0] + sections[1] + sections[2] == 0 || sum > hp.head_dim_k) {
    keys.invalid("rope.dimension_sections must share at most a head among t, h, w (and e)");
  }
  hp.rope.mrope_interleaved = true;
  hp.rope_local = hp.rope;
}

void read_qwen3next(const HParamReader& keys, ModelHParams& hp) {
  read_qwen3next_layers(keys, hp);
  if (keys.uint_or("expert_count", 0) == 0) keys.invalid("qwen3next needs experts");
  read_qwen3next_experts(keys, hp);
}

void read_qwen35(const HParamReader& keys, ModelHParams& hp) {
  read_qwen3next_layers(keys, hp);
  read_qwen35_sections(keys, hp);
}

void read_qwen35moe(const HParamReader& keys, ModelHParams& hp) {
  read_qwen3next_layers(keys, hp);
  read_qwen35_sections(keys, hp);
  read_qwen3next_experts(keys, hp);
}

// Qwen3-Next-80B-A3B's shape in small: a quarter of each head rotated,
// every third layer full attention, Gated DeltaNet layers of heads of 16
// with two value heads per key head, four experts (two per token) n_ff wide
// and a shared one, one MTP layer.
void write_qwen3next_layers(const ModelGeometry& g, std::string_view arch,
                            std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  const int64_t n_value_heads =
      g.ssm_heads > 0 ? g.ssm_heads : 2 * std::max<int64_t>(1, g.n_embd / 128);
  const int64_t n_key_heads =
      g.ssm_groups > 0 ? g.ssm_groups : std::max<int64_t>(1, n_value_heads / 2);
  const int64_t d_state = g.ssm_state > 0 ? g.ssm_state : 16;
  keys.push_back({p + "ssm.conv_kernel", u32_value(4)});
  keys.push_back({p + "ssm.state_size", u32_value(d_state)});
  keys.push_back({p + "ssm.group_count", u32_value(n_key_heads)});
  keys.push_back({p + "ssm.time_step_rank", u32_value(n_value_heads)});
  keys.push_back({p + "ssm.inner_size", u32_value(n_value_heads * d_state)});
  keys.push_back({p + "full_attention_interval", u32_value(3)});
  const int64_t head_dim = g.resolved_head_dim();
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "rope.dimension_count")
      kv.value = u32_value(std::max<int64_t>(2, head_dim / 4));
  }
  write_mtp_layer(g, arch, keys);
}

void write_experts(const ModelGeometry& g, std::string_view arch,
                   std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  write_expert_counts(g, arch, keys);
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  keys.push_back({p + "expert_shared_feed_forward_length", u32_value(g.n_ff)});
}

// Qwen3.5's sections ([11, 11, 10, 0] of 32 pairs), in proportion.
void write_qwen35_sections(const ModelGeometry& g, std::string_view arch,
                           std::vector<gguf::KeyValue>& keys) {
  const int64_t pairs = std::max<int64_t>(2, g.resolved_head_dim() / 4) / 2;
  gguf::Array sections = gguf::Array::of(gguf::ValueType::i32);
  auto& items = std::get<std::vector<int32_t>>(sections.items);
  const int64_t t = pairs * 11 / 32, h = pairs * 11 / 32;
  items = {static_cast<int32_t>(t), static_cast<int32_t>(h), static_cast<int32_t>(pairs - t - h),
           0};
  keys.push_back(
      {std::string(arch) + ".rope.dimension_sections", gguf::Value(std::move(sections))});
}

void write_qwen3next(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_qwen3next_layers(g, "qwen3next", keys);
  write_experts(g, "qwen3next", keys);
}

void write_qwen35(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_qwen3next_layers(g, "qwen35", keys);
  write_qwen35_sections(g, "qwen35", keys);
}

void write_qwen35moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_qwen3next_layers(g, "qwen35moe", keys);
  write_qwen35_sections(g, "qwen35moe", keys);
  write_experts(g, "qwen35moe", keys);
}

}  // namespace

const Family kQwen3NextFamily{.arch = "qwen3next",
                              .neox_rope = true,
                              .make = make_model<Qwen3NextModel>,
                              .read_hparams = read_qwen3next,
                              .tensors = tensors_of<Qwen3NextWeights>,
                              .write_hparams = write_qwen3next,
                              .mtp_layers = true};
const Family kQwen35Family{.arch = "qwen35",
                           .neox_rope = true,
                           .make = make_model<Qwen3NextModel>,
                           .read_hparams = read_qwen35,
                           .tensors = tensors_of<Qwen3NextWeights>,
                           .write_hparams = write_qwen35,
                           .mtp_layers = true};
const Family kQwen35MoeFamily{.arch = "qwen35moe",
                              .neox_rope = true,
                              .make = make_model<Qwen3NextModel>,
                              .read_hparams = read_qwen35moe,
                              .tensors = tensors_of<Qwen3NextWeights>,
                              .write_hparams = write_qwen35moe,
                              .mtp_layers = true};

}  // namespace cortiq
