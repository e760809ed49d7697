// The tensors and hyper-parameter keys of the dense decoder architectures
// that gen-model can write, named and shaped exactly as llama.cpp loads
// them. The three families share one layout and differ in small, named ways
// (ArchTraits): qwen2 adds biases to attn_q/k/v, qwen3 adds per-head
// RMS norms on q and k and states head_dim explicitly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf/gguf_file.hpp"

namespace cortiq {

enum class ModelArch { llama, qwen2, qwen3 };

struct ArchTraits {
  ModelArch arch;
  std::string_view name;  // general.architecture
  bool qkv_bias;          // blk.N.attn_{q,k,v}.bias
  bool qk_norm;           // blk.N.attn_{q,k}_norm.weight, one weight per head dimension
  bool head_dim_is_free;  // head_dim may differ from n_embd / n_head
};

std::span<const ArchTraits> model_archs();
// By general.architecture name; nullptr when not one we can write.
const ArchTraits* find_model_arch(std::string_view name);
const ArchTraits& arch_traits(ModelArch arch);

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

  int64_t resolved_head_dim() const { return head_dim != 0 ? head_dim : n_embd / n_head; }
};

// Throws cortiq::Error naming the first impossible value (zero sizes, heads
// not dividing, a head_dim the architecture cannot express...).
void validate_geometry(const ArchTraits& arch, const ModelGeometry& geometry);

enum class TensorKind {
  matrix,  // a weight matrix: random normal, quantized to the model's type
  norm,    // an RMS norm weight: near 1, kept F32
  bias,    // a bias vector: small, kept F32
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  TensorKind kind;
};

// Every tensor in the order llama.cpp's converter writes them: token_embd,
// output_norm, output (unless tied), then blk.0, blk.1, ...
std::vector<TensorSpec> arch_tensor_specs(const ArchTraits& arch, const ModelGeometry& geometry);

// general.architecture and the ARCH.* hyper-parameter keys (not general.name,
// general.file_type or the tokenizer).
std::vector<gguf::KeyValue> arch_metadata(const ArchTraits& arch, const ModelGeometry& geometry);

}  // namespace cortiq
