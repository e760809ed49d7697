// The hyper-parameters of a decoder model, read from a GGUF's ARCH.* keys
// with llama.cpp's defaults where a key is absent (or zero where zero means
// "unset", like a RoPE scaling factor of 0).
//
// Two levels: the model's global values, and one LayerSpec per layer —
// attention geometry, feed-forward width, sliding window and RoPE table —
// because families differ by layer (Gemma's local/global windows, per-layer
// head counts and widths of DeciLM / OpenELM, no-RoPE layers of SmolLM3).
// Blocks read the LayerSpec of their layer, never the globals.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cortiq::gguf {
class GgufFile;
}

namespace cortiq {

struct Family;

enum class RopeScalingType { none, linear, yarn, llama3 };

enum class RouterGating : uint8_t {
  softmax,  // softmax over all experts (Mixtral, Qwen-MoE, OLMoE, DeepSeek V1/V2)
  sigmoid,  // each expert's own sigmoid (DeepSeek V3, GLM-4.5)
  // the raw scores choose; a softmax over the chosen ones weighs them (GPT-OSS)
  softmax_weight,
};

// How a mixture-of-experts router turns one row's scores into its chosen
// experts and their weights (blocks/moe.hpp's route).
struct RouterSpec {
  RouterGating gating = RouterGating::softmax;
  bool normalize = false;  // divide the chosen weights by their sum (norm_topk_prob)
  float scale = 0.0f;      // multiply them by this (expert_weights_scale); 0 or 1: no scaling
  // Grouped top-k (DeepSeek V3: ARCH.expert_group_count / expert_group_used_count):
  // the experts form n_groups equal groups, and only the n_groups_used
  // groups whose two best selection scores sum highest compete. 0 or 1: none.
  int64_t n_groups = 0;
  int64_t n_groups_used = 0;
  // The raw scores choose the experts, the gating's values weigh them
  // (Llama 4: top-k of the logits, sigmoid weights; saturated sigmoids
  // would tie where the logits do not).
  bool select_by_scores = false;
};

struct RopeHParams {
  int64_t n_dims = 0;          // rotated dimensions per head (ARCH.rope.dimension_count)
  bool neox = false;           // NeoX half-split pairs vs adjacent pairs (the family decides)
  float freq_base = 10000.0f;  // ARCH.rope.freq_base
  RopeScalingType scaling = RopeScalingType::linear;  // llama.cpp's default name
  float scaling_factor = 1.0f;                        // ARCH.rope.scaling.factor (0 or absent: 1)
  float freq_scale = 1.0f;  // 1 / scaling_factor for linear and yarn, else 1
  int64_t n_ctx_orig = 0;   // ARCH.rope.scaling.original_context_length (default: trained context)
  // YaRN, resolved as llama.cpp's context does: ext_factor 1 for yarn,
  // attn_factor the magnitude correction.
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  // llama3 scaling given as keys (files usually carry rope_freqs.weight instead).
  float llama3_low_freq_factor = 1.0f;
  float llama3_high_freq_factor = 4.0f;
  // M-RoPE for text positions (qwen2vl, qwen3vl: ARCH.rope.dimension_sections,
  // pairs per section); all 0: plain RoPE.
  std::array<int32_t, 4> mrope_sections{};
  bool mrope_interleaved = false;  // Qwen3-VL's imrope
};

// Which RoPE table a layer's attention uses: the model's, the local one of
// sliding-window layers (Gemma 3's own base), or none (NoPE layers).
enum class RopeSlot : uint8_t { global, local, none };
inline constexpr int kRopeSlots = 2;  // tables: global, local

// One layer's shape.
// The recurrent block a layer with state runs (LayerSpec::recurrent).
enum class RecurrentKind : uint8_t {
  none,
  short_conv,            // LFM2's gated short convolution
  mamba,                 // Mamba's selective scan (a decay per state element)
  mamba2,                // Mamba-2's (a decay per head)
  gated_delta_net,       // Qwen3-Next's and Qwen3.5's linear attention
  lightning_attention,   // MiniMax-01's linear attention (a fixed decay per head)
  kimi_delta_attention,  // Kimi Linear's delta rule (a decay per key channel)
  rwkv6,                 // RWKV-6's time mixing (a token shift and a decayed key-value state)
  rwkv7,                 // RWKV-7's (the delta rule with in-context learning rates)
};

struct LayerSpec {
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t n_ff = 0;
  // Sliding window: a row at position p attends [p - window + 1, p]; 0 = every position.
  int64_t window = 0;
  // Chunked attention (Llama 4): a row at position p attends
  // [floor(p / chunk) * chunk, p]; 0 = none.
  int64_t chunk = 0;
  RopeSlot rope = RopeSlot::global;
  // The value row is the first head_dim_v floats of the key row, not
  // stored apart (absorbed latent attention: both are the latent).
  bool values_in_keys = false;
  // Floats of recurrent state each sequence keeps for this layer, whatever
  // its length (LFM2's short convolution: its last L - 1 inputs per
  // channel); 0: none. Such a state is not cut back, so a cache with it
  // re-forwards a sequence instead of truncating it (KvCache::can_truncate).
  int64_t state_width = 0;
  RecurrentKind recurrent = RecurrentKind::none;  // which block keeps that state

