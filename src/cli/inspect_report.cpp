#include "cli/inspect_report.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <type_traits>
#include <variant>

#include "base/error.hpp"
#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "cortiq/cortiq.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/family.hpp"
#include "model/hparams.hpp"

namespace cortiq::cli {

namespace {

using gguf::Array;
using gguf::Value;
using gguf::ValueType;

// The longest prefix of `text` of at most max_bytes that does not end inside
// a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

template <class Float>
std::string shortest(Float x) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x);
  return std::string(buffer, result.ptr);
}

// "array[string]", "array[array]", or the scalar type's name.
std::string type_text(const Value& value) {
  if (const Array* array = value.as_array()) {
    return std::string("array[") + gguf::value_type_name(array->element_type) + "]";
  }
  return gguf::value_type_name(value.type());
}

// ---- text -----------------------------------------------------------------

class TextValueFormatter {
 public:
  explicit TextValueFormatter(const InspectOptions& options) : options_(options) {}

  std::string format(const Value& value) const {
    return std::visit([&](const auto& v) { return item(v); }, value.storage());
  }

 private:
  std::string item(const std::string& s) const {
    const size_t limit = options_.full ? s.size() : options_.max_string_bytes;
    const std::string_view shown = utf8_prefix(s, limit);
    std::string out = JsonWriter::quote(shown);  // escapes newlines and quotes readably
    if (shown.size() < s.size()) out += strfmt("... (%s bytes)", with_commas(s.size()).c_str());
    return out;
  }
  std::string item(bool b) const { return b ? "true" : "false"; }
  std::string item(float x) const { return shortest(x); }
  std::string item(double x) const { return shortest(x); }
  template <class Int>
  requires std::is_integral_v<Int> std::string item(Int n)
  const { return std::to_string(n); }
  std::string item(const Array& array) const {
    return std::visit([&](const auto& items) { return list(items); }, array.items);
  }
  template <class T>
  std::string list(const std::vector<T>& items) const {
    const size_t shown = options_.full ? items.size() : std::min(items.size(), options_.max_items);
    std::string out = "[";
    for (size_t i = 0; i < shown; ++i) {
      if (i != 0) out += ", ";
      out += item(static_cast<const T&>(items[i]));
    }
    if (shown < items.size()) {
      out += shown == 0 ? "..." : ", ...";
      out += " (" + with_commas(items.size()) + " items)";
    }
    return out + "]";
  }

  const InspectOptions& options_;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string header_text(const gguf::GgufFile& file) {
  std::string out = strfmt("file        %s\n", file.path().c_str());
  out += strfmt("size        %s bytes (%s)\n", with_commas(file.file_size()).c_str(),
                human_bytes(file.file_size()).c_str());
  out += strfmt("gguf        version %u, alignment %llu, %u split%s\n", file.version(),
                static_cast<unsigned long long>(file.alignment()), file.n_splits(),
                file.n_splits() == 1 ? "" : "s");
  return out;
}

std::string metadata_text(const gguf::GgufFile& file, const InspectOptions& options) {
  const TextValueFormatter formatter(options);
  std::string out = strfmt("\nmetadata    %zu keys\n", file.metadata().size());
  for (const gguf::KeyValue& kv : file.metadata()) {
    out += strfmt("  %-44s %-14s %s\n", kv.key.c_str(), type_text(kv.value).c_str(),
                  formatter.format(kv.value).c_str());
  }
  return out;
}

std::string tensors_text(const gguf::GgufFile& file) {
  std::string out = strfmt("\ntensors     %zu\n", file.tensors().size());
  if (file.tensors().empty()) return out;
  const bool split = file.n_splits() > 1;
  out += strfmt("  %5s  %-40s %-7s %-22s %14s %14s%s\n", "#", "name", "type", "shape", "bytes",
                "offset", split ? "  split" : "");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const gguf::TensorInfo& t = file.tensors()[i];
    out += strfmt("  %5zu  %-40s %-7s %-22s %14llu %14llu", i, t.name.c_str(),
                  std::string(ggml_type_name(t.type)).c_str(), shape_text(t.shape).c_str(),
                  static_cast<unsigned long long>(t.n_bytes),
                  static_cast<unsigned long long>(t.offset));
    out += split ? strfmt("  %5u\n", t.split) : "\n";
  }
  return out;
}

