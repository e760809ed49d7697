// llama.cpp's deepseek graph (deepseek.cpp: deepseek and deepseek2), which
// it also runs Mistral 4 (mistral4.cpp) and dots.llm1 (dots1.cpp) on: what a
// family on that graph shares. The graph takes latent attention where the
// file has a latent rank (hp.kv_lora_rank), plain attention otherwise.
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

namespace cortiq::deepseek_graph {

// Family::make and Family::tensors of the graph's model.
std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder);
std::vector<TensorSpec> tensors(const ModelHParams& hparams);

// What every family on the graph reads: the dense lead, the experts' width
// (required), the shared experts as one FFN of expert_shared_count experts'
// width, the weights' scale.
void read_common(const HParamReader& keys, ModelHParams& hp);
// deepseek2's reader (read_common, then latent attention's ranks and head
// widths, the router's gating and renormalization, Mistral Large 3's
// attention temperature, and the score scale of YaRN's mscale).
void read_latent(const HParamReader& keys, ModelHParams& hp);

// gen-model: four experts (two per token) n_ff wide, one shared expert, the
// first layer dense.
void write_experts(const ModelGeometry& g, std::string_view arch,
                   std::vector<gguf::KeyValue>& keys);
// gen-model: latent attention in the absorbed form, in small, and
// renormalized experts (write_experts).
void write_latent_moe(const ModelGeometry& g, std::string_view arch,
                      std::vector<gguf::KeyValue>& keys);

// Converted checkpoints of V3's router carry its correction bias.
inline constexpr std::string_view kConverted[] = {"exp_probs_b.bias"};

}  // namespace cortiq::deepseek_graph
