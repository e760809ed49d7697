// Zhipu's GLM-4.5 / GLM-4.5-Air / GLM-4.6 / GLM-4.7 (`glm4moe`) and Ling 2
// (`bailingmoe2`): a pre-norm decoder whose layers after the first few have
// a mixture of experts with DeepSeek V3's routing:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     Q/K/V biases, optional per-head
//                                                 Q/K RMS norms before RoPE;
//                                                 NeoX RoPE on part of each head
//     h  = rms_norm(x) * post_attention_norm
//     x += layer < leading_dense_block_count ? ffn(h)         dense SwiGLU, n_ff wide
//                                            : moe(h) + shared(h)
//   logits = output(rms_norm(x) * output_norm)    output = token_embd if absent
//
// The router as the file says (llama.cpp's defaults: sigmoid gating, no
// renormalization, no scale): the correction bias exp_probs_b (required)
// chooses the experts; the shared expert is expert_shared_count experts
// wide and always on. Scores are scaled by 1/sqrt(head size) whatever
// attention.scale says. With rope.dimension_sections whose first two are
// set (GLM-4.5V) llama.cpp runs M-RoPE: for text, NeoX RoPE with the extra
// section's pairs unturned.
//
// Tencent's HY V3 (`hy_v3`) is the same layer (ffn_norm, per-head Q/K norms
// required, Q/K/V biases optional) with every scale applied and its dense
// layers found by the file's routers (read_hy_v3).
// Ant Group's Ling 2 (`bailingmoe2`) is the same layer (its FFN norm
// ffn_norm) with one fused Q/K/V projection (no bias), required per-head
// Q/K norms, an optional correction bias, the gating and shared experts as
// read_bailingmoe2 says, the output matrix its own; its MTP layers (each
// with a layer_output_norm) must be in the file.
//
// Multi-token prediction: block_count counts the trunk and the
// nextn_predict_layers MTP layers after it (one on GLM-4.5). Each is a full
// layer plus its nextn.* tensors (blocks/nextn.hpp), bound and checked; the
// trunk never runs them. GLM-4.5's first one drafts for speculative
// decoding (Glm4MoeModel::run_mtp, MtpDrafter), as llama.cpp's draft-mtp.
// A file whose MTP layers were left out (no blk.N.nextn.eh_proj) runs the
// trunk the same.
#include <algorithm>
#include <iterator>
#include <memory>

#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/matmul.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/ffn.hpp"
#include "model/blocks/moe.hpp"
#include "model/blocks/nextn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

bool is_bailing(const ModelHParams& hp) {
  return hp.arch == "bailingmoe2";
}

// What each family's layer reads, as llama.cpp's loader for it.
struct LayerTensors {
  AttentionTensors attention;
  MoeTensors experts;
  std::string_view ffn_norm;
  FfnTensors dense = {.scales_applied = false};
};

LayerTensors layer_tensors(const ModelHParams& hp) {
  if (hp.arch == "hy_v3") {
    return {{.qk_norm = QkNorm::required},
            {.scales_applied = true,
             .shared_expert = SharedExpert::always,
             .shared_scales_applied = true,
             .selection_bias = true,
             .selection_bias_name = "exp_probs_b",
             .fused_gate_up = true},
            "ffn_norm.weight",
            {}};
  }
  if (is_bailing(hp)) {
    return {
        {.qkv = QkvForm::fused, .fused_qkv_bias = FusedQkvBias::none, .qk_norm = QkNorm::required},
        {.shared_expert = SharedExpert::always, .selection_bias = true},
        "ffn_norm.weight"};
  }
  return {{.qk_norm = QkNorm::optional},
          {.shared_expert = SharedExpert::always, .selection_bias_required = true},
          "post_attention_norm.weight"};
}

struct MtpLayer {
  PreNormMoeLayer block;
  NextnTensors nextn;
  std::vector<float> output_norm;  // bailingmoe2's layer_output_norm
};

