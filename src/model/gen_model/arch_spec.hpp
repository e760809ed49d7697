// What a model file of a family holds for a given geometry: the metadata
// keys and the tensors, exactly as llama.cpp loads them — the source of
// gen-model's random models and of the llama.2c converter. The tensor list
// is the family's own (Family::tensors, the same visit that binds the
// weights at load), taken for the hyper-parameters parsed back from the
// metadata, so what is written is what the loader reads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.hpp"
#include "model/tensor_table.hpp"

namespace cortiq {

struct Family;

struct ModelGeometry {
  int64_t n_vocab = 0;  // 0: take it from the tokenizer
  int64_t n_embd = 256;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t head_dim = 0;  // 0: n_embd / n_head
  int64_t n_ff = 512;
  int64_t n_ctx = 512;
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  bool tied = false;  // no output.weight: the token embedding is reused
  // Sliding-window families' window; 0: 16 positions (at most the
  // context), so that the goldens' sequences cross the window's edge.
  int64_t sliding_window = 0;
  // Mixture-of-experts families' experts and experts per token; 0: the
  // family's default (4 and 2). A llama file gets experts (Mixtral) only
  // when n_expert is given.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  // Gated DeltaNet families' linear attention (Qwen3-Next, Qwen3.5): the
  // head size, the value heads and the key heads; 0: the family's small
  // default (16; n_embd / 64; half the value heads).
  int64_t ssm_state = 0;
  int64_t ssm_heads = 0;
  int64_t ssm_groups = 0;

  int64_t resolved_head_dim() const { return head_dim != 0 ? head_dim : n_embd / n_head; }
  int64_t resolved_sliding_window() const {
    return sliding_window > 0 ? sliding_window : std::min<int64_t>(n_ctx, 16);
  }
};

// Which optional tensors a spec holds: those a converted checkpoint of the
// family has (Family::converted_optional), or every one the family can read
// (llama.cpp's test models carry them all).
enum class OptionalTensors { converted, all };

struct ModelSpec {
  std::vector<gguf::KeyValue> metadata;  // general.architecture first, then ARCH.*
  std::vector<TensorSpec> tensors;       // in the converter's order
};

// Throws cortiq::Error naming the first impossible value (zero sizes, heads
// not dividing, a head_dim the architecture cannot express...).
void validate_geometry(const Family& family, const ModelGeometry& geometry);

// A u32 metadata value, as the converters write sizes and counts.
gguf::Value u32_value(int64_t v);

// Validates, then builds the metadata and the tensor list.
ModelSpec model_spec(const Family& family, const ModelGeometry& geometry,
                     OptionalTensors optional = OptionalTensors::converted);

// ARCH.attention.key_length / value_length, for families whose converter
// always writes them (`always`) or when the head size is not n_embd / n_head.
void write_head_size(const ModelGeometry& geometry, const Family& family,
                     std::vector<gguf::KeyValue>& keys, bool always);

// gen-model's mixture of experts: ARCH.expert_count (geometry or 4) and
// expert_used_count (geometry or `default_used`).
void write_expert_counts(const ModelGeometry& geometry, std::string_view arch,
                         std::vector<gguf::KeyValue>& keys, int64_t default_used = 2);

// ARCH.rope.dimension_count: half of each head (an even count; the whole
// head when half would be 0), as GLM-4's partial_rotary_factor 0.5.
void write_half_rotary(const ModelGeometry& geometry, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys);

// Sets the u32 array key `key` (in place of any value it had) to
// value_of(i) for i in [0, n): the per-layer arrays converters write
// (head counts, sliding-window patterns).
void write_u32_per_layer(const std::string& key, int64_t n,
                         const std::function<int64_t(int64_t)>& value_of,
                         std::vector<gguf::KeyValue>& keys);

// gen-model's hybrids: whether layer il attends (every third and the last;
// the others are recurrent, with no KV heads).
inline bool attends_in_small(const ModelGeometry& g, int64_t il) {
  return il % 3 == 2 || il == g.n_layer - 1;
}

// gen-model's Mamba-2 layers: ARCH.ssm.* with an inner width of 2 n_embd in
// heads of 16, a state of 16, one group, 4 taps.
void write_mamba2_keys(const ModelGeometry& geometry, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys);

// gen-model's Mamba layers (mamba-130m's shape in small): ARCH.ssm.* with an
// inner width of 2 n_embd, a state of 16, dt_rank n_embd / 16, 4 taps.
void write_mamba_keys(const ModelGeometry& geometry, std::string_view arch,
                      std::vector<gguf::KeyValue>& keys);

// One multi-token-prediction layer after the trunk: block_count one more
// than the geometry's layers, ARCH.nextn_predict_layers 1.
void write_mtp_layer(const ModelGeometry& geometry, std::string_view arch,
                     std::vector<gguf::KeyValue>& keys);

}  // namespace cortiq
