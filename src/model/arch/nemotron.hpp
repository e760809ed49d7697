// llama.cpp's nemotron graph (nemotron.cpp), which it also runs Jais-2 on
// (jais2.cpp): what a family on that graph shares.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq::nemotron_graph {

// Family::make and Family::tensors of the graph's model.
std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder);
std::vector<TensorSpec> tensors(const ModelHParams& hparams);

// Nemotron's reader, which every family on the graph starts from: the layer
// norm epsilon (required, as in llama.cpp), K and V heads as wide, scores
// always scaled by 1/sqrt(head size).
void read_common(const HParamReader& keys, ModelHParams& hp);

}  // namespace cortiq::nemotron_graph