struct Glm4MoeWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormMoeLayer> layers;
  std::vector<MtpLayer> mtp;  // not run by the trunk (glm4moe: drafts)
  // hy_v3: dense FFN tensors beside a layer's experts, which llama.cpp
  // loads (every FFN tensor is optional to it) and its graph never runs.
  std::vector<FfnWeights> unused_dense;

  void visit_unused_dense(TensorVisitor& v, const ModelHParams& hp, int64_t il) {
    if (hp.arch != "hy_v3" || !hp.layer_has_experts(il)) return;
    if (!v.has(layer_tensor_name(il, "ffn_up.weight"), /*written=*/false)) return;
    unused_dense.emplace_back().visit(v, hp, il, {.scales_applied = false});
  }

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    const LayerTensors t = layer_tensors(hp);
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, is_bailing(hp) ? OutputMatrix::own : OutputMatrix::own_or_tied);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(v, hp, il, t.attention, t.experts, t.ffn_norm, t.dense);
      visit_unused_dense(v, hp, il);
    }
    // glm4moe, hy_v3: a file without its MTP layers runs (llama.cpp's
    // trunk_only); bailingmoe2's loader requires them.
    visit_mtp_layers(
        v, hp, /*required=*/is_bailing(hp),
        [&](TensorVisitor& mtp_v, const ModelHParams& all, int64_t il) {
          MtpLayer& layer = mtp.emplace_back();
          layer.block.visit(mtp_v, all, il, t.attention, t.experts, t.ffn_norm, t.dense);
          layer.nextn.visit(mtp_v, hp, il);
          visit_unused_dense(mtp_v, all, il);
          if (is_bailing(hp)) {
            mtp_v.vector(layer.output_norm, layer_tensor_name(il, "layer_output_norm.weight"),
                         hp.n_embd, TensorKind::norm, true);
          }
        });
  }
};

// GLM-4.5 with its MTP layer run for speculative drafting (llama.cpp's
// graph_mtp of glm4-moe.cpp):
//
//   x = eh_proj · [rms_norm(e) * enorm ; rms_norm(h) * hnorm]
//       e = (nextn.embed_tokens or token_embd)[x_p], h = the trunk's
//       final-normed hidden state at p - 1
//   x = the layer (attention over the MTP layer's own cache, experts and
//       the shared expert) as a trunk layer
//   h' = rms_norm(x) * (shared_head_norm or output_norm)
//   logits = (shared_head_head or output) · h'
class Glm4MoeModel final : public FamilyModel<Glm4MoeWeights> {
 public:
  Glm4MoeModel(ModelHParams hparams, WeightBinder& binder)
      : FamilyModel<Glm4MoeWeights>(std::move(hparams), binder),
        with_mtp_(hparams_.with_mtp_layers()) {
    if (has_mtp()) {
      const NextnTensors& nextn = w_.mtp.front().nextn;
      mtp_embedding_.table = nextn.embed_tokens.empty() ? w_.embedding.table : nextn.embed_tokens;
    }
  }