  int64_t q_width() const { return n_head * head_dim_k; }
  int64_t k_width() const { return n_head_kv * head_dim_k; }
  int64_t v_width() const { return n_head_kv * head_dim_v; }
  int64_t attn_out_width() const { return n_head * head_dim_v; }  // the output projection's input
  bool is_recurrent() const { return state_width > 0; }
};

struct ModelHParams {
  std::string arch;  // general.architecture
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  // The file's global values (most layers'); LayerSpec is what blocks read.
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim_k = 0;  // ARCH.attention.key_length (default n_embd / n_head)
  int64_t head_dim_v = 0;  // ARCH.attention.value_length (default n_embd / n_head)
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  // Not a file's value: the positions per sequence the runtime gives the
  // model (the loader's context; 0 when unknown), for what llama.cpp
  // decides by its context (Phi-3's LongRoPE factors).
  int64_t n_ctx_seq = 0;
  float rms_eps = 1e-5f;
  float norm_eps = 1e-5f;  // ARCH.attention.layer_norm_epsilon, for the families with layer norms
  bool uses_rms_norm = true;     // false: rms_eps is not read (layer-norm families)
  float attention_scale = 0.0f;  // ARCH.attention.scale; 0: 1/sqrt(head_dim_k)
  RopeHParams rope;
  RopeHParams rope_local;  // sliding-window layers' table (RopeSlot::local)

