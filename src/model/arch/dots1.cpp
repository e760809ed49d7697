// rednote's dots.llm1 (`dots1`), which llama.cpp runs on the deepseek graph
// (deepseek.hpp): DeepSeek V3's experts (a leading dense layer, a shared
// expert, the router as deepseek2's, the gating key required: llama.cpp has
// no default for dots1) under plain attention with per-head Q/K RMS norms
// and NeoX RoPE; the output matrix its own.
#include <optional>
#include <vector>

#include "model/arch/arch.hpp"
#include "model/arch/deepseek.hpp"
#include "model/arch/family_support.hpp"
#include "model/blocks/moe.hpp"
#include "model/gen_model/arch_spec.hpp"

namespace cortiq {

namespace {

void read_dots1(const HParamReader& keys, ModelHParams& hp) {
  deepseek_graph::read_common(keys, hp);
  hp.router.gating = read_expert_gating(keys, std::nullopt);
  hp.router.normalize = keys.bool_or("expert_weights_norm", false);
  // llama.cpp's dots1 graph: heads rope.dimension_count wide, keys and
  // values, scores scaled by 1/sqrt(head size).
  require_whole_rotation(keys, hp);
  // llama.cpp shapes K and V as n_head heads: no grouped-query attention.
  for (const LayerSpec& layer : hp.layers) {
    if (layer.n_head_kv != layer.n_head) keys.invalid("dots1 needs one KV head per head");
  }
  hp.attention_scale = 0.0f;
}

// dots.llm1's routing: sigmoid, renormalized, scaled by 2.5; one KV head
// per head.
void write_dots1(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "dots1.attention.head_count_kv") kv.value = u32_value(g.n_head);
  }
  deepseek_graph::write_experts(g, "dots1", keys);
  keys.push_back({"dots1.expert_gating_func", u32_value(2)});
  keys.push_back({"dots1.expert_weights_norm", gguf::Value(true)});
  keys.push_back({"dots1.expert_weights_scale", gguf::Value(2.5f)});
}

}  // namespace

const Family kDots1Family{.arch = "dots1",
                          .neox_rope = true,
                          .make = deepseek_graph::make,
                          .read_hparams = read_dots1,
                          .tensors = deepseek_graph::tensors,
                          .write_hparams = write_dots1,
                          .converted_optional = deepseek_graph::kConverted};

}  // namespace cortiq
