// Converting a llama2.c checkpoint into a GGUF of architecture `llama` that
// Cortiq and the peer (llama.cpp) both run (`cortiq convert llama2c`).
//
// The tensor names, shapes and hyper-parameter keys come from
// model/arch_spec.hpp, as for gen-model:
//   token_embedding -> token_embd.weight     rms_final -> output_norm.weight
//   wcls            -> output.weight (absent when the classifier is shared)
//   rms_att -> blk.N.attn_norm   wq/wk/wv/wo -> blk.N.attn_q/attn_k/attn_v/attn_output
//   rms_ffn -> blk.N.ffn_norm    w1 -> ffn_gate, w2 -> ffn_down, w3 -> ffn_up
// A row-major [out][in] matrix is a ggml tensor of shape {in, out} with the
// same bytes. llama2.c rotates the interleaved pairs (x[2i], x[2i+1]), which is
// the peer's "normal" RoPE for llama, so wq and wk are written unpermuted (the
// Hugging Face converter's permutation undoes HF's half-split layout, which
// llama2.c never uses). RMS epsilon 1e-5 and RoPE base 10000 are run.c's
// constants; the context length is seq_len; freq_cis is not needed.
//
// The checkpoint has no tokenizer: without one the file says
// tokenizer.ggml.model = "no_vocab" and llama.vocab_size (the peer then works
// with ids only). Given llama2.c's tokenizer.bin, it gets a SentencePiece
// vocabulary (tokenizer.ggml.model = "llama") as llama.cpp's
// convert-llama2c-to-ggml builds it: "▁" for spaces, <unk> <s> </s> at ids
// 0 1 2, <0xXX> byte tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "convert/llama2c/llama2c_checkpoint.hpp"
#include "model/gen_model/arch_spec.hpp"
#include "model/gen_model/builtin_vocab.hpp"
#include "quant/quant_recipe.hpp"

namespace cortiq::llama2c {

inline constexpr double kRmsEps = 1e-5;       // run.c's rmsnorm
inline constexpr double kRopeBase = 10000.0;  // run.c's RoPE
inline constexpr uint32_t kBosId = 1;         // run.c's BOS and EOS
inline constexpr uint32_t kEosId = 2;

// The llama geometry of a checkpoint (tied when the classifier is shared).
ModelGeometry geometry_of(const Config& config);

// The GGUF tensor a checkpoint array becomes, and back: which array (and
// layer) a llama tensor name comes from; nullopt for a name it does not hold.
struct Source {
  Weight weight;
  int64_t layer = 0;
};
std::optional<Source> source_of(std::string_view gguf_tensor_name);

// SentencePiece vocabulary from a tokenizer.bin (see the top of this file).
// Throws cortiq::Error naming `name` when two tokens end up equal, which the
// peer cannot load.
Vocabulary spm_vocabulary(const TokenizerFile& tokenizer, std::string_view name = "<tokenizer>");

struct ConvertProgress {
  size_t tensors_done = 0;
  size_t tensors_total = 0;
  uint64_t bytes_done = 0;  // checkpoint bytes converted
  uint64_t bytes_total = 0;
  double seconds = 0;
};

struct ConvertOptions {
  // Weight type or recipe as for `cortiq quantize` ("F32", "Q8_0", "Q4_K_M");
  // nullptr means F32. Matrices whose rows are not whole blocks fall back as
  // the peer does; norms stay F32.
  const QuantRecipe* recipe = nullptr;
  bool pure = false;  // every matrix the recipe's type (no llama.cpp mixture)
  std::string name;   // general.name; empty: the checkpoint's file name without extension
  std::filesystem::path tokenizer;  // llama2.c tokenizer.bin; empty: no_vocab
  int n_threads = 0;                // for quantization; 0: one per hardware thread
  // Called from the calling thread after each tensor; may be empty.
  std::function<void(const ConvertProgress&)> on_progress;
};

struct ConvertSummary {
  ModelGeometry geometry;
  size_t n_tensors = 0;
  size_t n_fallbacks = 0;  // matrices that could not take the recipe's type
  uint64_t n_parameters = 0;
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  bool has_vocab = false;  // a tokenizer was written
  double seconds = 0;
};

// Writes the GGUF (through a temporary file renamed into place: a failure
// leaves no output). Throws cortiq::Error / FormatError.
ConvertSummary convert_to_gguf(const Checkpoint& checkpoint, const std::filesystem::path& output,
                               const ConvertOptions& options);

}  // namespace cortiq::llama2c