  bool has_mtp() const override { return hparams_.arch == "glm4moe" && !w_.mtp.empty(); }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits);
  }

  void run_mtp(std::span<const BatchRow> rows, std::span<const int32_t> cells,
               std::span<const float> h_in, KvCache& cache, ForwardContext& ctx,
               std::span<float> h_out, std::span<float> logits) const override {
    const ModelHParams& hp = with_mtp_;
    const MtpLayer& layer = w_.mtp.front();
    const int64_t il = hparams_.n_layer;
    const auto n = static_cast<int64_t>(rows.size());
    const auto width = static_cast<size_t>(hp.n_embd);
    auto& buf = ctx.buffers;
    const LayerStream s = start_layers(hp, rows, cells, ctx, mtp_embedding_, w_.rope);
    const auto input = ForwardBuffers::take(buf.mtp_input, rows.size() * 2 * width);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto row = input.subspan(r * 2 * width, 2 * width);
      rms_norm(ctx, hp, s.x.subspan(r * width, width), layer.nextn.enorm, row.first(width));
      rms_norm(ctx, hp, h_in.subspan(r * width, width), layer.nextn.hnorm, row.last(width));
    }
    ctx.backend.matmul(layer.nextn.eh_proj, input, n, s.x, hp.n_embd);
    layer.block.run(hp, il, s, cache, ctx);
    if (layer.nextn.shared_head_norm.empty()) {
      for (size_t r = 0; r < rows.size(); ++r) {
        w_.head.norm.apply(ctx, s.x.subspan(r * width, width), h_out.subspan(r * width, width));
      }
    } else {
      rms_norm(ctx, hp, s.x, layer.nextn.shared_head_norm, h_out);
    }
    size_t n_out = 0;
    for (const auto& row : rows) n_out += row.logits ? 1 : 0;
    if (n_out == 0) return;
    const auto normed = ForwardBuffers::take(buf.normed, n_out * width);
    size_t k = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (!rows[r].logits) continue;
      std::ranges::copy(h_out.subspan(r * width, width), normed.subspan(k++ * width).begin());
    }
    const kernels::WeightView& head =
        layer.nextn.shared_head_head.empty() ? w_.head.output : layer.nextn.shared_head_head;
    ctx.backend.matmul(head, normed, static_cast<int64_t>(n_out),
                       logits.first(n_out * static_cast<size_t>(hp.n_vocab)), hp.n_vocab);
  }

  ModelHParams with_mtp_;         // the trunk's layers and the MTP layers
  TokenEmbedding mtp_embedding_;  // nextn.embed_tokens, or the trunk's table
};

// Ling 2 (Ling-mini-2.0, Ling-flash-2.0, Ring): the expert_shared_count
// shared experts expert_shared_feed_forward_length wide each (or as the
// routed ones), the gating as the file says (required), the head's Q as
// wide as n_embd.
void read_bailingmoe2(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  const int64_t n_shared = keys.required_uint("expert_shared_count");
  if (n_shared <= 0) keys.invalid("expert_shared_count must be positive");
  const int64_t shared_width = keys.uint_or("expert_shared_feed_forward_length", 0);
  hp.n_ff_shared_expert = (shared_width > 0 ? shared_width : hp.n_ff_expert) * n_shared;
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
}

// Tencent's HY V3 (Hunyuan-A3B-30B): llama.cpp's loader takes every FFN
// tensor as optional and its graph runs experts where ffn_gate_inp is, a
// dense SwiGLU elsewhere; here the leading layers without a router are the
// dense ones and every later one must have experts. The experts
// expert_feed_forward_length wide (or n_ff / expert_used_count), the
// shared expert expert_shared_feed_forward_length (or as the experts);
// every scale applied.
void read_hy_v3(const HParamReader& keys, ModelHParams& hp) {
  read_whole_rotation_hparams(keys, hp);
  keys.require("expert_feed_forward_length");
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  const int64_t shared_width = keys.uint_or("expert_shared_feed_forward_length", 0);
  hp.n_ff_shared_expert = shared_width > 0 ? shared_width : hp.n_ff_expert;
  hp.router.gating = read_expert_gating(keys, RouterGating::sigmoid);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
  hp.n_layer_dense_lead = dense_lead_from_routers(keys, std::ssize(hp.layers));  // trunk and MTP
}

void read_glm4moe(const HParamReader& keys, ModelHParams& hp) {
  keys.require("attention.layer_norm_rms_epsilon");
  keys.require("expert_feed_forward_length");
  if (hp.head_dim_k != hp.head_dim_v) keys.invalid("key and value heads must be as wide");
  hp.attention_scale = 0.0f;
  hp.n_layer_dense_lead = keys.uint_or("leading_dense_block_count", 0);
  read_expert_hparams(keys, hp, /*width_key=*/true, /*shared_expert=*/false);
  // llama.cpp's graph adds the shared expert whatever its count; with none
  // its FFN of missing matrices would add silu(h).
  const int64_t n_shared = keys.required_uint("expert_shared_count");
  if (n_shared <= 0) keys.invalid("expert_shared_count must be positive");
  hp.n_ff_shared_expert = hp.n_ff_expert * n_shared;
  hp.router.gating = read_expert_gating(keys, RouterGating::sigmoid);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  hp.router.scale = keys.float_or("expert_weights_scale", 0.0f);
  if (keys.has("rope.dimension_sections")) {
    const auto sections = keys.per_layer_uint("rope.dimension_sections", 4, 0);
    if (sections[0] > 0 && sections[1] > 0) {
      for (size_t i = 0; i < 4; ++i) hp.rope.mrope_sections[i] = static_cast<int32_t>(sections[i]);
      hp.rope_local = hp.rope;
    }
  }
}

