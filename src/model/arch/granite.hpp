// llama.cpp's granite graph (granite.cpp), which it also runs MiniCPM on
// (minicpm.cpp): what a family on that graph shares.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.hpp"
#include "model/decoder_model.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/hparams.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq::granite_graph {

// Family::make and Family::tensors of the graph's model.
std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder);
std::vector<TensorSpec> tensors(const ModelHParams& hparams);

// What every family on the graph checks (a fully rotated head, equal K and V
// heads, the norm epsilon present) and its experts where the file has them;
// shared_expert: the width of a shared expert is read
// (expert_shared_feed_forward_length).
void check_common(const HParamReader& keys, ModelHParams& hp, bool shared_expert);
// hp.logit_scale = 1 / logit_scale (llama.cpp's ggml_scale); 0 is refused.
void set_logit_scale(const HParamReader& keys, ModelHParams& hp, float logit_scale);
// gen-model with --experts: expert_count and expert_used_count (4 and 2 by
// default), and with shared a shared expert n_ff wide.
void write_experts(const ModelGeometry& g, std::string_view arch, bool shared,
                   std::vector<gguf::KeyValue>& keys);

// Converted MoE checkpoints carry each expert's gate.
inline constexpr std::string_view kConverted[] = {"ffn_gate_exps.weight"};

}  // namespace cortiq::granite_graph