std::string totals_text(const gguf::GgufFile& file) {
  std::string out = "\ntypes\n";
  for (const TypeTotal& total : type_totals(file)) {
    out += strfmt("  %-7s %6zu tensors %16s bytes (%s)\n",
                  std::string(ggml_type_name(total.type)).c_str(), total.count,
                  with_commas(total.bytes).c_str(), human_bytes(total.bytes).c_str());
  }
  const uint64_t params = parameter_count(file);
  out += strfmt("\nparameters  %s (%.2f M)\n", with_commas(params).c_str(),
                static_cast<double>(params) / 1e6);
  return out;
}

// ---- JSON -----------------------------------------------------------------

class JsonValueWriter {
 public:
  JsonValueWriter(JsonWriter& json, const InspectOptions& options)
      : json_(json), options_(options) {}

  // The members "type", "value" (and "element_type", "count", "length",
  // "truncated" where they apply) of one metadata entry.
  void members(const Value& value) {
    json_.key("type").value(gguf::value_type_name(value.type()));
    if (const Array* array = value.as_array()) {
      json_.key("element_type").value(gguf::value_type_name(array->element_type));
      json_.key("count").value(static_cast<uint64_t>(array->size()));
      json_.key("value");
      write(*array);
      if (!options_.full && array->size() > options_.max_items) json_.key("truncated").value(true);
    } else if (const std::string* s = value.as_string()) {
      const std::string_view shown =
          options_.full ? *s : utf8_prefix(*s, options_.max_string_bytes);
      json_.key("value").value(shown);
      if (shown.size() < s->size()) {
        json_.key("length").value(static_cast<uint64_t>(s->size()));
        json_.key("truncated").value(true);
      }
    } else {
      json_.key("value");
      std::visit([&](const auto& v) { write(v); }, value.storage());
    }
  }

 private:
  void write(const std::string& s) { json_.value(std::string_view(s)); }
  void write(bool b) { json_.value(b); }
  void write(float x) { json_.value(x); }
  void write(double x) { json_.value(x); }
  template <class Int>
  requires std::is_integral_v<Int>
  void write(Int n) {
    if constexpr (std::is_signed_v<Int>) {
      json_.value(static_cast<int64_t>(n));
    } else {
      json_.value(static_cast<uint64_t>(n));
    }
  }
  void write(const Array& array) {
    std::visit([&](const auto& items) { write_items(items); }, array.items);
  }
  template <class T>
  void write_items(const std::vector<T>& items) {
    const size_t shown = options_.full ? items.size() : std::min(items.size(), options_.max_items);
    json_.begin_array();
    for (size_t i = 0; i < shown; ++i) write(static_cast<const T&>(items[i]));
    json_.end_array();
  }

  JsonWriter& json_;
  const InspectOptions& options_;
};

}  // namespace

std::vector<TypeTotal> type_totals(const gguf::GgufFile& file) {
  std::map<uint32_t, TypeTotal> by_id;
  for (const gguf::TensorInfo& t : file.tensors()) {
    TypeTotal& total =
        by_id.try_emplace(static_cast<uint32_t>(t.type), TypeTotal{t.type}).first->second;
    ++total.count;
    total.bytes += t.n_bytes;
  }
  std::vector<TypeTotal> totals;
  for (const auto& [id, total] : by_id) totals.push_back(total);
  return totals;
}

