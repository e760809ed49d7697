// Layer stages (model/layer_stage.hpp): a forward pass over layers [a, b),
// from the hidden states entering layer a, each stage with a cache of its
// own, as a pipeline split across processes runs them. For every family,
// running [0, k) then [k, n) — and every layer as a stage of its own —
// gives the bits of running [0, n), over a prefill that crosses the test
// models' 16-position windows and the decode steps after it. So does the
// split inside one pass, each side on a backend of its own (BackendSplit,
// what -ngl runs), over one cache that keeps each side's rows apart.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "base/thread_pool.hpp"
#include "cortiq/cortiq.hpp"
#include "counting_backend.hpp"
#include "engine_test_models.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/family.hpp"

namespace cortiq {
namespace {

constexpr int64_t kLayers = 6;
constexpr int64_t kCells = 64;

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A prefill of 20 rows, then three decode rows, every row asking for its
// output; an encoder sees its sequence whole, in one pass.
std::vector<std::vector<BatchRow>> test_batches(bool encoder) {
  const std::vector<TokenId> ids = test::prompt_of(23, 5);
  std::vector<std::vector<BatchRow>> batches(1);
  for (int32_t pos = 0; pos < static_cast<int32_t>(ids.size()); ++pos) {
    if (!encoder && pos >= 20) batches.emplace_back();
    batches.back().push_back({ids[static_cast<size_t>(pos)], pos, 0, true});
  }
  return batches;
}

// Every batch through the stages whose layers start at each of `bounds`
// (the last bound is the layer count): each stage keeps its own cache and
// takes the rows the previous one handed on. The last stage's outputs, one
// batch after another.
std::vector<float> run_stages(const Model& model, const std::vector<int64_t>& bounds) {
  const DecoderModel& decoder = model.decoder();
  const ModelHParams& hp = decoder.hparams();
  const RowOutput output = hp.encoder ? RowOutput::hidden : RowOutput::logits;
  const size_t n_stages = bounds.size() - 1;
  std::vector<std::unique_ptr<KvCache>> caches;
  std::vector<ForwardBuffers> buffers(n_stages);
  for (size_t s = 0; s < n_stages; ++s) {
    caches.push_back(std::make_unique<KvCache>(decoder.kv_cache_shape(kCells, 1, KvType::f32)));
  }
  const auto stage_width = static_cast<size_t>(decoder.stage_width());
  const auto out_width = static_cast<size_t>(hp.encoder ? hp.n_embd : hp.n_vocab);
  std::vector<float> outputs;
  for (const auto& batch : test_batches(hp.encoder)) {
    std::vector<float> handed_on;
    for (size_t s = 0; s < n_stages; ++s) {
      const bool last = s + 1 == n_stages;
      CpuBackend cpu(model.pool(), buffers[s].cpu);
      ForwardContext ctx{cpu, buffers[s], output};
      ctx.stage = {.first = bounds[s], .last = last ? -1 : bounds[s + 1], .input = handed_on};
      std::vector<float> out(batch.size() * (last ? out_width : stage_width));
      decoder.forward(batch, *caches[s], ctx, out);
      handed_on = std::move(out);
    }
    outputs.insert(outputs.end(), handed_on.begin(), handed_on.end());
  }
  return outputs;
}

// Whether layers [first, last) hold every layer their layers read the
// cache of (Gemma 4's shared-KV layers read an earlier one's).
bool stage_holds_its_sources(const DecoderModel& decoder, int64_t first, int64_t last) {
  for (int64_t il = first; il < last; ++il) {
    const int64_t source = decoder.kv_source_layer(il);
    if (source < first || source >= last) return false;
  }
  return true;
}

TEST(LayerStages, EveryFamilySplitAnywhereGivesTheBitsOfAllLayers) {
  for (const Family* family : families()) {
    SCOPED_TRACE(std::string(family->arch));
    const auto model =
        test::load_test_model({.arch = std::string(family->arch), .n_layer = kLayers}, 2);
    const DecoderModel& decoder = model->decoder();
    const int64_t n = decoder.hparams().n_layer;
    ASSERT_EQ(n, kLayers);
    const std::vector<float> whole = run_stages(*model, {0, n});
    ASSERT_FALSE(whole.empty());
    int splits = 0;
    for (int64_t k = 1; k < n; ++k) {
      if (!stage_holds_its_sources(decoder, 0, k) || !stage_holds_its_sources(decoder, k, n)) {
        continue;
      }
      ++splits;
      EXPECT_TRUE(bitwise_equal(run_stages(*model, {0, k, n}), whole)) << "split at " << k;
    }
    EXPECT_GT(splits, 0) << "no split keeps each layer beside the cache it reads";
    if (stage_holds_its_sources(decoder, 0, 1) && splits == n - 1) {
      std::vector<int64_t> every_layer;
      for (int64_t il = 0; il <= n; ++il) every_layer.push_back(il);
      EXPECT_TRUE(bitwise_equal(run_stages(*model, every_layer), whole)) << "one layer a stage";
    }
  }
}

// Every batch in one pass each, layers [0, k) on the CPU backend and the
// rest on a second backend (counting its ops), the cache's rows from layer
// k on in a storage of their own. The outputs, one batch after another.
struct SplitRun {
  std::vector<float> outputs;
  int second_backend_ops = 0;
  bool rows_apart = false;  // layers k - 1 and k keep their rows in different storage
};

SplitRun run_split(const Model& model, int64_t k) {
  const DecoderModel& decoder = model.decoder();
  const ModelHParams& hp = decoder.hparams();
  const std::array parts{KvRowsPart{0, HostKvRows::make}, KvRowsPart{k, HostKvRows::make}};
  KvCache cache(decoder.kv_cache_shape(kCells, 1, KvType::f32),
                std::span(parts).first(k > 0 ? 2 : 1));
  ForwardBuffers buffers;
  CpuBackend cpu(model.pool(), buffers.cpu);
  test::CountingBackend second(cpu);
  const auto out_width = static_cast<size_t>(hp.encoder ? hp.n_embd : hp.n_vocab);
  SplitRun run;
  for (const auto& batch : test_batches(hp.encoder)) {
    ForwardContext ctx{cpu, buffers, hp.encoder ? RowOutput::hidden : RowOutput::logits};
    ctx.split = {.backend = &second, .layer = k};
    std::vector<float> out(batch.size() * out_width);
    decoder.forward(batch, cache, ctx, out);
    run.outputs.insert(run.outputs.end(), out.begin(), out.end());
  }
  run.second_backend_ops = second.total();
  run.rows_apart = k > 0 && &cache.row_storage(k - 1) != &cache.row_storage(k);
  return run;
}

TEST(LayerStages, EveryFamilySplitBetweenBackendsInOnePassGivesTheBitsOfAllLayers) {
  for (const Family* family : families()) {
    SCOPED_TRACE(std::string(family->arch));
    const auto model =
        test::load_test_model({.arch = std::string(family->arch), .n_layer = kLayers}, 2);
    const DecoderModel& decoder = model->decoder();
    const std::vector<float> whole = run_stages(*model, {0, kLayers});
    for (int64_t k = 0; k < kLayers; ++k) {
      if (k > 0 && (!stage_holds_its_sources(decoder, 0, k) ||
                    !stage_holds_its_sources(decoder, k, kLayers))) {
        continue;
      }
      const SplitRun run = run_split(*model, k);
      EXPECT_TRUE(bitwise_equal(run.outputs, whole)) << "split at " << k;
      EXPECT_GT(run.second_backend_ops, 0) << "split at " << k;
      EXPECT_EQ(run.rows_apart, k > 0) << "split at " << k;
    }
  }
}

std::string forward_error(const Model& model, KvCache& cache, LayerStage stage,
                          std::span<float> out) {
  ForwardBuffers buffers;
  CpuBackend cpu(model.pool(), buffers.cpu);
  ForwardContext ctx{cpu, buffers};
  ctx.stage = stage;
  const BatchRow rows[] = {{5, 0, 0, true}, {9, 1, 0, true}};
  try {
    model.decoder().forward(rows, cache, ctx, out);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A stage that is no range of the layers, starts past the first without
// the hidden states entering it, or gets too few of them, or has no room
// for what it hands on, is refused before the cache moves; so is a split
// between Gemma 4's shared-KV layers and the layers whose cache they read.
TEST(LayerStages, AStageThatCannotRunIsRefusedBeforeTheCacheMoves) {
  const auto model = test::load_test_model({.arch = "llama", .n_layer = kLayers}, 2);
  const DecoderModel& decoder = model->decoder();
  KvCache cache(decoder.kv_cache_shape(kCells, 1, KvType::f32));
  const auto width = static_cast<size_t>(decoder.stage_width());
  std::vector<float> hidden(2 * width, 0.5f), out(2 * static_cast<size_t>(model->n_vocab()));
  const auto refused = [&](LayerStage stage, std::span<float> into, const std::string& says) {
    EXPECT_NE(forward_error(*model, cache, stage, into).find(says), std::string::npos) << says;
    EXPECT_EQ(cache.length(0), 0);
  };
  refused({.first = 2, .last = 2}, out, "layers [2, 2) are not a range of the model's 6");
  refused({.first = 0, .last = 7}, out, "layers [0, 7) are not a range");
  refused({.first = 2}, out, "a stage starting at layer 2 needs the hidden states entering it");
  refused({.first = 2, .input = std::span(hidden).first(width)}, out,
          "the stage's input has 64 floats, not 128 (2 rows of 64)");
  refused({.first = 0, .last = 2}, std::span(out).first(width),
          "the stage's output needs 128 floats, the buffer has 64");
  // The same stages run once they are whole.
  EXPECT_EQ(forward_error(*model, cache, {.first = 0, .last = 2}, out), "");
  KvCache second(decoder.kv_cache_shape(kCells, 1, KvType::f32));
  EXPECT_EQ(forward_error(*model, second, {.first = 2, .input = hidden}, out), "");

  const auto gemma4 = test::load_test_model({.arch = "gemma4", .n_layer = kLayers}, 2);
  KvCache gemma_cache(gemma4->decoder().kv_cache_shape(kCells, 1, KvType::f32));
  std::vector<float> gemma_hidden(2 * static_cast<size_t>(gemma4->decoder().stage_width()));
  std::vector<float> gemma_out(2 * static_cast<size_t>(gemma4->n_vocab()));
  const int64_t source = gemma4->decoder().kv_source_layer(kLayers - 1);
  ASSERT_LT(source, kLayers - 1);
  const std::string error =
      forward_error(*gemma4, gemma_cache, {.first = kLayers - 1, .input = gemma_hidden}, gemma_out);
  EXPECT_NE(error.find("layer " + std::to_string(kLayers - 1) +
                       " attends over the keys and values of layer " + std::to_string(source) +
                       ", outside the stage's layers [5, 6)"),
            std::string::npos)
      << error;
  EXPECT_EQ(gemma_cache.length(0), 0);
}

// A split outside the stage's layers, or between Gemma 4's shared-KV
// layers and the layers whose rows they read (the rows would be on the
// other backend's side), is refused before the cache moves.
TEST(LayerStages, ABackendSplitThatCannotRunIsRefusedBeforeTheCacheMoves) {
  const auto split_error = [](const Model& model, int64_t layer, LayerStage stage = {}) {
    KvCache cache(model.decoder().kv_cache_shape(kCells, 1, KvType::f32));
    ForwardBuffers buffers;
    CpuBackend cpu(model.pool(), buffers.cpu), second(model.pool(), buffers.cpu);
    ForwardContext ctx{cpu, buffers};
    ctx.stage = stage;
    ctx.split = {.backend = &second, .layer = layer};
    const BatchRow rows[] = {{5, 0, 0, true}};
    std::vector<float> out(static_cast<size_t>(model.n_vocab()));
    std::string error;
    try {
      model.decoder().forward(rows, cache, ctx, out);
    } catch (const Error& e) {
      error = e.what();
    }
    if (!error.empty()) {
      EXPECT_EQ(cache.length(0), 0);
    }
    return error;
  };
  const auto llama = test::load_test_model({.arch = "llama", .n_layer = kLayers}, 2);
  EXPECT_NE(split_error(*llama, kLayers)
                .find("a split at layer 6 is outside the stage's layers "
                      "[0, 6)"),
            std::string::npos);
  EXPECT_NE(split_error(*llama, 1, {.first = 0, .last = 1}).find("a split at layer 1"),
            std::string::npos);
  EXPECT_EQ(split_error(*llama, 3), "");

  const auto gemma4 = test::load_test_model({.arch = "gemma4", .n_layer = kLayers}, 2);
  const int64_t source = gemma4->decoder().kv_source_layer(kLayers - 1);
  ASSERT_LT(source, kLayers - 1);
  EXPECT_NE(split_error(*gemma4, kLayers - 1)
                .find("attends over the keys and values of layer " + std::to_string(source)),
            std::string::npos);
}

}  // namespace
}  // namespace cortiq
