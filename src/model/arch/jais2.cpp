// Inception's Jais-2 (`jais2`), which llama.cpp runs on the nemotron graph
// (nemotron.hpp): a pre-norm decoder with layer norms, NeoX RoPE over the
// whole head and an ungated squared-ReLU feed-forward. Unlike Nemotron every
// bias is required (Q/K/V always separate, their biases n_embd values each)
// and the output matrix is optional (tied).
#include <vector>

#include "model/arch/arch.hpp"
#include "model/arch/nemotron.hpp"
#include "model/gen_model/arch_spec.hpp"

namespace cortiq {

namespace {

void read_jais2(const HParamReader& keys, ModelHParams& hp) {
  nemotron_graph::read_common(keys, hp);
  // llama.cpp asserts a whole-head rotation, and its Q/K/V biases are n_embd wide.
  if (hp.rope.n_dims != hp.head_dim_k) keys.invalid("jais2 rotates the whole head");
  for (const LayerSpec& layer : hp.layers) {
    if (layer.q_width() != hp.n_embd || layer.k_width() != hp.n_embd) {
      keys.invalid("jais2 needs n_head * head_dim = n_head_kv * head_dim = n_embd");
    }
  }
}

// The layer norm epsilon; and, since llama.cpp's n_embd-wide K/V biases
// leave no room for grouped-query attention, as many KV heads as heads
// whatever the geometry asks.
void write_jais2(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back(
      {"jais2.attention.layer_norm_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == "jais2.attention.head_count_kv") {
      kv.value = u32_value(g.n_head);
    }
  }
}

}  // namespace

const Family kJais2Family{.arch = "jais2",
                          .neox_rope = true,
                          .make = nemotron_graph::make,
                          .read_hparams = read_jais2,
                          .tensors = nemotron_graph::tensors,
                          .write_hparams = write_jais2,
                          .fixed_head_dim = true};

}  // namespace cortiq