uint64_t parameter_count(const gguf::GgufFile& file) {
  uint64_t n = 0;
  for (const gguf::TensorInfo& t : file.tensors()) n += static_cast<uint64_t>(t.n_elements());
  return n;
}

namespace {

// Layers with the same shape, window and RoPE table, as runs.
struct LayerRun {
  int64_t first = 0, last = 0;
  LayerSpec spec;
};

std::vector<LayerRun> layer_runs(const ModelHParams& hp) {
  std::vector<LayerRun> runs;
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    const LayerSpec& s = hp.layer(il);
    if (!runs.empty()) {
      const LayerSpec& p = runs.back().spec;
      if (p.n_head == s.n_head && p.n_head_kv == s.n_head_kv && p.head_dim_k == s.head_dim_k &&
          p.head_dim_v == s.head_dim_v && p.n_ff == s.n_ff && p.window == s.window &&
          p.chunk == s.chunk && p.rope == s.rope && p.values_in_keys == s.values_in_keys &&
          p.state_width == s.state_width && p.recurrent == s.recurrent &&
          runs.back().last == il - 1 && hp.layer_has_experts(il) == hp.layer_has_experts(il - 1)) {
        runs.back().last = il;
        continue;
      }
    }
    runs.push_back({il, il, s});
  }
  return runs;
}

const char* rope_slot_name(RopeSlot slot) {
  switch (slot) {
    case RopeSlot::global:
      return "global RoPE";
    case RopeSlot::local:
      return "local RoPE";
    case RopeSlot::none:
      return "no RoPE";
  }
  return "?";
}

// The KV cache of one sequence (f16; an encoder's f32): bytes per position over all layers,
// and what the trained context takes — with sliding-window layers kept
// whole, and bounded by their window as a session keeps them.
std::string kv_cache_text(const ModelHParams& hp) {
  KvCacheShape shape = kv_cache_shape_of(hp, std::max<int64_t>(hp.n_ctx_train, 1), 1, KvType::f16);
  const bool f32 = shape.type == KvType::f32;  // an encoder's (no f16 rounding)
  uint64_t per_position = 0;
  for (const KvLayerShape& layer : shape.layers) {
    per_position += (f32 ? 4 : 2) * static_cast<uint64_t>(layer.k_width + layer.v_width);
  }
  std::string out =
      strfmt("  KV cache       %s bytes per position (%s), %s at the trained context %lld\n",
             with_commas(per_position).c_str(), f32 ? "f32" : "f16",
             human_bytes(per_position * static_cast<uint64_t>(hp.n_ctx_train)).c_str(),
             static_cast<long long>(hp.n_ctx_train));
  if (const int64_t state = shape.state_width()) {
    out += strfmt("  %-14s %s bytes per sequence (f32), whatever its length\n", "state",
                  with_commas(static_cast<uint64_t>(state) * sizeof(float)).c_str());
  }
  shape.n_ubatch = kDefaultChunkSize;
  if (const int64_t window = shape.bounded_window()) {
    out += strfmt(
        "                 %s there as a session keeps it: the window layers hold %lld "
        "positions (window %lld, chunk %lld), not the context\n",
        human_bytes(KvCache::bytes_needed(shape)).c_str(),
        static_cast<long long>(
            KvWindowRows::blocks_per_sequence(window, kDefaultChunkSize, shape.block_size) *
            shape.block_size),
        static_cast<long long>(window), static_cast<long long>(kDefaultChunkSize));
  }
  return out;
}

