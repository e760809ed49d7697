#include "quant/quant_recipe.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <numeric>

namespace cortiq {

namespace {

// llama.cpp's LLAMA_FTYPE_* numbers (include/llama.h).
namespace ftype {
constexpr uint32_t kAllF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9,
                   kQ2_K = 10, kQ3_K_S = 11, kQ3_K_M = 12, kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15,
                   kQ5_K_S = 16, kQ5_K_M = 17, kQ6_K = 18, kIQ4_NL = 25, kBF16 = 32,
                   kMXFP4_MOE = 38;
}  // namespace ftype

constexpr QuantRecipe kRecipes[] = {
    {"F32", ftype::kAllF32, GgmlType::F32, "float32, no quantization"},
    {"F16", ftype::kF16, GgmlType::F16, "IEEE half"},
    {"BF16", ftype::kBF16, GgmlType::BF16, "bfloat16"},
    {"Q8_0", ftype::kQ8_0, GgmlType::Q8_0, "8.5 bits per weight"},
    {"Q5_1", ftype::kQ5_1, GgmlType::Q5_1, "6.0 bpw, output Q6_K"},
    {"Q5_0", ftype::kQ5_0, GgmlType::Q5_0, "5.5 bpw, output Q6_K"},
    {"Q4_1", ftype::kQ4_1, GgmlType::Q4_1, "5.0 bpw, output Q6_K"},
    {"Q4_0", ftype::kQ4_0, GgmlType::Q4_0, "4.5 bpw, output Q6_K"},
    {"IQ4_NL", ftype::kIQ4_NL, GgmlType::IQ4_NL, "4.5 bpw non-linear, output Q6_K"},
    {"MXFP4", ftype::kMXFP4_MOE, GgmlType::MXFP4, "4.25 bpw microscaling fp4, output Q8_0"},
    {"Q6_K", ftype::kQ6_K, GgmlType::Q6_K, "6.56 bpw k-quant"},
    {"Q5_K_M", ftype::kQ5_K_M, GgmlType::Q5_K, "Q5_K, some attn_v/ffn_down Q6_K"},
    {"Q5_K_S", ftype::kQ5_K_S, GgmlType::Q5_K, "Q5_K, output Q6_K"},
    {"Q4_K_M", ftype::kQ4_K_M, GgmlType::Q4_K, "Q4_K, some attn_v/ffn_down Q6_K"},
    {"Q4_K_S", ftype::kQ4_K_S, GgmlType::Q4_K, "Q4_K, first layers Q5_K"},
    {"Q3_K_L", ftype::kQ3_K_L, GgmlType::Q3_K, "Q3_K, attn_v/attn_output/ffn_down Q5_K"},
    {"Q3_K_M", ftype::kQ3_K_M, GgmlType::Q3_K, "Q3_K, attn_v/attn_output/ffn_down Q4_K/Q5_K"},
    {"Q3_K_S", ftype::kQ3_K_S, GgmlType::Q3_K, "Q3_K, output Q6_K"},
    {"Q2_K", ftype::kQ2_K, GgmlType::Q2_K, "Q2_K, attn_v/attn_output/ffn_down Q3_K/Q4_K"},
};

struct RecipeAlias {
  std::string_view alias;
  std::string_view recipe;
};
constexpr RecipeAlias kAliases[] = {{"Q3_K", "Q3_K_M"}, {"Q4_K", "Q4_K_M"}, {"Q5_K", "Q5_K_M"}};

// Which layers a mixture rule applies to. i is the tensor's position among
// the tensors of its role (the layer for ffn_down), n their count.
enum class When {
  always,
  more_bits,        // llama.cpp's use_more_bits: first and last eighth, every third between
  first_eighth,     // i < n/8
  first_sixteenth,  // i < n/16
  first_two,        // i < 2
  first_four,       // i < 4
  gqa_at_least_4,   // the model has 4+ query heads per KV head (any layer)
};

struct MixtureRule {
  uint32_t file_type;
  TensorRole role;
  When when;
  GgmlType type;
};

// The subset of llama_tensor_get_type for dense models without an
// importance matrix. For a (file type, role) the first matching rule wins;
// no match keeps the recipe's default type. The output matrix has its own
// rule (output_type below).
constexpr MixtureRule kMixtureRules[] = {
    // attn_v: the smallest attention matrix under GQA, cheap to keep precise.
    {ftype::kQ2_K, TensorRole::attn_v, When::gqa_at_least_4, GgmlType::Q4_K},
    {ftype::kQ2_K, TensorRole::attn_v, When::always, GgmlType::Q3_K},
    {ftype::kQ3_K_M, TensorRole::attn_v, When::first_two, GgmlType::Q5_K},
    {ftype::kQ3_K_M, TensorRole::attn_v, When::always, GgmlType::Q4_K},
    {ftype::kQ3_K_L, TensorRole::attn_v, When::always, GgmlType::Q5_K},
    {ftype::kIQ4_NL, TensorRole::attn_v, When::gqa_at_least_4, GgmlType::Q5_K},
    {ftype::kQ4_K_M, TensorRole::attn_v, When::more_bits, GgmlType::Q6_K},
    {ftype::kQ5_K_M, TensorRole::attn_v, When::more_bits, GgmlType::Q6_K},
    {ftype::kQ4_K_S, TensorRole::attn_v, When::first_four, GgmlType::Q5_K},
    // ffn_down: the most sensitive FFN matrix.
    {ftype::kQ2_K, TensorRole::ffn_down, When::always, GgmlType::Q3_K},
    {ftype::kQ3_K_M, TensorRole::ffn_down, When::first_sixteenth, GgmlType::Q5_K},
    {ftype::kQ3_K_M, TensorRole::ffn_down, When::always, GgmlType::Q4_K},
    {ftype::kQ3_K_L, TensorRole::ffn_down, When::always, GgmlType::Q5_K},
    {ftype::kQ4_K_M, TensorRole::ffn_down, When::more_bits, GgmlType::Q6_K},
    {ftype::kIQ4_NL, TensorRole::ffn_down, When::first_eighth, GgmlType::Q5_K},
    {ftype::kQ5_K_M, TensorRole::ffn_down, When::more_bits, GgmlType::Q6_K},
    {ftype::kQ4_K_S, TensorRole::ffn_down, When::first_eighth, GgmlType::Q5_K},
    // attn_output
    {ftype::kQ2_K, TensorRole::attn_output, When::always, GgmlType::Q3_K},
    {ftype::kQ3_K_M, TensorRole::attn_output, When::always, GgmlType::Q4_K},
    {ftype::kQ3_K_L, TensorRole::attn_output, When::always, GgmlType::Q5_K},
};

// Tensors the peer never quantizes although they are 2-D weights: small
// tables, routers and position encodings, matched by substring.
constexpr std::string_view kKeptAsIs[] = {
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
};
constexpr std::string_view kKeptAsIsExact[] = {"position_embd.weight", "token_types.weight"};

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::toupper(static_cast<unsigned char>(x)) ==
                  std::toupper(static_cast<unsigned char>(y));
         });
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

