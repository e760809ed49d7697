// LG's EXAONE 4.0 (`exaone4`), which llama.cpp runs on the olmo2 graph
// (olmo2.hpp): post-norm residuals, RMS norms on Q and K per head before
// RoPE, NeoX RoPE and SwiGLU. Unlike OLMo 2 its output may be tied and its
// Q/K/V carry their biases and scales. The 64-layer model (32B) has
// 4096-position windows, three local layers per global one, and its global
// layers use no RoPE at all.
#include <vector>

#include "model/arch/arch.hpp"
#include "model/arch/olmo2.hpp"
#include "model/gen_model/arch_spec.hpp"

namespace cortiq {

namespace {

void read_exaone4(const HParamReader& keys, ModelHParams& hp) {
  olmo2_graph::read_common(keys, hp);
  // Only the 64-layer model (EXAONE 4.0 32B) has windows, as llama.cpp decides.
  if (hp.n_layer == 64) {
    hp.sliding_window = keys.uint_or("attention.sliding_window", 4096);
    if (hp.sliding_window == 0) keys.invalid("attention.sliding_window must be positive");
    // Local layers use the model's RoPE (the graph's freq_base, freq_scale
    // and rope_freqs); global layers none.
    set_sliding_window_pattern(hp, hp.sliding_window, olmo2_graph::window_period(keys),
                               RopeSlot::global);
    for (LayerSpec& layer : hp.layers) {
      if (layer.window == 0) layer.rope = RopeSlot::none;
    }
  }
}

// EXAONE 4.0's converter writes the window (the 32B's 4096; here shorter
// than the golden sequences) whatever the layer count.
void write_exaone4(const ModelGeometry& g, std::vector<gguf::KeyValue>& keys) {
  keys.push_back({"exaone4.attention.sliding_window", u32_value(g.resolved_sliding_window())});
}

}  // namespace

const Family kExaone4Family{.arch = "exaone4",
                            .neox_rope = true,
                            .make = olmo2_graph::make,
                            .read_hparams = read_exaone4,
                            .tensors = olmo2_graph::tensors,
                            .write_hparams = write_exaone4,
                            .fixed_head_dim = true};

}  // namespace cortiq
