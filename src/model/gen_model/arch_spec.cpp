#include "model/gen_model/arch_spec.hpp"

#include <algorithm>
#include <limits>

#include "base/error.hpp"
#include "base/strings.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "model/family.hpp"

namespace cortiq {

namespace {

// Rope base and epsilon are written as f32: check the value the file will
// hold, or 1e-50 passes as positive and is stored as 0 (1e39 as inf).
bool positive_as_f32(double v) {
  return v > 0 && v <= std::numeric_limits<float>::max() && static_cast<float>(v) > 0;
}

void require(bool ok, const std::string& problem) {
  if (!ok) throw Error("invalid model geometry: " + problem);
}

// The keys every family's converter writes.
std::vector<gguf::KeyValue> common_metadata(const Family& family, const ModelGeometry& g) {
  const std::string prefix = std::string(family.arch) + ".";
  std::vector<gguf::KeyValue> kv;
  kv.push_back({"general.architecture", gguf::Value(std::string(family.arch))});
  kv.push_back({prefix + "vocab_size", u32_value(g.n_vocab)});
  kv.push_back({prefix + "context_length", u32_value(g.n_ctx)});
  kv.push_back({prefix + "embedding_length", u32_value(g.n_embd)});
  kv.push_back({prefix + "block_count", u32_value(g.n_layer)});
  kv.push_back({prefix + "feed_forward_length", u32_value(g.n_ff)});
  kv.push_back({prefix + "attention.head_count", u32_value(g.n_head)});
  kv.push_back({prefix + "attention.head_count_kv", u32_value(g.n_head_kv)});
  write_head_size(g, family, kv, /*always=*/false);
  kv.push_back(
      {prefix + "attention.layer_norm_rms_epsilon", gguf::Value(static_cast<float>(g.rms_eps))});
  kv.push_back({prefix + "rope.dimension_count", u32_value(g.resolved_head_dim())});
  kv.push_back({prefix + "rope.freq_base", gguf::Value(static_cast<float>(g.rope_base))});
  return kv;
}

// The hyper-parameters the loader reads from these keys.
ModelHParams parse_back(const Family& family, const std::vector<gguf::KeyValue>& metadata) {
  gguf::GgufWriter writer;
  for (const gguf::KeyValue& kv : metadata) writer.set(kv.key, kv.value);
  writer.begin_in_memory();
  const std::vector<std::byte> bytes = writer.finish_in_memory();
  const gguf::GgufFile file = gguf::GgufFile::parse(bytes, "<gen-model metadata>");
  return ModelHParams::from_gguf(file, family);
}

bool wanted(const TensorSpec& spec, const Family& family, const ModelGeometry& g,
            OptionalTensors optional) {
  if (spec.required) return true;
  if (spec.name == "output.weight") return !g.tied;
  if (optional == OptionalTensors::all) return true;
  return std::any_of(family.converted_optional.begin(), family.converted_optional.end(),
                     [&](std::string_view suffix) { return spec.name.ends_with(suffix); });
}

}  // namespace

gguf::Value u32_value(int64_t v) {
  return gguf::Value(static_cast<uint32_t>(v));
}

void write_expert_counts(const ModelGeometry& g, std::string_view arch,
                         std::vector<gguf::KeyValue>& keys, int64_t default_used) {
  const std::string p = std::string(arch) + ".";
  keys.push_back({p + "expert_count", u32_value(g.n_expert > 0 ? g.n_expert : 4)});
  keys.push_back(
      {p + "expert_used_count", u32_value(g.n_expert_used > 0 ? g.n_expert_used : default_used)});
}

void write_half_rotary(const ModelGeometry& g, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys) {
  int64_t rot = (g.resolved_head_dim() / 2) & ~int64_t{1};
  if (rot == 0) rot = g.resolved_head_dim();
  const std::string key = std::string(arch) + ".rope.dimension_count";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == key) kv.value = u32_value(rot);
  }
}

void write_u32_per_layer(const std::string& key, int64_t n,
                         const std::function<int64_t(int64_t)>& value_of,
                         std::vector<gguf::KeyValue>& keys) {
  gguf::Array values = gguf::Array::of(gguf::ValueType::u32);
  auto& items = std::get<std::vector<uint32_t>>(values.items);
  for (int64_t i = 0; i < n; ++i) items.push_back(static_cast<uint32_t>(value_of(i)));
  const auto it = std::ranges::find(keys, key, &gguf::KeyValue::key);
  if (it != keys.end()) {
    it->value = gguf::Value(values);
  } else {
    keys.push_back({key, gguf::Value(values)});
  }
}