bool rule_applies(When when, int64_t i, int64_t n, const ModelShape& model) {
  switch (when) {
    case When::always:
      return true;
    case When::more_bits:
      return use_more_bits(i, n);
    case When::first_eighth:
      return i < n / 8;
    case When::first_sixteenth:
      return i < n / 16;
    case When::first_two:
      return i < 2;
    case When::first_four:
      return i < 4;
    case When::gqa_at_least_4:
      return model.n_gqa() >= 4;
  }
  return false;
}

// "blk.12.ffn_down.weight" -> 12; -1 when the name has no layer.
int64_t layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  name.remove_prefix(4);
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  return ec == std::errc() && end != name.data() && *end == '.' ? layer : -1;
}

// The output matrix (and a tied token embedding, which serves as output):
// Q6_K for every quantized recipe, Q8_0 when the row is not a whole number of
// the default type's blocks, when the default is Q8_0 already, or for MXFP4.
GgmlType output_type(const QuantRecipe& recipe, int64_t row_length) {
  const GgmlType base = recipe.default_type;
  if (recipe.file_type == ftype::kMXFP4_MOE) return GgmlType::Q8_0;
  if (row_length % ggml_type_traits(base).block_elems != 0) return GgmlType::Q8_0;
  return base == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
}

GgmlType mixture_type(const QuantRecipe& recipe, TensorRole role, int64_t i, int64_t n,
                      const ModelShape& model) {
  for (const MixtureRule& rule : kMixtureRules) {
    if (rule.file_type == recipe.file_type && rule.role == role &&
        rule_applies(rule.when, i, n, model)) {
      return rule.type;
    }
  }
  return recipe.default_type;
}

// Position of each attn_v-like tensor among all of them, ordered by layer
// then name (the order in which the peer counts them).
std::vector<int64_t> attn_v_ordinals(std::span<const TensorDesc> tensors) {
  std::vector<size_t> order;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensor_role(tensors[i].name) == TensorRole::attn_v) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int64_t la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  std::vector<int64_t> ordinal(tensors.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) ordinal[order[k]] = static_cast<int64_t>(k);
  return ordinal;
}

}  // namespace

std::span<const QuantRecipe> quant_recipes() {
  return kRecipes;
}

const QuantRecipe* find_quant_recipe(std::string_view name) {
  for (const RecipeAlias& a : kAliases) {
    if (equal_ignoring_case(a.alias, name)) name = a.recipe;
  }
  for (const QuantRecipe& r : kRecipes) {
    if (equal_ignoring_case(r.name, name)) return &r;
  }
  return nullptr;
}

