// MiniCPM 1 / 2 (`minicpm`, MiniCPM-MoE with experts), which llama.cpp runs
// on the granite graph (granite.hpp): Llama's pre-norm decoder with an
// embedding scale, a residual scale on each branch and a logit scale.
// Defaults for older files: embedding 12, residual 1.4 / sqrt(n_layer),
// logit 256 / n_embd. Its attention is always scaled by 1/sqrt(head_dim)
// (llama.cpp's minicpm never reads attention.scale), RoPE always rotates,
// and its experts have no shared one.
#include <cmath>
#include <string>
#include <vector>

#include "model/arch/arch.hpp"
#include "model/arch/granite.hpp"

namespace cortiq {

namespace {

void read_minicpm(const HParamReader& keys, ModelHParams& hp) {
  granite_graph::check_common(keys, hp, /*shared_expert=*/false);
  hp.embedding_scale = keys.float_or("embedding_scale", 12.0f);
  hp.residual_scale =
      keys.float_or("residual_scale", 1.4f / std::sqrt(static_cast<float>(hp.n_layer)));
  granite_graph::set_logit_scale(
      keys, hp, keys.float_or("logit_scale", 256.0f / static_cast<float>(hp.n_embd)));
  hp.attention_scale = 0.0f;
}

// What MiniCPM's converter writes (scale_emb, scale_depth / sqrt(n_layer),
// dim_model_base / n_embd), MiniCPM-2B's values.
void write_minicpm(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  const std::string p = "minicpm.";
  keys.push_back({p + "embedding_scale", gguf::Value(12.0f)});
  keys.push_back({p + "residual_scale", gguf::Value(static_cast<float>(
                                            1.4 / std::sqrt(static_cast<double>(g.n_layer))))});
  keys.push_back({p + "logit_scale", gguf::Value(static_cast<float>(256.0 / g.n_embd))});
  if (g.n_expert > 0) granite_graph::write_experts(g, "minicpm", /*shared=*/false, keys);
}

}  // namespace

const Family kMinicpmFamily{.arch = "minicpm",
                            .neox_rope = false,
                            .make = granite_graph::make,
                            .read_hparams = read_minicpm,
                            .tensors = granite_graph::tensors,
                            .write_hparams = write_minicpm,
                            .converted_optional = granite_graph::kConverted};

}  // namespace cortiq
