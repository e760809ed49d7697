// Which weight type each tensor of a model gets when it is quantized.
//
// A recipe ("Q4_K_M") names a default weight type and a llama.cpp file type
// number (LLAMA_FTYPE_*, written to general.file_type). Without --pure, a
// mixture close to llama.cpp's llama_tensor_get_type adjusts the type per
// tensor: the output matrix gets more bits, so do attn_v and ffn_down on
// some layers. The rules are a table (quant_recipe.cpp) and are described in
// docs/quantization.md. Then every choice is checked against the tensor's
// row length: a type whose block does not divide it falls back to a type
// that fits, as the peer does.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quant/ggml_type.hpp"

namespace cortiq {

struct QuantRecipe {
  std::string_view name;         // "Q4_K_M"
  uint32_t file_type;            // llama.cpp's LLAMA_FTYPE_* number
  GgmlType default_type;         // what most weight matrices get
  std::string_view description;  // one line for --help
};

// Every recipe, in the order --help lists them.
std::span<const QuantRecipe> quant_recipes();
// By name, case-insensitive; also accepts the aliases Q3_K, Q4_K and Q5_K
// (for Q3_K_M, Q4_K_M, Q5_K_M, as llama-quantize does). nullptr if unknown.
const QuantRecipe* find_quant_recipe(std::string_view name);
// The file type number of a model whose weight matrices all have `type`
// (gen-model, --pure); e.g. Q4_K -> 14 (Q4_K_S), F16 -> 1.
uint32_t file_type_for_uniform_type(GgmlType type);

// What a tensor is for, as far as the mixture rules care.
enum class TensorRole {
  token_embd,
  output,
  attn_q,
  attn_k,
  attn_v,  // also fused attn_qkv and MLA's attn_kv_b, as in the peer
  attn_output,
  ffn_gate,
  ffn_up,
  ffn_down,
  other,
};
TensorRole tensor_role(std::string_view name);

// Dimensions that count: trailing 1s are dropped, as ggml_n_dims does.
size_t effective_dims(std::span<const int64_t> shape);
// Whether a tensor may change type at all: a weight ("*.weight") with two or
// more dimensions that is not a norm, a router or one of the small tensors
// the peer keeps as they are. Everything else is copied unchanged.
bool tensor_is_quantizable(std::string_view name, std::span<const int64_t> shape);

// `wanted` if its block divides row_length; otherwise the peer's fallback
// (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and F16
// when even that does not fit.
GgmlType fallback_type(GgmlType wanted, int64_t row_length);

// The model facts the mixture rules read (from the GGUF metadata).
struct ModelShape {
  uint32_t n_layer = 0;
  uint32_t n_head = 0;
  uint32_t n_head_kv = 0;
  uint32_t n_expert = 0;
  // Query heads per KV head (1 when unknown).
  uint32_t n_gqa() const { return n_head_kv == 0 || n_head == 0 ? 1 : n_head / n_head_kv; }
};

struct TensorDesc {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
};

struct TensorTypeChoice {
  bool quantize = false;            // false: copy the tensor as it is
  GgmlType wanted = GgmlType::F32;  // the recipe's choice before the fallback
  GgmlType type = GgmlType::F32;    // what is written
  bool fell_back() const { return quantize && wanted != type; }
};

// One choice per tensor, in the same order. `pure` gives every quantizable
// tensor the recipe's default type (still subject to the fallback).
std::vector<TensorTypeChoice> choose_tensor_types(const QuantRecipe& recipe, bool pure,
                                                  const ModelShape& model,
                                                  std::span<const TensorDesc> tensors);

}  // namespace cortiq
