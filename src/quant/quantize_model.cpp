#include "quant/quantize_model.hpp"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <variant>

#include "base/error.hpp"
#include "base/log.hpp"
#include "base/strings.hpp"
#include "base/thread_pool.hpp"
#include "base/timer.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "quant/quantize.hpp"

namespace cortiq {

namespace {

// Rows are converted in chunks of about this many elements, so progress is
// reported often enough on big tensors and the pool stays busy.
constexpr int64_t kChunkElements = int64_t{1} << 22;

// A u32 hyper-parameter; for per-layer arrays (some models vary the head
// count by layer) the largest entry. 0 when absent or not an integer.
uint32_t hparam_u32(const gguf::GgufFile& model, const std::string& key) {
  const gguf::Value* value = model.find(key);
  if (value == nullptr) return 0;
  uint64_t result = 0;
  if (const auto u = value->as_uint()) {
    result = *u;
  } else if (const gguf::Array* array = value->as_array()) {
    std::visit(
        [&](const auto& items) {
          using Item = typename std::decay_t<decltype(items)>::value_type;
          if constexpr (std::is_integral_v<Item> && !std::is_same_v<Item, bool>) {
            for (const Item item : items) {
              if (item > 0) result = std::max(result, static_cast<uint64_t>(item));
            }
          }
        },
        array->items);
  }
  return static_cast<uint32_t>(std::min<uint64_t>(result, std::numeric_limits<uint32_t>::max()));
}

bool is_split_key(std::string_view key) {
  return key.starts_with("split.");
}

uint64_t input_tensor_bytes(const gguf::GgufFile& model) {
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : model.tensors()) total += t.n_bytes;
  return total;
}

// Refuses, before anything is written, a conversion we cannot do.
void check_plan(const std::vector<TensorPlan>& plan) {
  for (const TensorPlan& p : plan) {
    if (!p.converts()) continue;
    require_supported_weight_type(p.from, p.name);
    if (!can_quantize(p.to)) {
      throw Error("cannot write weight type " + std::string(ggml_type_name(p.to)) + " for tensor " +
                  p.name);
    }
  }
}

void warn_about_plan(const std::vector<TensorPlan>& plan) {
  size_t n_requantized = 0;
  const TensorPlan* example = nullptr;
  for (const TensorPlan& p : plan) {
    if (p.fell_back()) {
      LOG_WARN("%s: row length %lld is not a multiple of the %s block (%u); using %s",
               p.name.c_str(), static_cast<long long>(p.shape.empty() ? 1 : p.shape[0]),
               std::string(ggml_type_name(p.wanted)).c_str(),
               ggml_type_traits(p.wanted).block_elems, std::string(ggml_type_name(p.to)).c_str());
    }
    if (p.converts() && ggml_type_traits(p.from).quantized) {
      ++n_requantized;
      if (example == nullptr) example = &p;
    }
  }
  if (example != nullptr) {
    LOG_WARN(
        "%zu tensor(s) are quantized already (e.g. %s is %s); quantizing them again loses "
        "precision: start from an F32/F16/BF16 model when you can",
        n_requantized, example->name.c_str(), std::string(ggml_type_name(example->from)).c_str());
  }
}

class TensorConverter {
 public:
  TensorConverter(ThreadPool& pool, const QuantizeOptions& options, QuantizeProgress& progress,
                  const Timer& timer)
      : pool_(pool), options_(options), progress_(progress), timer_(timer) {}

  // Converts all rows of `source` (type from) into `out` (type to).
  void convert(const TensorPlan& plan, std::span<const std::byte> source,
               std::vector<std::byte>& out) {
    const int64_t row_length = plan.shape.empty() ? 1 : plan.shape[0];
    if (row_length == 0) {  // no elements, and no row size to divide by below
      out.clear();
      return;
    }
    const uint64_t in_row = *ggml_row_bytes(plan.from, static_cast<uint64_t>(row_length));
    const uint64_t out_row = *ggml_row_bytes(plan.to, static_cast<uint64_t>(row_length));
    const int64_t n_rows = static_cast<int64_t>(source.size() / in_row);
    out.resize(static_cast<size_t>(out_row * static_cast<uint64_t>(n_rows)));
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / row_length);
    for (int64_t first = 0; first < n_rows; first += rows_per_chunk) {
      const int64_t count = std::min(rows_per_chunk, n_rows - first);
      pool_.parallel_for(count, [&](int64_t begin, int64_t end) {
        std::vector<float> row(static_cast<size_t>(row_length));
        for (int64_t r = first + begin; r < first + end; ++r) {
          dequantize_row(plan.from, source.subspan(r * in_row, in_row), row);
          quantize_row(plan.to, row, std::span(out).subspan(r * out_row, out_row));
        }
      });
      report(plan, count * in_row);
    }
  }

