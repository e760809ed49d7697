// Swiss AI's Apertus (`apertus`: Apertus-8B / 70B): Llama's card with RMS
// norms on Q and K and an ungated feed-forward whose activation is xIELU,
// with trained parameters per layer:
//
//   x = token_embd[token]
//   for each layer:
//     x += attention(rms_norm(x) * attn_norm)     GQA; Q, K: RMS norm per head
//                                                 (attn_{q,k}_norm), then RoPE
//                                                 (NeoX pairs, rope_freqs optional)
//     x += down(xielu_l(up(h))),  h = rms_norm(x) * ffn_norm
//   logits = output(rms_norm(x) * output_norm)    output.weight always its own
//
//   xielu_l(v) = alpha_p v² + beta v                        v > 0
//                (expm1(min(v, eps)) - v) alpha_n + beta v   otherwise
//   with alpha_p = softplus(xielu.alpha_p[l]), alpha_n = beta + softplus(xielu.alpha_n[l]),
//   beta = xielu.beta[l], eps = xielu.eps[l] (keys without the arch prefix,
//   required, one value per layer or one for all).
//
// llama.cpp reads optional attn_{q,k}_norm.bias but its graph passes none to
// the norms, so they change nothing; the optional attn_output.bias is
// applied. The scores are scaled by 1/sqrt(head size) (attention.scale is
// never read), the whole head is rotated, and the FFN scales are not applied
// (the graph multiplies ffn_up and ffn_down without them). LongRoPE factors
// (rope.scaling.type longrope) are refused with that scaling type.
#include <memory>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "kernels/cpu/activations.hpp"
#include "model/arch/arch.hpp"
#include "model/arch/family_support.hpp"
#include "model/arch/pre_norm_layer.hpp"
#include "model/blocks/attention.hpp"
#include "model/blocks/embedding.hpp"
#include "model/blocks/ffn.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/rope_setup.hpp"
#include "model/weights.hpp"

namespace cortiq {

namespace {

constexpr const char* kXieluKeys[] = {"xielu.alpha_n", "xielu.alpha_p", "xielu.beta", "xielu.eps"};

// One value per layer of a key without the arch prefix (llama.cpp's
// get_key_or_arr, required): an f32 array of n_layer values, or one number
// for every layer.
std::vector<float> per_layer_float(const HParamReader& keys, const char* key, int64_t n_layer) {
  const gguf::Value* value = keys.file().find(key);
  if (value == nullptr) keys.invalid(strfmt("missing key %s", key));
  const auto n = static_cast<size_t>(n_layer);
  if (const gguf::Array* array = value->as_array()) {
    const auto* floats = array->as<float>();
    if (floats == nullptr || floats->size() != n) {
      keys.invalid(strfmt("%s must hold %zu f32 values, one per layer", key, n));
    }
    return *floats;
  }
  const std::optional<double> one = value->as_double();
  if (!one) keys.invalid(strfmt("%s is not a number", key));
  return std::vector<float>(n, static_cast<float>(*one));
}

struct ApertusWeights {
  TokenEmbedding embedding;
  OutputHead head;
  RopeTables rope;
  std::vector<PreNormLayer> layers;

  void visit(TensorVisitor& v, const ModelHParams& hp) {
    embedding.visit(v, hp);
    head.visit(v, hp, embedding, OutputMatrix::own);
    rope.visit(v, hp);
    for (int64_t il = 0; il < hp.n_layer; ++il) {
      layers.emplace_back().visit(
          v, hp, il, {.output_bias = AttnOutputBias::optional, .qk_norm = QkNorm::required},
          {.gated = false, .scales_applied = false});
      for (const char* bias : {"attn_q_norm.bias", "attn_k_norm.bias"}) {
        v.without_effect(layer_tensor_name(il, bias), hp.layer(il).head_dim_k, TensorKind::bias);
      }
    }
  }
};

class ApertusModel final : public DecoderModel {
 public:
  ApertusModel(ModelHParams hp, WeightBinder& binder) : DecoderModel(std::move(hp), binder) {
    w_.visit(binder, hparams_);
    w_.rope.setup(hparams_);
    // ModelHParams has no slot for them: read here (read_apertus checked them).
    const HParamReader keys(binder.file(), hparams_.arch);
    std::vector<std::vector<float>> values;
    for (const char* key : kXieluKeys)
      values.push_back(per_layer_float(keys, key, hparams_.n_layer));
    for (size_t il = 0; il < w_.layers.size(); ++il) {
      w_.layers[il].ffn.xielu =
          kernels::xielu_params(values[0][il], values[1][il], values[2][il], values[3][il]);
    }
  }

 private:
  void run_layers(std::span<const BatchRow> rows, std::span<const int32_t> cells, KvCache& cache,
                  ForwardContext& ctx, std::span<float> logits) const override {
    run_pre_norm_layers(w_, hparams_, rows, cells, cache, ctx, logits, FfnActivation::xielu);
  }

  ApertusWeights w_;
};

void read_apertus(const HParamReader& keys, ModelHParams& hp) {
  read_whole_rotation_hparams(keys, hp);
  for (const char* key : kXieluKeys) per_layer_float(keys, key, hp.n_layer);
}

// The converter writes each layer's trained xIELU parameters as arrays;
// these are near Apertus-8B's (softplus^-1(0.8) for both alphas, beta 0.5,
// eps -1e-6), varied by layer so that each layer reads its own.
void write_apertus(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const auto array = [&](float first, float step) {
    gguf::Array values = gguf::Array::of(gguf::ValueType::f32);
    auto& items = std::get<std::vector<float>>(values.items);
    for (int64_t il = 0; il < g.n_layer; ++il) {
      items.push_back(first + step * static_cast<float>(il));
    }
    return gguf::Value(std::move(values));
  };
  keys.push_back({"xielu.alpha_n", array(0.2f, -0.3f)});
  keys.push_back({"xielu.alpha_p", array(0.3f, 0.2f)});
  keys.push_back({"xielu.beta", array(0.5f, 0.0f)});
  keys.push_back({"xielu.eps", array(-1e-6f, 0.0f)});
}

constexpr std::string_view kApertusOptional[] = {"rope_freqs.weight"};

}  // namespace

const Family kApertusFamily{.arch = "apertus",
                            .neox_rope = true,
                            .make = make_model<ApertusModel>,
                            .read_hparams = read_apertus,
                            .tensors = tensors_of<ApertusWeights>,
                            .write_hparams = write_apertus,
                            .converted_optional = kApertusOptional};

}  // namespace cortiq
