// An architecture family: what general.architecture names, how its
// hyper-parameters and weights are read, and what gen-model writes for it.
// Each family file (src/model/arch/NAME.cpp) defines its Family values;
// families.def holds the one table of them (families.cpp the lookups), the
// only list of architecture names in the engine.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/hparams.hpp"
#include "model/tensor_table.hpp"

namespace cortiq::gguf {
class GgufFile;
struct KeyValue;
}  // namespace cortiq::gguf

namespace cortiq {

class DecoderModel;
class WeightBinder;
struct ModelGeometry;

struct Family {
  std::string_view arch;   // general.architecture
  bool neox_rope = false;  // NeoX (half-split) rotary pairs instead of adjacent pairs
  // Builds the model, binding every tensor through the binder (which checks
  // names, shapes and types and remembers what was bound).
  std::unique_ptr<DecoderModel> (*make)(ModelHParams hparams, WeightBinder& binder) = nullptr;
  // The family's own keys, read after the common ones (nullptr: none).
  void (*read_hparams)(const HParamReader& keys, ModelHParams& hparams) = nullptr;
  // Every tensor the family reads, required and optional, in the order
  // llama.cpp's converter writes them (for gen-model).
  std::vector<TensorSpec> (*tensors)(const ModelHParams& hparams) = nullptr;
  // gen-model: the family's own metadata keys beyond the common ones
  // (arch_spec.cpp), with the values its real checkpoints have.
  void (*write_hparams)(const ModelGeometry& geometry, std::vector<gguf::KeyValue>& keys) = nullptr;
  // gen-model: the head size must be n_embd / n_head (llama.cpp shapes some
  // families' output projection [n_embd, n_embd]).
  bool fixed_head_dim = false;
  // A layer may lack parts (DeciLM / Nemotron): attention.head_count 0 (no
  // attention), attention.head_count_kv 0 (a linear map in its place) or
  // feed_forward_length 0 (no FFN). Otherwise every size must be positive.
  bool layers_may_lack_parts = false;
  // Files may end in multi-token-prediction layers (ARCH.nextn_predict_layers
  // of the block_count layers, GLM-4.5's): the family binds and checks their
  // tensors (ModelHParams::mtp_layers) and, as llama.cpp without an MTP
  // draft, runs the trunk only. Other families refuse such files.
  bool mtp_layers = false;
  // A text encoder (BERT): bidirectional attention (attention.causal may be
  // false), no output layer — its forward gives hidden states, never logits.
  bool encoder = false;
  // gen-model: the optional tensors a converted checkpoint of this family
  // has (name suffixes, "attn_q.bias"); --all-tensors writes every one.
  std::span<const std::string_view> converted_optional = {};
};

// Every family, in the order the docs list them.
std::span<const Family* const> families();
// By general.architecture; nullptr when unknown.
const Family* find_family(std::string_view arch);
// The family of a file's general.architecture; throws cortiq::Error naming
// the architecture and the supported ones.
const Family& family_of(const gguf::GgufFile& file);
// "llama, qwen2, ..." for messages.
std::string supported_architecture_list();

}  // namespace cortiq
