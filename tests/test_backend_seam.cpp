// The op layer (backends/backend.hpp): a forward pass reaches the machine
// only through its backend's ops. A backend in the middle that counts every
// op and hands it to the CPU backend sees a Llama pass's whole math (and
// the bits do not move), and one that fails an op partway through ends the
// pass with the error and leaves the cache as it was, so the request can be
// cleared or run again.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.hpp"
#include "base/error.hpp"
#include "counting_backend.hpp"
#include "engine_test_models.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"

namespace cortiq {
namespace {

using test::CountingBackend;
using test::Op;

constexpr int64_t kLayers = 3;

std::vector<BatchRow> prompt_rows(size_t n) {
  const std::vector<TokenId> ids = test::prompt_of(n, 11);
  std::vector<BatchRow> rows;
  for (size_t i = 0; i < n; ++i) rows.push_back({ids[i], static_cast<int32_t>(i), 0, true});
  return rows;
}

// The logits of one pass over `rows` with `backend` (a CpuBackend when null).
std::vector<float> run_pass(const Model& model, KvCache& cache, std::span<const BatchRow> rows,
                            ForwardBuffers& buffers, Backend* backend = nullptr) {
  CpuBackend cpu(model.pool(), buffers.cpu);
  ForwardContext ctx{backend != nullptr ? *backend : cpu, buffers};
  std::vector<float> logits(rows.size() * static_cast<size_t>(model.decoder().hparams().n_vocab));
  model.decoder().forward(rows, cache, ctx, logits);
  return logits;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(BackendSeam, ALlamaPassReachesTheMachineOnlyThroughTheOps) {
  const auto model = test::load_test_model({.arch = "llama", .n_layer = kLayers}, 2);
  const DecoderModel& decoder = model->decoder();
  const auto rows = prompt_rows(7);

  ForwardBuffers plain_buffers;
  KvCache plain_cache(decoder.kv_cache_shape(32, 1, KvType::f32));
  const std::vector<float> plain = run_pass(*model, plain_cache, rows, plain_buffers);

  ForwardBuffers buffers;
  KvCache cache(decoder.kv_cache_shape(32, 1, KvType::f32));
  CpuBackend cpu(model->pool(), buffers.cpu);
  CountingBackend counting(cpu);
  const std::vector<float> counted = run_pass(*model, cache, rows, buffers, &counting);
  EXPECT_TRUE(bitwise_equal(counted, plain));

  // Per layer: Q/K/V in one product, RoPE of Q and of K, the rows into the
  // cache, attention over it, the output projection, gate and up in one
  // product, the activation, the down projection; two norms, two residual
  // adds. Then the embedding lookup, the final norm and the lm_head.
  EXPECT_EQ(counting.count(Op::get_rows), 1);
  EXPECT_EQ(counting.count(Op::matmul_shared_input), 2 * kLayers);
  EXPECT_EQ(counting.count(Op::rope_rows), 2 * kLayers);
  EXPECT_EQ(counting.count(Op::store_kv), kLayers);
  EXPECT_EQ(counting.count(Op::attention), kLayers);
  EXPECT_EQ(counting.count(Op::glu), kLayers);
  EXPECT_EQ(counting.count(Op::matmul), 2 * kLayers + 1);
  EXPECT_EQ(counting.count(Op::add), 2 * kLayers);
  EXPECT_EQ(counting.count(Op::rms_norm_rows), 2 * kLayers + static_cast<int>(rows.size()));
  // The logits reach the caller's memory once, at the end.
  EXPECT_EQ(counting.count(Op::copy_to_host), 1);
  EXPECT_EQ(counting.count(Op::copy_from_host), 0);
}

// The "failed" half of the device contract: an op that throws after the
// pass began ends it with that error, the rows' cells are released (the
// sequence is as long as before), and the same rows run again give the
// bits of a pass that never failed.
TEST(BackendSeam, AnOpFailingMidPassEndsItAndLeavesTheCacheAsItWas) {
  const auto model = test::load_test_model({.arch = "llama", .n_layer = kLayers}, 2);
  const DecoderModel& decoder = model->decoder();
  const auto first = prompt_rows(5);
  const std::vector<BatchRow> next = {{17, 5, 0, true}, {23, 6, 0, true}};

  ForwardBuffers buffers;
  KvCache reference(decoder.kv_cache_shape(32, 1, KvType::f32));
  run_pass(*model, reference, first, buffers);
  const std::vector<float> expected = run_pass(*model, reference, next, buffers);

  CpuBackend cpu(model->pool(), buffers.cpu);
  CountingBackend census(cpu);
  KvCache scratch(decoder.kv_cache_shape(32, 1, KvType::f32));
  run_pass(*model, scratch, first, buffers);
  run_pass(*model, scratch, next, buffers, &census);
  const int n_ops = census.total();
  ASSERT_GT(n_ops, 10);

  for (const int fail_at : {0, n_ops / 3, n_ops - 1}) {
    SCOPED_TRACE("failing op " + std::to_string(fail_at) + " of " + std::to_string(n_ops));
    KvCache cache(decoder.kv_cache_shape(32, 1, KvType::f32));
    run_pass(*model, cache, first, buffers);
    CountingBackend failing(cpu, fail_at);
    try {
      run_pass(*model, cache, next, buffers, &failing);
      FAIL() << "the pass went on past a failed op";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("device lost"), std::string::npos) << e.what();
    }
    EXPECT_EQ(cache.length(0), static_cast<int64_t>(first.size()));
    EXPECT_TRUE(bitwise_equal(run_pass(*model, cache, next, buffers), expected));
  }
}

TEST(BackendSeam, ADeviceTensorIsRefusedToHostCode) {
  const Tensor t = Tensor::on_device({.buffer = 3, .offset = 100}, 64);
  EXPECT_FALSE(t.on_host());
  EXPECT_EQ(t.size(), 64u);
  const Tensor part = t.subspan(8, 16);
  EXPECT_EQ(part.region().buffer, 3u);
  EXPECT_EQ(part.region().offset, 108u);
  EXPECT_EQ(part.size(), 16u);
  EXPECT_THROW((void)part.host(), Error);
  const ConstTensor read_only = part;
  EXPECT_THROW((void)read_only.host(), Error);

  std::vector<float> values(10, 1.0f);
  const Tensor host = values;
  ASSERT_TRUE(host.on_host());
  EXPECT_EQ(host.subspan(4, 3).host().data(), values.data() + 4);
}

}  // namespace
}  // namespace cortiq