uint32_t file_type_for_uniform_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return ftype::kAllF32;
    case GgmlType::F16:
      return ftype::kF16;
    case GgmlType::BF16:
      return ftype::kBF16;
    case GgmlType::Q4_0:
      return ftype::kQ4_0;
    case GgmlType::Q4_1:
      return ftype::kQ4_1;
    case GgmlType::Q5_0:
      return ftype::kQ5_0;
    case GgmlType::Q5_1:
      return ftype::kQ5_1;
    case GgmlType::Q8_0:
      return ftype::kQ8_0;
    case GgmlType::Q2_K:
      return ftype::kQ2_K;
    case GgmlType::Q3_K:
      return ftype::kQ3_K_S;
    case GgmlType::Q4_K:
      return ftype::kQ4_K_S;
    case GgmlType::Q5_K:
      return ftype::kQ5_K_S;
    case GgmlType::Q6_K:
      return ftype::kQ6_K;
    case GgmlType::IQ4_NL:
      return ftype::kIQ4_NL;
    case GgmlType::MXFP4:
      return ftype::kMXFP4_MOE;
    default:
      return ftype::kAllF32;
  }
}

TensorRole tensor_role(std::string_view name) {
  if (name == "output.weight") return TensorRole::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") {
    return TensorRole::token_embd;
  }
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
      contains(name, "attn_v.weight")) {
    return TensorRole::attn_v;
  }
  if (contains(name, "attn_k.weight")) return TensorRole::attn_k;
  if (contains(name, "attn_q.weight")) return TensorRole::attn_q;
  if (contains(name, "attn_output.weight")) return TensorRole::attn_output;
  if (contains(name, "ffn_up")) return TensorRole::ffn_up;
  if (contains(name, "ffn_gate")) return TensorRole::ffn_gate;
  if (contains(name, "ffn_down")) return TensorRole::ffn_down;
  return TensorRole::other;
}

size_t effective_dims(std::span<const int64_t> shape) {
  size_t n = shape.size();
  while (n > 1 && shape[n - 1] == 1) --n;
  return std::max<size_t>(n, 1);
}

bool tensor_is_quantizable(std::string_view name, std::span<const int64_t> shape) {
  if (effective_dims(shape) < 2 || !name.ends_with("weight")) return false;
  for (std::string_view part : kKeptAsIs) {
    if (contains(name, part)) return false;
  }
  for (std::string_view exact : kKeptAsIsExact) {
    if (name == exact) return false;
  }
  return true;
}

GgmlType fallback_type(GgmlType wanted, int64_t row_length) {
  const auto fits = [&](GgmlType t) { return row_length % ggml_type_traits(t).block_elems == 0; };
  if (fits(wanted)) return wanted;
  GgmlType smaller_block = wanted;
  switch (wanted) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      smaller_block = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      smaller_block = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      smaller_block = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      smaller_block = GgmlType::Q8_0;
      break;
    case GgmlType::IQ4_XS:
      smaller_block = GgmlType::IQ4_NL;
      break;
    default:
      break;  // a 32-block type has nothing smaller than itself but F16
  }
  return fits(smaller_block) ? smaller_block : GgmlType::F16;
}

std::vector<TensorTypeChoice> choose_tensor_types(const QuantRecipe& recipe, bool pure,
                                                  const ModelShape& model,
                                                  std::span<const TensorDesc> tensors) {
  const bool tied_embeddings =
      std::none_of(tensors.begin(), tensors.end(),
                   [](const TensorDesc& t) { return tensor_role(t.name) == TensorRole::output; });
  const std::vector<int64_t> v_ordinal = attn_v_ordinals(tensors);
  const int64_t n_attn_v =
      std::count_if(v_ordinal.begin(), v_ordinal.end(), [](int64_t k) { return k >= 0; });
  int64_t n_layer = model.n_layer;
  if (n_layer == 0) {
    for (const TensorDesc& t : tensors) n_layer = std::max(n_layer, layer_of(t.name) + 1);
  }
  const bool mixture = !pure && ggml_type_traits(recipe.default_type).quantized;

  std::vector<TensorTypeChoice> choices(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const TensorDesc& t = tensors[k];
    TensorTypeChoice& choice = choices[k];
    choice.quantize = tensor_is_quantizable(t.name, t.shape);
    if (!choice.quantize) continue;
    const int64_t row_length = t.shape.empty() ? 1 : t.shape[0];
    GgmlType wanted = recipe.default_type;
    if (mixture) {
      const TensorRole role = tensor_role(t.name);
      if (role == TensorRole::output || (tied_embeddings && role == TensorRole::token_embd)) {
        wanted = output_type(recipe, row_length);
      } else if (role == TensorRole::attn_v) {
        wanted = mixture_type(recipe, role, v_ordinal[k], n_attn_v, model);
      } else {
        wanted = mixture_type(recipe, role, layer_of(t.name), n_layer, model);
      }
    }
    choice.wanted = wanted;
    choice.type = fallback_type(wanted, row_length);
  }
  return choices;
}

}  // namespace cortiq
