// llama.cpp's olmo2 graph (olmo2.cpp), which it also runs EXAONE 4.0 on
// (exaone4.cpp): what a family on that graph shares.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/decoder_model.hpp"
#include "model/hparams.hpp"
#include "model/tensor_table.hpp"
#include "model/weights.hpp"

namespace cortiq::olmo2_graph {

// Family::make and Family::tensors of the graph's model.
std::unique_ptr<DecoderModel> make(ModelHParams hparams, WeightBinder& binder);
std::vector<TensorSpec> tensors(const ModelHParams& hparams);

// What the graph assumes (llama.cpp asserts it or shapes its tensors so):
// heads of n_embd / n_head, rotated in full, and the norm epsilon given.
// Its scores are always scaled by 1/sqrt(head_dim): attention.scale is not
// read.
void read_common(const HParamReader& keys, ModelHParams& hp);
// The period of local and global layers: llama.cpp reads a number, and
// ignores an array (what converters write: one flag per layer), as 4.
int64_t window_period(const HParamReader& keys);

}  // namespace cortiq::olmo2_graph