void write_mamba2_keys(const ModelGeometry& g, std::string_view arch,
                       std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  keys.push_back({p + "ssm.conv_kernel", u32_value(4)});
  keys.push_back({p + "ssm.inner_size", u32_value(2 * g.n_embd)});
  keys.push_back({p + "ssm.state_size", u32_value(16)});
  keys.push_back({p + "ssm.time_step_rank", u32_value(2 * g.n_embd / 16)});
  keys.push_back({p + "ssm.group_count", u32_value(1)});
}

void write_mamba_keys(const ModelGeometry& g, std::string_view arch,
                      std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  keys.push_back({p + "ssm.conv_kernel", u32_value(4)});
  keys.push_back({p + "ssm.inner_size", u32_value(2 * g.n_embd)});
  keys.push_back({p + "ssm.state_size", u32_value(16)});
  keys.push_back({p + "ssm.time_step_rank", u32_value(std::max<int64_t>(1, g.n_embd / 16))});
}

void write_mtp_layer(const ModelGeometry& g, std::string_view arch,
                     std::vector<gguf::KeyValue>& keys) {
  const std::string p = std::string(arch) + ".";
  for (gguf::KeyValue& kv : keys) {
    if (kv.key == p + "block_count") kv.value = u32_value(g.n_layer + 1);
  }
  keys.push_back({p + "nextn_predict_layers", u32_value(1)});
}

void validate_geometry(const Family& family, const ModelGeometry& g) {
  require(g.n_vocab > 0, "the vocabulary is empty");
  require(g.n_embd > 0 && g.n_layer > 0 && g.n_head > 0 && g.n_head_kv > 0 && g.n_ff > 0 &&
              g.n_ctx > 0 && g.head_dim >= 0,
          "every size must be positive");
  require(g.n_head % g.n_head_kv == 0,
          strfmt("%lld heads do not split into groups of %lld KV heads",
                 static_cast<long long>(g.n_head), static_cast<long long>(g.n_head_kv)));
  if (g.head_dim == 0 || family.fixed_head_dim) {
    require(g.n_embd % g.n_head == 0,
            strfmt("n_embd %lld is not a multiple of %lld heads", static_cast<long long>(g.n_embd),
                   static_cast<long long>(g.n_head)));
  }
  if (family.fixed_head_dim) {
    require(g.head_dim == 0 || g.head_dim * g.n_head == g.n_embd,
            std::string(family.arch) + " needs head_dim = n_embd / n_head");
  }
  require(g.resolved_head_dim() % 2 == 0, "head_dim must be even (RoPE rotates pairs)");
  require(positive_as_f32(g.rope_base), "rope base must be a positive f32");
  require(positive_as_f32(g.rms_eps), "RMS norm epsilon must be a positive f32");
}

void write_head_size(const ModelGeometry& g, const Family& family,
                     std::vector<gguf::KeyValue>& keys, bool always) {
  const std::string prefix = std::string(family.arch) + ".";
  const int64_t head_dim = g.resolved_head_dim();
  if (!always && head_dim * g.n_head == g.n_embd) return;
  const std::string key_length = prefix + "attention.key_length";
  if (std::any_of(keys.begin(), keys.end(),
                  [&](const gguf::KeyValue& kv) { return kv.key == key_length; })) {
    return;
  }
  keys.push_back({key_length, u32_value(head_dim)});
  keys.push_back({prefix + "attention.value_length", u32_value(head_dim)});
}

ModelSpec model_spec(const Family& family, const ModelGeometry& g, OptionalTensors optional) {
  validate_geometry(family, g);
  ModelSpec spec;
  spec.metadata = common_metadata(family, g);
  if (family.write_hparams != nullptr) family.write_hparams(g, spec.metadata);
  const ModelHParams hp = parse_back(family, spec.metadata);
  for (TensorSpec& t : family.tensors(hp)) {
    if (wanted(t, family, g, optional)) spec.tensors.push_back(std::move(t));
  }
  return spec;
}

}  // namespace cortiq
