// Working memory of a forward pass, kept between calls so the decode path
// allocates nothing once warm: buffers only grow, to the largest batch seen.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cpu/cpu_backend.hpp"
#include "backends/scratch.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kv/batch.hpp"
#include "model/layer_stage.hpp"

namespace cortiq {

class ThreadPool;

struct ForwardBuffers {
  std::vector<float> residual;  // [rows][n_embd]: the stream the blocks add to
  std::vector<float> normed;    // [rows][n_embd]
  std::vector<float> q, k, v;   // [rows][q/k/v width]
  std::vector<float> qkv;       // [rows][q + k + v width]: a fused attn_qkv product
  std::vector<float> attn_out;  // [rows][q width]
  // Latent attention's low-rank rows (compressed queries, latents, expansions).
  std::vector<float> latent_a, latent_b;
  // [rows][parts][rope dims]: parts of heads gathered to be rotated
  // (latent attention's rope dims, which trail each head).
  std::vector<float> rope_parts;
  std::vector<float> proj;       // [rows][n_embd]: a block's output before the residual add
  std::vector<float> parallel;   // [rows][n_embd]: the FFN branch of a parallel-residual layer
  std::vector<float> gate, up;   // [rows][n_ff]
  std::vector<float> attn_gate;  // [rows][q width]: a gated query's gate (Qwen3-Next)
  // A recurrent block's many rows of intermediates (RWKV's time mix: the
  // mixed inputs, projections and low-rank products, carved from one).
  std::vector<float> mixer;
  std::vector<float> value_first;  // [rows][n_embd]: RWKV-7's first layer's values
  // A decode row's products that each read their own input: its experts'
  // (moe.cpp), latent attention's per-head matrices (latent_attention.cpp).
  std::vector<MatmulProduct> products;
  std::vector<ConstTensor> product_inputs;
  // Per RoPE table (global, local): [rows][rope dims], cos/sin per row's position.
  std::array<std::vector<float>, 2> rope;
  CpuScratch cpu;                  // the CPU backend's own
  std::vector<float> logits;       // a device's logits before they reach the host (CPU: unused)
  std::vector<float> all_hidden;   // a device's every-row hidden states (CPU: unused)
  std::vector<float> mtp_input;    // [rows][2 n_embd]: an MTP layer's [enorm(e) ; hnorm(h)]
  std::vector<int32_t> token_ids;  // [rows]
  std::vector<int32_t> row_cells;  // [rows]: each row's cache cell
  std::vector<float> stage_rows;   // [rows][stage width]: rows crossing a BackendSplit
  std::vector<int64_t> seq_next;   // [sequences]: next position, while checking a batch

  // grow_scratch (backends/scratch.hpp): v grown to at least n, its first n.
  static std::span<float> take(std::vector<float>& v, size_t n) { return grow_scratch(v, n); }

  // A block's own scratch, declared in the block's file (MoeScratch in
  // blocks/moe.cpp): one T per ForwardBuffers, made on first use and kept.
  template <class T>
  T& of() {
    const size_t id = block_scratch_id<T>();
    if (blocks_.size() <= id) blocks_.resize(id + 1);
    if (!blocks_[id])
      blocks_[id] = BlockScratch(new T(), {[](void* p) { delete static_cast<T*>(p); }});
    return *static_cast<T*>(blocks_[id].get());
  }

 private:
  struct DeleteScratch {
    void (*destroy)(void*) = nullptr;
    void operator()(void* p) const { destroy(p); }
  };
  using BlockScratch = std::unique_ptr<void, DeleteScratch>;
  static size_t next_block_scratch_id() {
    static std::atomic<size_t> next{0};
    return next++;
  }
  template <class T>
  static size_t block_scratch_id() {
    static const size_t id = next_block_scratch_id();
    return id;
  }
  std::vector<BlockScratch> blocks_;
};

// A pass split between two backends (-ngl): the stage's layers from
// `layer` on, and its head, run on `backend`; the layers before it on the
// context's own backend. The rows cross as hidden states (the buffers'
// stage_rows) within the one pass, so the cache appends and commits them
// once.
struct BackendSplit {
  Backend* backend = nullptr;  // null: no split
  int64_t layer = 0;
};

// What a forward pass runs with: the backend its blocks' ops go to and the
// buffers of its caller.
[[noreturn]] void throw_host_only(std::string_view block, std::string_view backend);

struct ForwardContext {
  Backend& backend;
  ForwardBuffers& buffers;
  RowOutput output = RowOutput::logits;
  // When set ([rows][n_embd]): every row's final-normed hidden state, beside
  // the logits of the marked rows (what an MTP drafter reads).
  std::span<float> all_hidden = {};
  // What the pass carries (a scheduler step may carry both): prompt rows
  // make it an arrival at the fault site "prefill", generated rows at
  // "decode" (base/fault_injection.hpp).
  bool prompt_rows = false;
  bool generated_rows = false;
  // The layers the pass runs (model/layer_stage.hpp); all of them by default.
  LayerStage stage = {};
  BackendSplit split = {};

  // The threads for the pass's host work.
  ThreadPool& host_pool() const { return backend.host_pool(); }
  // The first thing a block not on the op layer yet does: on a backend
  // whose tensors are not host memory it throws, naming the block (what a
  // device's probe reports when it declines the family).
  void host_only(std::string_view block) const {
    if (!backend.computes_on_host()) throw_host_only(block, backend.name());
  }
  // This context with its ops going to `other` instead (no split).
  ForwardContext on(Backend& other) const {
    ForwardContext ctx{other, buffers, output, all_hidden, prompt_rows, generated_rows, stage};
    return ctx;
  }
};

}  // namespace cortiq
