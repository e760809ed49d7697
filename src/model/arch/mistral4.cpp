// Mistral Large 3 / Mistral 4 (`mistral4`): llama.cpp's deepseek2 under
// another name, run on the deepseek graph (deepseek.hpp): latent attention
// in the absorbed form, DeepSeek V3's experts with softmax routing, YaRN, and
// Llama 4's attention temperature on every layer's queries
// (attention.temperature_scale and _length).
#include <algorithm>
#include <string>
#include <vector>

#include "model/arch/arch.hpp"
#include "model/arch/deepseek.hpp"
#include "model/gen_model/arch_spec.hpp"

namespace cortiq {

namespace {

// Mistral Large 3 / Mistral 4, as llama.cpp's Mistral converter writes it:
// softmax routing, YaRN over the original context (its log multiplier
// written times 0.1) and the attention temperature stepping at that
// context. A short original context, so the goldens cross several steps,
// and a factor of 4 (Mistral's 32 sharpens the scores by YaRN's mscale^2 =
// 1.8, which moves the F16 files further from llama.cpp: see cases.tsv).
// The YaRN betas llama.cpp does not read for these files.
void write_mistral4(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  deepseek_graph::write_latent_moe(g, "mistral4", keys);
  const std::string p = "mistral4.";
  const int64_t original = std::min<int64_t>(g.n_ctx, 16);
  keys.push_back({p + "expert_gating_func", u32_value(1)});
  keys.push_back({p + "expert_weights_scale", gguf::Value(1.5f)});
  keys.push_back({p + "rope.scaling.type", gguf::Value(std::string("yarn"))});
  keys.push_back({p + "rope.scaling.factor", gguf::Value(4.0f)});
  keys.push_back({p + "rope.scaling.original_context_length", u32_value(original)});
  keys.push_back({p + "rope.scaling.yarn_log_multiplier", gguf::Value(0.1f)});
  keys.push_back({p + "rope.scaling.yarn_beta_fast", gguf::Value(8.0f)});
  keys.push_back({p + "attention.temperature_scale", gguf::Value(0.1f)});
  keys.push_back({p + "attention.temperature_length", u32_value(original)});
}

}  // namespace

const Family kMistral4Family{.arch = "mistral4",
                             .neox_rope = false,
                             .make = deepseek_graph::make,
                             .read_hparams = deepseek_graph::read_latent,
                             .tensors = deepseek_graph::tensors,
                             .write_hparams = write_mistral4};

}  // namespace cortiq