// What the three write alike: one MTP layer, the first layer dense (hy_v3:
// by its routers), four experts n_ff wide (two per token), sigmoid gating
// renormalized and scaled by `scale`.
void write_sigmoid_experts(const ModelGeometry& g, std::string_view arch, float scale,
                           std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  write_mtp_layer(g, arch, keys);
  if (arch != "hy_v3") keys.push_back({p + "leading_dense_block_count", u32_value(1)});
  keys.push_back({p + "expert_feed_forward_length", u32_value(g.n_ff)});
  write_expert_counts(g, arch, keys);
  keys.push_back({p + "expert_gating_func", u32_value(2)});
  keys.push_back({p + "expert_weights_norm", gguf::Value(true)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(scale)});
}

// GLM-4.5-Air's shape in small: half of each head rotated, one shared
// expert, routing scaled by 2.5 (GLM-4.5's routed scaling factor).
void write_glm4moe(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_half_rotary(g, "glm4moe", keys);
  write_sigmoid_experts(g, "glm4moe", 2.5f, keys);
  keys.push_back({"glm4moe.expert_shared_count", u32_value(1)});
}

// Ling-mini-2.0's shape in small: half of each head rotated, two expert
// groups of which one is used, one shared expert.
void write_bailingmoe2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_half_rotary(g, "bailingmoe2", keys);
  write_sigmoid_experts(g, "bailingmoe2", 2.5f, keys);
  keys.push_back({"bailingmoe2.expert_group_count", u32_value(2)});
  keys.push_back({"bailingmoe2.expert_group_used_count", u32_value(1)});
  keys.push_back({"bailingmoe2.expert_shared_count", u32_value(1)});
}

// HY V3's shape in small: a shared expert half as wide, no routing scale.
void write_hy_v3(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  write_sigmoid_experts(g, "hy_v3", 1.0f, keys);
  keys.push_back({"hy_v3.expert_shared_feed_forward_length", u32_value(g.n_ff / 2)});
}

// GLM-4.5's checkpoints have Q/K/V biases.
constexpr std::string_view kGlm4MoeOptional[] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};

}  // namespace

const Family kGlm4MoeFamily{.arch = "glm4moe",
                            .neox_rope = true,
                            .make = make_model<Glm4MoeModel>,
                            .read_hparams = read_glm4moe,
                            .tensors = tensors_of<Glm4MoeWeights>,
                            .write_hparams = write_glm4moe,
                            .mtp_layers = true,
                            .converted_optional = kGlm4MoeOptional};

// llama.cpp shapes bailingmoe2's attn_qkv with n_embd query rows and its
// attn_output by n_embd: heads must tile n_embd.
const Family kBailingMoe2Family{.arch = "bailingmoe2",
                                .neox_rope = true,
                                .make = make_model<PreNormModel<Glm4MoeWeights>>,
                                .read_hparams = read_bailingmoe2,
                                .tensors = tensors_of<Glm4MoeWeights>,
                                .write_hparams = write_bailingmoe2,
                                .fixed_head_dim = true,
                                .mtp_layers = true};

const Family kHyV3Family{.arch = "hy_v3",
                         .neox_rope = true,
                         .make = make_model<PreNormModel<Glm4MoeWeights>>,
                         .read_hparams = read_hy_v3,
                         .tensors = tensors_of<Glm4MoeWeights>,
                         .write_hparams = write_hy_v3,
                         .mtp_layers = true};

}  // namespace cortiq