  void report(const TensorPlan& plan, uint64_t bytes) {
    progress_.bytes_done += bytes;
    progress_.seconds = timer_.seconds();
    progress_.tensor = plan.name;
    if (options_.on_progress) options_.on_progress(progress_);
  }

 private:
  ThreadPool& pool_;
  const QuantizeOptions& options_;
  QuantizeProgress& progress_;
  const Timer& timer_;
};

}  // namespace

ModelShape model_shape_of(const gguf::GgufFile& model) {
  const std::string arch = model.architecture();
  ModelShape shape;
  shape.n_layer = hparam_u32(model, arch + ".block_count");
  shape.n_head = hparam_u32(model, arch + ".attention.head_count");
  shape.n_head_kv = hparam_u32(model, arch + ".attention.head_count_kv");
  if (shape.n_head_kv == 0) shape.n_head_kv = shape.n_head;  // no key: no GQA
  shape.n_expert = hparam_u32(model, arch + ".expert_count");
  return shape;
}

std::vector<TensorPlan> plan_quantization(const gguf::GgufFile& model, const QuantRecipe& recipe,
                                          bool pure) {
  std::vector<TensorDesc> descs;
  descs.reserve(model.tensors().size());
  for (const gguf::TensorInfo& t : model.tensors()) descs.push_back({t.name, t.shape});
  const std::vector<TensorTypeChoice> choices =
      choose_tensor_types(recipe, pure, model_shape_of(model), descs);

  std::vector<TensorPlan> plan;
  plan.reserve(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    const gguf::TensorInfo& t = model.tensors()[i];
    TensorPlan p{t.name, t.shape, t.type, t.type, t.type};
    if (choices[i].quantize) {
      p.to = choices[i].type;
      p.wanted = choices[i].wanted;
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

QuantizeSummary quantize_model(const std::filesystem::path& input,
                               const std::filesystem::path& output, const QuantRecipe& recipe,
                               const QuantizeOptions& options) {
  const Timer timer;
  const gguf::GgufFile model = gguf::GgufFile::open(input);
  const std::vector<TensorPlan> plan = plan_quantization(model, recipe, options.pure);
  check_plan(plan);
  warn_about_plan(plan);

  gguf::GgufWriter writer(model.alignment());
  for (const gguf::KeyValue& kv : model.metadata()) {
    // The writer owns general.alignment; split keys describe the input's parts.
    if (kv.key == "general.alignment" || is_split_key(kv.key)) continue;
    writer.set(kv.key, kv.value);
  }
  writer.set("general.quantization_version", gguf::Value(kQuantizationVersion));
  writer.set("general.file_type", gguf::Value(recipe.file_type));
  for (const TensorPlan& p : plan) writer.add_tensor(p.name, p.to, p.shape);
  writer.begin(output);

  ThreadPool pool(options.n_threads);
  QuantizeProgress progress;
  progress.tensors_total = plan.size();
  progress.bytes_total = input_tensor_bytes(model);
  TensorConverter converter(pool, options, progress, timer);
  QuantizeSummary summary;
  std::vector<std::byte> converted;
  for (size_t i = 0; i < plan.size(); ++i) {
    const TensorPlan& p = plan[i];
    const gguf::TensorInfo& t = model.tensors()[i];
    if (t.data.size() != t.n_bytes) {
      throw Error(model.path() + ": tensor " + t.name + " has no data in the file");
    }
    if (p.converts()) {
      converter.convert(p, t.data, converted);
      writer.write_tensor_data(converted);
      ++summary.n_converted;
      if (ggml_type_traits(p.from).quantized) ++summary.n_requantized;
    } else {
      writer.write_tensor_data(t.data);
      converter.report(p, t.n_bytes);
    }
    if (p.fell_back()) ++summary.n_fallbacks;
    progress.tensors_done = i + 1;
    converter.report(p, 0);
  }
  writer.finish();

  summary.input_bytes = model.file_size();
  summary.output_bytes = std::filesystem::file_size(output);
  summary.n_tensors = plan.size();
  summary.seconds = timer.seconds();
  return summary;
}

}  // namespace cortiq