// What a recurrent layer runs, with its shapes.
std::string recurrent_text(const ModelHParams& hp, RecurrentKind kind) {
  const auto& m = hp.ssm;
  const auto ll = [](int64_t v) { return static_cast<long long>(v); };
  switch (kind) {
    case RecurrentKind::short_conv:
      return strfmt("short convolution of %lld taps", ll(hp.shortconv_taps));
    case RecurrentKind::mamba:
      return strfmt("Mamba: inner %lld, state %lld, dt rank %lld, %lld taps%s", ll(m.d_inner),
                    ll(m.d_state), ll(m.dt_rank), ll(m.conv_taps),
                    m.dt_b_c_rms ? ", dt/B/C RMS-normed" : "");
    case RecurrentKind::mamba2:
      return strfmt("Mamba-2: inner %lld in %lld heads, state %lld, %lld group(s), %lld taps",
                    ll(m.d_inner), ll(m.n_head), ll(m.d_state), ll(m.n_group), ll(m.conv_taps));
    case RecurrentKind::gated_delta_net:
      return strfmt("Gated DeltaNet: %lld key heads, %lld value heads of %lld, %lld taps",
                    ll(m.n_group), ll(m.n_head), ll(m.d_state), ll(m.conv_taps));
    case RecurrentKind::lightning_attention:
      return strfmt("lightning attention: %lld heads of %lld", ll(hp.n_head), ll(hp.head_dim_k));
    case RecurrentKind::kimi_delta_attention:
      return strfmt("Kimi Delta Attention: %lld heads of %lld, %lld taps", ll(m.n_head),
                    ll(m.d_state), ll(m.conv_taps));
    case RecurrentKind::rwkv6:
    case RecurrentKind::rwkv7:
      return strfmt("RWKV-%d time mix: %lld heads of %lld, token shift",
                    kind == RecurrentKind::rwkv6 ? 6 : 7, ll(hp.n_embd / hp.rwkv.head_size),
                    ll(hp.rwkv.head_size));
    case RecurrentKind::none:
      break;
  }
  return "recurrent";
}

// How the engine reads the file: its family and each layer's description.
std::string model_text(const gguf::GgufFile& file) {
  const Family* family = find_family(file.architecture());
  if (family == nullptr) {
    return "\nmodel       architecture \"" + file.architecture() +
           "\" is not supported (supported: " + supported_architecture_list() + ")\n";
  }
  ModelHParams hp;
  try {
    hp = ModelHParams::from_gguf(file, *family);
  } catch (const Error& e) {
    return std::string("\nmodel       cannot run: ") + e.what() + "\n";
  }
  std::string out = strfmt("\nmodel       %s, %lld layers, n_embd %lld\n", hp.arch.c_str(),
                           static_cast<long long>(hp.n_layer), static_cast<long long>(hp.n_embd));
  for (const LayerRun& run : layer_runs(hp)) {
    const LayerSpec& s = run.spec;
    const std::string layers = run.first == run.last
                                   ? strfmt("layer %lld", static_cast<long long>(run.first))
                                   : strfmt("layers %lld-%lld", static_cast<long long>(run.first),
                                            static_cast<long long>(run.last));
    const std::string window =
        s.window > 0  ? strfmt("window %lld", static_cast<long long>(s.window))
        : s.chunk > 0 ? strfmt("chunks of %lld", static_cast<long long>(s.chunk))
                      : "full attention";
    // ALiBi replaces RoPE in the layers that rotate nothing.
    const std::string position = s.rope == RopeSlot::none && hp.alibi_max_bias > 0.0f
                                     ? strfmt("ALiBi (max bias %g)", hp.alibi_max_bias)
                                     : rope_slot_name(s.rope);
    // A mixture of experts: how many, how many per token, each one's width.
    std::string ffn = strfmt("ff %lld", static_cast<long long>(s.n_ff));
    if (hp.layer_has_experts(run.first)) {
      ffn =
          strfmt("%lld experts (%lld per token) x ff %lld", static_cast<long long>(hp.n_expert),
                 static_cast<long long>(hp.n_expert_used), static_cast<long long>(hp.n_ff_expert));
      if (hp.n_ff_shared_expert > 0) {
        ffn += strfmt(" + shared ff %lld", static_cast<long long>(hp.n_ff_shared_expert));
      }
    }
    // Absorbed latent attention: each head's width, and what the cache holds.
    const std::string heads =
        s.values_in_keys
            ? strfmt("%lld heads x %lld, latent %lld + rope %lld cached",
                     static_cast<long long>(s.n_head), static_cast<long long>(hp.mla_head_dim_k),
                     static_cast<long long>(hp.kv_lora_rank),
                     static_cast<long long>(hp.rope.n_dims))
            : strfmt("%lld heads (%lld KV) x %lld", static_cast<long long>(s.n_head),
                     static_cast<long long>(s.n_head_kv), static_cast<long long>(s.head_dim_k));
    // A layer without FFN (Nemotron-H's Mamba-2 and attention layers).
    if (s.n_ff == 0 && !hp.layer_has_experts(run.first)) ffn = "no FFN";
    if (s.is_recurrent()) {
      out += strfmt("  %-14s %s (state %lld floats)", layers.c_str(),
                    recurrent_text(hp, s.recurrent).c_str(), static_cast<long long>(s.state_width));
      // Falcon-H1's layers attend beside their Mamba-2 mixer.
      if (s.n_head_kv > 0) {
        out += strfmt(", beside attention: %s, %s, %s", heads.c_str(), window.c_str(),
                      position.c_str());
      }
      out += ", " + ffn + "\n";
      continue;
    }
    // An FFN-only layer (Nemotron-H's).
    if (s.n_head == 0) {
      out += strfmt("  %-14s no attention, %s\n", layers.c_str(), ffn.c_str());
      continue;
    }
    out += strfmt("  %-14s %s, %s, %s, %s\n", layers.c_str(), heads.c_str(), ffn.c_str(),
                  window.c_str(), position.c_str());
  }
  if (!hp.mtp_layers.empty()) {
    out += strfmt("  %-14s %zu multi-token-prediction layer(s) after the trunk: checked, not run\n",
                  "mtp", hp.mtp_layers.size());
  }
  out += kv_cache_text(hp);
  return out;
}

}  // namespace