  // Read by the families that have them (0 = off).
  int64_t sliding_window = 0;  // ARCH.attention.sliding_window
  // Llama 4's attention temperature: the roped queries are multiplied by
  // 1 + scale * log(floor((pos + offset) / floor_scale) + 1) (llama.cpp's
  // llm_graph_input_attn_temp), in every layer (Ministral 3, Mistral Large 3)
  // or only in those without RoPE (Llama 4); scale 0: off.
  struct AttentionTemperature {
    float scale = 0.0f;
    float offset = 0.0f;
    int64_t floor_scale = 0;
    bool unrotated_layers_only = false;
  } attn_temperature;
  float attn_softcap = 0.0f;  // ARCH.attn_logit_softcapping
  // The scores' multiplier inside the softcap's tanh; 0: 1 / attn_softcap
  // (Gemma 2). Grok: attention.output_scale / attn_softcap.
  float attn_softcap_scale = 0.0f;
  float final_softcap = 0.0f;    // ARCH.final_logit_softcapping
  float embedding_scale = 0.0f;  // multiplies the token embeddings (Gemma: sqrt(n_embd))
  // Multiplies each branch's output before its residual add (Granite,
  // MiniCPM: ARCH.residual_scale); the family applies it.
  float residual_scale = 0.0f;
  // Multiplies the attention's output after its projection (MiMo V2's
  // ARCH.attention.value_scale: llama.cpp's ggml_scale after build_attn); 0: none.
  float attn_output_scale = 0.0f;
  // Multiplies the logits after lm_head (Granite, MiniCPM: 1 / ARCH.logit_scale).
  float logit_scale = 0.0f;
  // Q, K and V are clamped to [-c, c] after their projections and biases
  // (ARCH.attention.clamp_kqv: OLMo, MPT; 0 = no clamp), as llama.cpp's build_qkv.
  float clamp_kqv = 0.0f;
  // Latent attention's ranks (ARCH.attention.q_lora_rank / kv_lora_rank: MiniCPM3).
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  // The attention scale multiplies the queries after RoPE (Gemma's
  // ggml_scale of Qcur) instead of the scores.
  bool scale_queries = false;
  // ALiBi's max bias (0 = off): each head's scores get slope_h * -(query
  // position - key position), the slopes as ggml's soft_max_ext derives
  // them. MPT and Jais read ARCH.attention.max_alibi_bias; llama.cpp fixes 8
  // for BLOOM, Refact and Baichuan 13B. Such layers have RopeSlot::none.
  float alibi_max_bias = 0.0f;
  // GPT-NeoX's use_parallel_residual: both branches from the layer input.
  bool parallel_residual = false;
  // Mixture of experts (read by the families that run them: moe.hpp's
  // read_expert_hparams; 0 = dense): ARCH.expert_count, expert_used_count,
  // one expert's FFN width, and a shared expert's width (Qwen2-MoE).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_expert = 0;
  int64_t n_ff_shared_expert = 0;
  int64_t moe_latent_size = 0;     // ARCH.moe_latent_size: the experts' width (MoeTensors::latent)
  RouterSpec router;               // the family's routing, from its keys
  int64_t n_layer_dense_lead = 0;  // ARCH.leading_dense_block_count: the first layers' FFN is dense
  // ARCH.interleave_moe_layer_step (Llama 4): past the dense lead, layer il
  // has experts when (il + 1) % step == 0; 1: every layer.
  int64_t n_moe_layer_step = 1;
  // Latent attention in its absorbed form (DeepSeek V2/V3 files with
  // ARCH.attention.key_length_mla / value_length_mla): a head's real query
  // and value widths, while the LayerSpec describes the cached latent
  // (head_dim_k = kv_lora_rank + rope, head_dim_v = kv_lora_rank, one KV
  // head). 0: not absorbed.
  int64_t mla_head_dim_k = 0;
  int64_t mla_head_dim_v = 0;
  // LFM2's short convolutions: the taps of each (ARCH.shortconv.l_cache); 0: none.
  int64_t shortconv_taps = 0;
  // Selective state space and linear attention layers (ARCH.ssm.*; 0:
  // none): the convolution's taps, the inner width, the state per head
  // dimension, the heads (time_step_rank: Mamba-2's heads, Gated DeltaNet's
  // value heads) and the B/C groups (Gated DeltaNet's key heads). Mamba 1
  // has no heads or groups: time_step_rank is its dt_rank, the width of the
  // low-rank step projection, and its B and C may be RMS-normed
  // (ssm.dt_b_c_rms: Falcon Mamba).
  struct Ssm {
    int64_t conv_taps = 0;
    int64_t d_inner = 0;
    int64_t d_state = 0;
    int64_t n_head = 0;
    int64_t n_group = 0;
    int64_t dt_rank = 0;
    bool dt_b_c_rms = false;
    int64_t head_dim() const { return n_head > 0 ? d_inner / n_head : 0; }
    int64_t conv_width() const { return d_inner + 2 * n_group * d_state; }
  } ssm;
  // RWKV's time mixing (ARCH.wkv.head_size and the low-rank widths; 0:
  // none): RWKV-6's data-dependent mix (time_mix_extra_dim) and decay
  // (time_decay_extra_dim) ranks and its residual halving every
  // rescale_every_n_layers; RWKV-7's decay, in-context learning rate, value
  // residual and gate ranks (attention.*_lora_rank).
  struct Rwkv {
    int64_t head_size = 0;
    int64_t mix_rank = 0;
    int64_t decay_rank = 0;
    int64_t iclr_rank = 0;
    int64_t value_mix_rank = 0;
    int64_t gate_rank = 0;
    int64_t rescale_every = 0;
  } rwkv;
  // Gemma 4's per-layer input width (ARCH.embedding_length_per_layer_input; 0 = none).
  int64_t per_layer_embd = 0;

  // A text encoder (Family::encoder: BERT): no output layer, so a forward
  // pass gives hidden states (embeddings), never logits.
  bool encoder = false;
  // ARCH.attention.causal (default true). false: every row attends to every
  // position of its sequence in the pass (BERT-style encoders), which needs
  // the whole sequence in one forward pass; only encoder families accept it.
  bool causal_attention = true;
  // ARCH.pooling_type as llama.cpp numbers it (-1 absent, 0 none, 1 mean,
  // 2 cls, 3 last, 4 rank): how the file's model pools its embeddings.
  int32_t pooling_type = -1;

  // BERT's token type count (tokenizer.ggml.token_type_count; 0 = none).
  int64_t n_token_types = 0;

  // ARCH.classifier.output_labels: the labels of a classification head
  // (rerankers); its row count, 1 when the key is absent.
  std::vector<std::string> classifier_labels;

