#include "model/arch_spec.hpp"

#include <limits>

#include "base/error.hpp"
#include "base/strings.hpp"

namespace cortiq {

namespace {

constexpr ArchTraits kArchs[] = {
    {ModelArch::llama, "llama", /*qkv_bias=*/false, /*qk_norm=*/false, /*head_dim_is_free=*/true},
    // llama.cpp's qwen2 shapes attn_output as [n_embd, n_embd]: heads must tile n_embd.
    {ModelArch::qwen2, "qwen2", /*qkv_bias=*/true, /*qk_norm=*/false, /*head_dim_is_free=*/false},
    {ModelArch::qwen3, "qwen3", /*qkv_bias=*/false, /*qk_norm=*/true, /*head_dim_is_free=*/true},
};

// Rope base and epsilon are written as f32: check the value the file will
// hold, or 1e-50 passes as positive and is stored as 0 (1e39 as inf).
bool positive_as_f32(double v) {
  return v > 0 && v <= std::numeric_limits<float>::max() && static_cast<float>(v) > 0;
}

std::string layer_tensor(int64_t layer, std::string_view what) {
  return strfmt("blk.%lld.", static_cast<long long>(layer)) + std::string(what);
}

void require(bool ok, const std::string& problem) {
  if (!ok) throw Error("invalid model geometry: " + problem);
}

void add_layer_tensors(const ArchTraits& arch, const ModelGeometry& g, int64_t layer,
                       std::vector<TensorSpec>& out) {
  const int64_t head_dim = g.resolved_head_dim();
  const int64_t q_dim = g.n_head * head_dim;
  const int64_t kv_dim = g.n_head_kv * head_dim;
  const auto add = [&](std::string_view what, std::vector<int64_t> shape, TensorKind kind) {
    out.push_back({layer_tensor(layer, what), std::move(shape), kind});
  };
  add("attn_norm.weight", {g.n_embd}, TensorKind::norm);
  add("attn_q.weight", {g.n_embd, q_dim}, TensorKind::matrix);
  add("attn_k.weight", {g.n_embd, kv_dim}, TensorKind::matrix);
  add("attn_v.weight", {g.n_embd, kv_dim}, TensorKind::matrix);
  if (arch.qkv_bias) {
    add("attn_q.bias", {q_dim}, TensorKind::bias);
    add("attn_k.bias", {kv_dim}, TensorKind::bias);
    add("attn_v.bias", {kv_dim}, TensorKind::bias);
  }
  if (arch.qk_norm) {
    add("attn_q_norm.weight", {head_dim}, TensorKind::norm);
    add("attn_k_norm.weight", {head_dim}, TensorKind::norm);
  }
  add("attn_output.weight", {q_dim, g.n_embd}, TensorKind::matrix);
  add("ffn_norm.weight", {g.n_embd}, TensorKind::norm);
  add("ffn_gate.weight", {g.n_embd, g.n_ff}, TensorKind::matrix);
  add("ffn_up.weight", {g.n_embd, g.n_ff}, TensorKind::matrix);
  add("ffn_down.weight", {g.n_ff, g.n_embd}, TensorKind::matrix);
}

}  // namespace

std::span<const ArchTraits> model_archs() {
  return kArchs;
}

const ArchTraits* find_model_arch(std::string_view name) {
  for (const ArchTraits& a : kArchs) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const ArchTraits& arch_traits(ModelArch arch) {
  for (const ArchTraits& a : kArchs) {
    if (a.arch == arch) return a;
  }
  throw Error("unknown model architecture");
}

void validate_geometry(const ArchTraits& arch, const ModelGeometry& g) {
  require(g.n_vocab > 0, "the vocabulary is empty");
  require(g.n_embd > 0 && g.n_layer > 0 && g.n_head > 0 && g.n_head_kv > 0 && g.n_ff > 0 &&
              g.n_ctx > 0 && g.head_dim >= 0,
          "every size must be positive");
  require(g.n_head % g.n_head_kv == 0,
          strfmt("%lld heads do not split into groups of %lld KV heads",
                 static_cast<long long>(g.n_head), static_cast<long long>(g.n_head_kv)));
  if (g.head_dim == 0 || !arch.head_dim_is_free) {
    require(g.n_embd % g.n_head == 0,
            strfmt("n_embd %lld is not a multiple of %lld heads", static_cast<long long>(g.n_embd),
                   static_cast<long long>(g.n_head)));
  }
  if (!arch.head_dim_is_free) {
    require(g.head_dim == 0 || g.head_dim * g.n_head == g.n_embd,
            std::string(arch.name) + " needs head_dim = n_embd / n_head");
  }
  require(g.resolved_head_dim() % 2 == 0, "head_dim must be even (RoPE rotates pairs)");
  require(positive_as_f32(g.rope_base), "rope base must be a positive f32");
  require(positive_as_f32(g.rms_eps), "RMS norm epsilon must be a positive f32");
}

std::vector<TensorSpec> arch_tensor_specs(const ArchTraits& arch, const ModelGeometry& g) {
  validate_geometry(arch, g);
  std::vector<TensorSpec> specs;
  specs.push_back({"token_embd.weight", {g.n_embd, g.n_vocab}, TensorKind::matrix});
  specs.push_back({"output_norm.weight", {g.n_embd}, TensorKind::norm});
  if (!g.tied) specs.push_back({"output.weight", {g.n_embd, g.n_vocab}, TensorKind::matrix});
  for (int64_t layer = 0; layer < g.n_layer; ++layer) add_layer_tensors(arch, g, layer, specs);
  return specs;
}

std::vector<gguf::KeyValue> arch_metadata(const ArchTraits& arch, const ModelGeometry& g) {
  const std::string prefix = std::string(arch.name) + ".";
  const auto u32 = [](int64_t v) { return gguf::Value(static_cast<uint32_t>(v)); };
  const int64_t head_dim = g.resolved_head_dim();
  std::vector<gguf::KeyValue> kv;
  kv.push_back({"general.architecture", gguf::Value(std::string(arch.name))});
  kv.push_back({prefix + "vocab_size", u32(g.n_vocab)});
  kv.push_back({prefix + "context_length", u32(g.n_ctx)});
  kv.push_back({prefix + "embedding_length", u32(g.n_embd)});
  kv.push_back({prefix + "block_count", u32(g.n_layer)});
  kv.push_back({prefix + "feed_forward_length", u32(g.n_ff)});
  kv.push_back({prefix + "attention.head_count", u32(g.n_head)});
  kv.push_back({prefix + "attention.head_count_kv", u32(g.n_head_kv)});
  // Stated whenever it is not implied by n_embd / n_head, and always for
  // qwen3, whose real checkpoints state it.
  if (arch.arch == ModelArch::qwen3 || head_dim * g.n_head != g.n_embd) {
    kv.push_back({prefix + "attention.key_length", u32(head_dim)});
    kv.push_back({prefix + "attention.value_length", u32(head_dim)});
  }
  kv.push_back(
      {prefix + "attention.layer_norm_rms_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  kv.push_back({prefix + "rope.dimension_count", u32(head_dim)});
  kv.push_back({prefix + "rope.freq_base", gguf::Value(static_cast<float>(g.rope_base))});
  return kv;
}

}  // namespace cortiq