std::string inspect_text(const gguf::GgufFile& file, const InspectOptions& options) {
  return header_text(file) + model_text(file) + metadata_text(file, options) + tensors_text(file) +
         totals_text(file);
}

std::string inspect_json(const gguf::GgufFile& file, const InspectOptions& options) {
  JsonWriter json(2);
  JsonValueWriter values(json, options);
  json.begin_object();
  json.key("file").value(file.path());
  json.key("file_size").value(file.file_size());
  json.key("version").value(file.version());
  json.key("alignment").value(file.alignment());
  json.key("splits").value(file.n_splits());
  json.key("metadata").begin_array();
  for (const gguf::KeyValue& kv : file.metadata()) {
    json.begin_object().key("key").value(kv.key);
    values.members(kv.value);
    json.end_object();
  }
  json.end_array();
  json.key("tensors").begin_array();
  for (const gguf::TensorInfo& t : file.tensors()) {
    json.begin_object();
    json.key("name").value(t.name);
    json.key("type").value(ggml_type_name(t.type));
    json.key("shape").begin_array();
    for (const int64_t d : t.shape) json.value(d);
    json.end_array();
    json.key("n_elements").value(static_cast<int64_t>(t.n_elements()));
    json.key("bytes").value(t.n_bytes);
    json.key("offset").value(t.offset);
    json.key("split").value(t.split);
    json.end_object();
  }
  json.end_array();
  json.key("types").begin_array();
  for (const TypeTotal& total : type_totals(file)) {
    json.begin_object();
    json.key("type").value(ggml_type_name(total.type));
    json.key("count").value(static_cast<uint64_t>(total.count));
    json.key("bytes").value(total.bytes);
    json.end_object();
  }
  json.end_array();
  json.key("n_tensors").value(static_cast<uint64_t>(file.tensors().size()));
  json.key("parameters").value(parameter_count(file));
  json.end_object();
  return json.take() + "\n";
}

}  // namespace cortiq::cli