  std::vector<LayerSpec> layers;  // n_layer entries
  // The multi-token-prediction layers after the trunk (ARCH.nextn_predict_layers,
  // Family::mtp_layers): block_count = n_layer + mtp_layers.size(). Their
  // tensors are checked, not run.
  std::vector<LayerSpec> mtp_layers;

  // Which trunk layers have experts when no rule above says it (Jamba: the
  // file's routers; Nemotron-H: its FFN layers); empty: the rule.
  std::vector<bool> experts_in_layer;

  const LayerSpec& layer(int64_t il) const { return layers[static_cast<size_t>(il)]; }
  // Whether layer il's FFN is a mixture of experts (n_expert, and
  // experts_in_layer or n_layer_dense_lead and n_moe_layer_step).
  bool layer_has_experts(int64_t il) const {
    if (n_expert <= 0) return false;
    if (!experts_in_layer.empty()) {
      return std::cmp_less(il, experts_in_layer.size()) &&
             experts_in_layer[static_cast<size_t>(il)];
    }
    return il >= n_layer_dense_lead && (il + 1) % n_moe_layer_step == 0;
  }
  int64_t q_width() const { return n_head * head_dim_k; }
  int64_t k_width() const { return n_head_kv * head_dim_k; }
  int64_t v_width() const { return n_head_kv * head_dim_v; }
  float kq_scale() const;
  float kq_scale(const LayerSpec& layer) const;
  // A copy whose `layers` go on with the MTP layers (indices n_layer...),
  // for visiting their tensors with the blocks' visit().
  ModelHParams with_mtp_layers() const;

  // Reads and validates (positive sizes, heads dividing, even rotary dims
  // within the head...); throws cortiq::Error naming the key at fault.
  // n_vocab comes from ARCH.vocab_size or the tokenizer's token list. The
  // family gives the RoPE layout and reads its own keys; the overload
  // without one looks it up by general.architecture.
  static ModelHParams from_gguf(const gguf::GgufFile& file, const Family& family);
  static ModelHParams from_gguf(const gguf::GgufFile& file);
};

// Reads ARCH.* keys of one file, checked: sizes within range, floats finite.
class HParamReader {
 public:
  HParamReader(const gguf::GgufFile& file, std::string arch);

  const gguf::GgufFile& file() const { return file_; }
  std::string key(std::string_view name) const { return prefix_ + std::string(name); }
  bool has(std::string_view name) const;
  // invalid("missing key ...") when the key is absent: for keys llama.cpp
  // requires although the engine has a default.
  void require(std::string_view name) const;

  int64_t required_uint(std::string_view name) const;
  int64_t uint_or(std::string_view name, int64_t fallback) const;
  float float_or(std::string_view name, float fallback) const;
  bool bool_or(std::string_view name, bool fallback) const;
  std::string string_or(std::string_view name, std::string fallback) const;
  // A key that is one number for every layer or an array of n_layer numbers
  // (llama.cpp's get_key_or_arr); `fallback` for every layer when absent.
  std::vector<int64_t> per_layer_uint(std::string_view name, int64_t n_layer,
                                      int64_t fallback) const;

  [[noreturn]] void invalid(const std::string& what) const;

 private:
  int64_t checked(std::string_view name, uint64_t value) const;

  const gguf::GgufFile& file_;
  std::string prefix_;
};

// The YaRN keys llama.cpp's loader reads for a few families only:
// rope.scaling.yarn_beta_fast and yarn_beta_slow (mistral3, grok), with
// `ext_and_attn` yarn_ext_factor and yarn_attn_factor (grok), with
// `log_multiplier` yarn_log_multiplier (mistral3); the RoPE's magnitude
// factor resolved again from them. The other families run llama.cpp's
// defaults.
struct YarnKeys {
  float beta_fast_default = 32.0f;  // grok's loader: 8
  bool ext_and_attn = false;
  bool log_multiplier = false;
};
void read_yarn_keys(const HParamReader& keys, RopeHParams& rope, const YarnKeys& which);

// Marks every n-th layer (the last of each group of `period`; with
// `global_first` the first) as global and the others as sliding-window
// layers of `window` positions with the local RoPE table — Gemma 2 / 3's
// pattern (period 2: local, global, ...); Laguna's is global first.
void set_sliding_window_pattern(ModelHParams& hp, int64_t window, int64_t period,
                                RopeSlot local_rope, bool global_first = false);

}  // namespace cortiq
