// Turns a model's RoPE hyper-parameters (and its rope_freqs.weight, when the
// file has one) into the kernel's parameters, one table per RopeSlot the
// layers use (global; local for sliding-window layers with their own base).
// llama3 scaling is applied as per-pair frequency factors: from the tensor
// when the converter wrote one (the usual case), else computed from the
// rope.scaling.* keys as Hugging Face transformers does.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/rope.hpp"
#include "kv/batch.hpp"
#include "model/forward_buffers.hpp"
#include "model/hparams.hpp"

namespace cortiq {

class TensorVisitor;

// One RoPE table of a forward pass: its parameters and the cos/sin of every row.
struct RopeTable {
  const kernels::RopeParams* params = nullptr;
  std::span<const float> cache;  // [rows][params->n_dims] from rope_cache()
};

class RopeTables {
 public:
  RopeTables() = default;
  RopeTables(const RopeTables&) = delete;  // params hold views of their factors
  RopeTables& operator=(const RopeTables&) = delete;

  // rope_freqs.weight (optional, or required: Gemma 4's global layers): the
  // global table's frequency factors, for the families whose files may have
  // them; with `local_too` the local table's as well (Llama 4, whose rotated
  // layers are its chunked ones).
  void visit(TensorVisitor& v, const ModelHParams& hp, bool required = false,
             bool local_too = false);
  // LongRoPE (Phi-3, MiniCPM3): rope_factors_long.weight and rope_factors_short.weight
  // (both optional), of which setup() gives the global table the long ones
  // when the model runs with more positions per sequence than it was first
  // trained for (hp.n_ctx_seq > rope.scaling.original_context_length), else
  // the short ones, as llama.cpp's get_rope_factors chooses. Each holds
  // n_factors values (0: rope.dimension_count / 2; PhiMoE's loader wants
  // half a head, of which RoPE reads the first dimension_count / 2).
  void visit_longrope(TensorVisitor& v, const ModelHParams& hp, int64_t n_factors = 0);
  // Fills the parameters of the tables the layers use; after visit().
  void setup(const ModelHParams& hp);
  // The cos/sin of every row's position, for each table in use.
  std::array<RopeTable, kRopeSlots> for_rows(std::span<const BatchRow> rows,
                                             ForwardBuffers& buf) const;

 private:
  struct Slot {
    kernels::RopeParams params;  // params.freq_factors views factors
    std::vector<float> factors;  // n_dims / 2 values, or empty
    bool used = false;
  };
  std::array<Slot, kRopeSlots> slots_;
  std::vector<float> long_factors_, short_factors_;  // LongRoPE, when read
  bool longrope_ = false;
  bool local_factors_ = false;  // visit's local_too
};

// llama3's frequency factors (divisors of theta) for n_dims / 2 pairs.
std::vector<float> llama3_freq_factors(const RopeHParams& rope, int64_t n_dims);

}  // namespace cortiq
