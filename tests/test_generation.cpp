// The engine's contracts on small random-weight models: batch invariance,
// one cache row per forwarded token, prefix reuse across turns, cooperative
// cancellation, seeded sampling, and clear errors for bad prompts.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "base/cpu_features.hpp"
#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "model/hparams.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

using test::greedy;
using test::load_test_model;
using test::TestModelSpec;

std::vector<TokenId> ids_from(TokenId first, size_t n, TokenId stride = 7, TokenId mod = 600) {
  std::vector<TokenId> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = 3 + (first + static_cast<TokenId>(i) * stride) % mod;
  return ids;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Logits of 64 positions prefilled in one chunk, in chunks of 1, 7 and 64
// rows, token by token through generate(), with 1, 2 or 3 threads, and at
// every SIMD level the CPU has down to scalar: the same bits every time.
void expect_batch_invariant(const TestModelSpec& spec, KvType kv) {
  const auto ids = ids_from(1, 64);
  const auto model = load_test_model(spec, 2, kv);
  Session reference(model);
  const auto one_chunk = reference.evaluate(ids, 64);
  for (const int64_t chunk : {1, 7, 13, 64}) {
    Session s(model);
    EXPECT_TRUE(bitwise_equal(s.evaluate(ids, chunk), one_chunk)) << "chunk " << chunk;
  }
  // Split across calls: a 30-token prefix, then the rest.
  Session split(model);
  auto first = split.evaluate(std::span(ids).first(30), 7);
  const auto rest = split.evaluate(std::span(ids).subspan(30), 5);
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_TRUE(bitwise_equal(first, one_chunk));
  // One and three threads.
  for (const int threads : {1, 3}) {
    Session other(load_test_model(spec, threads, kv));
    EXPECT_TRUE(bitwise_equal(other.evaluate(ids, 64), one_chunk)) << threads << " threads";
  }
  // The slower kernels on the whole model (loaded at that level: packed
  // layouts follow it).
  const SimdLevel best = simd_level();
  for (const SimdLevel level : {SimdLevel::scalar, SimdLevel::avx2}) {
    if (level >= best) continue;
    set_simd_level(level);
    std::vector<float> got;
    try {
      Session lower(load_test_model(spec, 2, kv));
      got = lower.evaluate(ids, 13);
    } catch (...) {
      set_simd_level(best);
      throw;
    }
    set_simd_level(best);
    EXPECT_TRUE(bitwise_equal(got, one_chunk)) << simd_level_name(level);
  }
}

TEST(EngineBatchInvariance, F32WeightsF32Cache) {
  expect_batch_invariant({.arch = "llama"}, KvType::f32);
}
TEST(EngineBatchInvariance, F16WeightsF16CacheQwen2) {
  expect_batch_invariant({.arch = "qwen2", .type = GgmlType::F16}, KvType::f16);
}
// Every weight type the engine runs and can write (IQ4_XS files come from
// llama.cpp's quantizer only: its kernels are checked against the scalar
// path in test_kernels_*).
class EveryWeightType : public ::testing::TestWithParam<GgmlType> {};

TEST_P(EveryWeightType, IsBatchInvariant) {
  expect_batch_invariant(
      {.arch = "qwen3", .type = GetParam(), .n_embd = 256, .n_head = 4, .n_ff = 256}, KvType::f16);
}

INSTANTIATE_TEST_SUITE_P(EngineBatchInvariance, EveryWeightType,
                         ::testing::Values(GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                           GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL,
                                           GgmlType::MXFP4),
                         [](const auto& info) { return std::string(ggml_type_name(info.param)); });

// Decoding token by token gives the logits prefill gives for the same
// positions: greedy generation's tokens are the argmax of evaluate()'s rows.
TEST(EngineBatchInvariance, GenerationMatchesPrefill) {
  const auto model = load_test_model({});
  Session gen(model);
  const auto prompt = ids_from(5, 9);
  const auto result = gen.generate(std::span<const TokenId>(prompt), greedy(12));
  ASSERT_EQ(result.tokens.size(), 12u);
  std::vector<TokenId> all = prompt;
  all.insert(all.end(), result.tokens.begin(), result.tokens.end());
  Session eval(model);
  const auto logits = eval.evaluate(all, 4);
  const auto n_vocab = static_cast<size_t>(model->n_vocab());
  for (size_t i = 0; i < result.tokens.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * n_vocab;
    const auto best = std::max_element(row, row + n_vocab) - row;
    EXPECT_EQ(best, result.tokens[i]) << "token " << i;
  }
}

TEST(EngineKvCache, HoldsPromptPlusGeneratedMinusOne) {
  const auto model = load_test_model({});
  Session s(model);
  const auto prompt = ids_from(2, 11);
  const auto r = s.generate(std::span<const TokenId>(prompt), greedy(9));
  EXPECT_EQ(r.finish_reason, FinishReason::max_tokens);
  EXPECT_EQ(r.generated_tokens, 9);
  EXPECT_EQ(s.cache_rows(), 11 + 9 - 1);
  EXPECT_EQ(static_cast<int64_t>(s.history().size()), s.cache_rows());
  EXPECT_EQ(r.timings.prefill_tokens, 11);
  EXPECT_EQ(r.timings.decode_tokens, 8);  // the last token is never forwarded
}

TEST(EngineKvCache, ContextFullEndsWithLength) {
  const auto model = load_test_model({}, 2, KvType::f32, 512, /*context=*/16);
  Session s(model);
  const auto prompt = ids_from(4, 10);
  const auto r = s.generate(std::span<const TokenId>(prompt), greedy(-1));
  EXPECT_EQ(r.finish_reason, FinishReason::length);
  EXPECT_EQ(r.generated_tokens, 16 - 10 + 1);
  EXPECT_EQ(s.cache_rows(), 16);
}

TEST(EngineReuse, ExtendingTheHistoryPrefillsOnlyTheSuffix) {
  const auto model = load_test_model({});
  Session chat(model);
  const auto turn1 = ids_from(3, 20);
  const auto r1 = chat.generate(std::span<const TokenId>(turn1), greedy(6));
  std::vector<TokenId> turn2 = turn1;
  turn2.insert(turn2.end(), r1.tokens.begin(), r1.tokens.end());
  const auto extra = ids_from(50, 8);
  turn2.insert(turn2.end(), extra.begin(), extra.end());
  const auto r2 = chat.generate(std::span<const TokenId>(turn2), greedy(10));
  EXPECT_EQ(r2.cached_tokens, 20 + 6 - 1);
  EXPECT_EQ(r2.timings.prefill_tokens, static_cast<int64_t>(turn2.size()) - (20 + 6 - 1));

  Session fresh(model);
  const auto expected = fresh.generate(std::span<const TokenId>(turn2), greedy(10));
  EXPECT_EQ(r2.tokens, expected.tokens);
  EXPECT_EQ(chat.cache_rows(), fresh.cache_rows());
}

TEST(EngineReuse, DivergingHistoryIsCutBackToTheCommonPrefix) {
  const auto model = load_test_model({});
  Session s(model);
  const auto a = ids_from(3, 30);
  s.generate(std::span<const TokenId>(a), greedy(5));
  std::vector<TokenId> b(a.begin(), a.begin() + 12);
  const auto tail = ids_from(99, 9, 11);
  b.insert(b.end(), tail.begin(), tail.end());
  const auto rb = s.generate(std::span<const TokenId>(b), greedy(7));
  EXPECT_EQ(rb.cached_tokens, 12);
  Session fresh(model);
  EXPECT_EQ(rb.tokens, fresh.generate(std::span<const TokenId>(b), greedy(7)).tokens);
  // The same prompt again reuses all but its last token.
  const auto again = s.generate(std::span<const TokenId>(b), greedy(7));
  EXPECT_EQ(again.cached_tokens, static_cast<int64_t>(b.size()) - 1);
  EXPECT_EQ(again.tokens, rb.tokens);
}

TEST(EngineCancel, CallbackReturningFalseCancelsAndTheSessionStaysUsable) {
  const auto model = load_test_model({});
  Session s(model);
  const auto prompt = ids_from(1, 8);
  int calls = 0;
  const auto r = s.generate(std::span<const TokenId>(prompt), greedy(50),
                            [&](std::string_view, TokenId) { return ++calls < 3; });
  EXPECT_EQ(r.finish_reason, FinishReason::cancelled);
  EXPECT_EQ(r.generated_tokens, 3);
  EXPECT_EQ(static_cast<int64_t>(s.history().size()), s.cache_rows());
  const auto after = s.generate(std::span<const TokenId>(prompt), greedy(10));
  Session fresh(model);
  EXPECT_EQ(after.tokens, fresh.generate(std::span<const TokenId>(prompt), greedy(10)).tokens);
}

// on_prefill hears the prompt's progress after each chunk, reused
// positions included, and returning false cancels before the next chunk.
TEST(EngineCancel, PrefillProgressReportsEachChunkAndCanCancel) {
  const auto model = load_test_model({}, 2, KvType::f32, /*chunk=*/4);
  Session s(model);
  const auto prompt = ids_from(1, 18);
  std::vector<int64_t> seen;
  GenerateOptions o = greedy(3);
  o.on_prefill = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 18);
    seen.push_back(done);
    return done < 12;
  };
  const auto cancelled = s.generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(cancelled.finish_reason, FinishReason::cancelled);
  EXPECT_EQ(seen, (std::vector<int64_t>{4, 8, 12}));
  EXPECT_EQ(s.history().size(), 12u);
  seen.clear();
  o.on_prefill = [&](int64_t done, int64_t) {
    seen.push_back(done);
    return true;
  };
  const auto resumed = s.generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(resumed.cached_tokens, 12);
  EXPECT_EQ(seen, (std::vector<int64_t>{16, 18}));
  Session fresh(model);
  EXPECT_EQ(resumed.tokens, fresh.generate(std::span<const TokenId>(prompt), greedy(3)).tokens);
}

// truncate(n) leaves the session as if only the first n tokens had been
// forwarded: the next tokens' logits are a fresh session's, bit for bit.
TEST(EngineSession, TruncateKeepsAPrefixAsIfOnlyItHadBeenForwarded) {
  const auto model = load_test_model({});
  Session s(model);
  const auto ids = ids_from(1, 24);
  s.append(ids);
  s.truncate(10);
  EXPECT_EQ(s.history().size(), 10u);
  EXPECT_EQ(s.cache_rows(), 10);
  const auto next = ids_from(40, 5);
  const std::vector<float> after_cut = s.evaluate(next);
  Session fresh(model);
  fresh.append(std::span<const TokenId>(ids).first(10));
  const std::vector<float> expected = fresh.evaluate(next);
  ASSERT_EQ(after_cut.size(), expected.size());
  EXPECT_EQ(std::memcmp(after_cut.data(), expected.data(), expected.size() * sizeof(float)), 0);
  s.truncate(s.history().size());  // keeping everything changes nothing
  EXPECT_EQ(s.history().size(), 15u);
  EXPECT_THROW(s.truncate(16), Error);
}

// cancel() from another thread is seen at the next decode step: the
// callback of the first token waits until the other thread has cancelled,
// so the generation must stop right after it (a cancel() that did nothing
// would run on to the end of the context and fail here).
TEST(EngineCancel, FlagFromAnotherThreadStopsAtTheNextStep) {
  const auto model = load_test_model({}, 2, KvType::f32, 4, /*context=*/2048);
  Session s(model);
  std::atomic<bool> started{false}, sent{false};
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    s.cancel();
    sent.store(true);
  });
  const auto prompt = ids_from(1, 100);
  GenerateResult r;
  try {
    r = s.generate(std::span<const TokenId>(prompt), greedy(-1), [&](std::string_view, TokenId) {
      started.store(true);
      while (!sent.load()) std::this_thread::yield();
      return true;
    });
  } catch (...) {
    started.store(true);
    canceller.join();
    throw;
  }
  canceller.join();
  EXPECT_EQ(r.finish_reason, FinishReason::cancelled);
  EXPECT_EQ(r.tokens.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(s.history().size()), s.cache_rows());
  const auto again = s.generate(std::span<const TokenId>(prompt), greedy(4));
  EXPECT_EQ(again.finish_reason, FinishReason::max_tokens);
}

// cancel() from another thread during a long prefill stops it before the
// next chunk: the first chunk's progress callback waits for the cancel, so
// exactly one chunk of 4 is in the history, nothing is generated, and the
// same prompt then resumes after it with a fresh session's tokens.
TEST(EngineCancel, FromAnotherThreadDuringALongPrefill) {
  const auto model = load_test_model({}, 2, KvType::f32, 4, /*context=*/2048);
  Session s(model);
  std::atomic<bool> started{false}, sent{false};
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    s.cancel();
    sent.store(true);
  });
  const auto prompt = ids_from(1, 1500);
  GenerateOptions o = greedy(4);
  o.on_prefill = [&](int64_t, int64_t) {
    started.store(true);
    while (!sent.load()) std::this_thread::yield();
    return true;
  };
  GenerateResult r;
  try {
    r = s.generate(std::span<const TokenId>(prompt), o);
  } catch (...) {
    started.store(true);
    canceller.join();
    throw;
  }
  canceller.join();
  EXPECT_EQ(r.finish_reason, FinishReason::cancelled);
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(s.history().size(), 4u);
  const auto resumed = s.generate(std::span<const TokenId>(prompt), greedy(4));
  EXPECT_EQ(resumed.cached_tokens, 4);
  EXPECT_EQ(resumed.tokens,
            Session(model).generate(std::span<const TokenId>(prompt), greedy(4)).tokens);
}

// A cancel() that lands between two calls is forgotten by the second,
// unless a CancelScope makes them one call: then the second ends at its
// first chunk, and after the scope the session works as before.
TEST(EngineCancel, BetweenCallsOfAScopeEndsTheNext) {
  const auto model = load_test_model({}, 2, KvType::f32, 4);
  Session s(model);
  const auto ids = ids_from(1, 12);
  const auto half = std::span<const TokenId>(ids).first(6);
  const auto rest = std::span<const TokenId>(ids).subspan(6);
  s.evaluate(half);
  s.cancel();
  EXPECT_NO_THROW(s.evaluate(rest));  // no scope: the earlier cancel is forgotten
  s.reset();
  {
    const Session::CancelScope scope(s);
    s.evaluate(half);
    s.cancel();
    EXPECT_THROW(s.evaluate(rest), Cancelled);
    EXPECT_THROW(s.embeddings(rest), Cancelled);
    // nll() takes the history's last token off to score the first id; a
    // cancel before its first chunk puts it back.
    EXPECT_THROW(s.nll(rest, 0), Cancelled);
  }
  ASSERT_EQ(s.history().size(), 6u);  // nothing of the cancelled calls, nothing lost
  EXPECT_TRUE(std::equal(half.begin(), half.end(), s.history().begin()));
  EXPECT_NO_THROW(s.evaluate(rest));
  // A scope opened after a cancel() forgets it, as a call would.
  s.reset();
  s.cancel();
  const Session::CancelScope later(s);
  EXPECT_NO_THROW(s.evaluate(half));
}

// embeddings() sees a cancel() from another thread between its chunks:
// Cancelled, with the forwarded prefix in the history.
TEST(EngineCancel, EmbeddingsFromAnotherThread) {
  const auto model = load_test_model({}, 2, KvType::f32, 4, /*context=*/2048);
  Session s(model);
  std::atomic<bool> done{false};
  std::atomic<int64_t> cancels{0};
  std::thread canceller([&] {
    while (!done.load()) {
      s.cancel();
      cancels.fetch_add(1);
    }
  });
  const auto ids = ids_from(1, 1500);
  bool cancelled = false;
  try {
    s.embeddings(ids);
  } catch (const Cancelled&) {
    cancelled = true;
  }
  done.store(true);
  canceller.join();
  EXPECT_TRUE(cancelled);
  EXPECT_GT(cancels.load(), 0);
  EXPECT_LT(s.history().size(), ids.size());
  EXPECT_EQ(s.history().size() % 4, 0u);
}

TEST(EngineSampling, SameSeedSameTokens) {
  const auto model = load_test_model({});
  const auto prompt = ids_from(6, 5);
  GenerateOptions o;
  o.max_tokens = 24;
  o.ignore_eos = true;
  o.sampling.temperature = 1.0f;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  o.sampling.seed = 1234;
  Session a(model), b(model);
  const auto ra = a.generate(std::span<const TokenId>(prompt), o);
  const auto rb = b.generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(ra.tokens, rb.tokens);
  EXPECT_EQ(ra.text, rb.text);
  // The same session again (the stream restarts from the seed).
  EXPECT_EQ(a.generate(std::span<const TokenId>(prompt), o).tokens, ra.tokens);
  o.sampling.seed = 99;
  EXPECT_NE(b.generate(std::span<const TokenId>(prompt), o).tokens, ra.tokens);
}

TEST(EngineSampling, ConfidenceIsTheProbabilityOfTheEmittedToken) {
  const auto model = load_test_model({});
  Session s(model);
  const auto prompt = ids_from(8, 6);
  auto o = greedy(5);
  o.confidence = true;
  const auto r = s.generate(std::span<const TokenId>(prompt), o);
  ASSERT_EQ(r.confidence.size(), 5u);
  std::vector<TokenId> all = prompt;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  Session eval(model);
  const auto logits = eval.evaluate(all);
  const auto n_vocab = static_cast<size_t>(model->n_vocab());
  for (size_t i = 0; i < 5; ++i) {
    const auto row =
        std::span<const float>(logits).subspan((prompt.size() - 1 + i) * n_vocab, n_vocab);
    const double max = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (const float v : row) sum += std::exp(v - max);
    EXPECT_NEAR(r.confidence[i], 1.0 / sum, 1e-5);  // greedy: the top token
  }
}

TEST(EngineStop, StopStringIsNeverEmitted) {
  const auto model = load_test_model({});
  const std::string prompt = "Once upon a time";
  Session s(model);
  const auto free_run = s.generate(prompt, greedy(40));
  ASSERT_GT(free_run.text.size(), 12u);
  const std::string stop = free_run.text.substr(free_run.text.size() / 2, 3);
  const auto cut = free_run.text.find(stop);
  auto o = greedy(40);
  o.stop = {stop};
  std::string streamed;
  Session t(model);
  const auto r = t.generate(prompt, o, [&](std::string_view piece, TokenId) {
    streamed += piece;
    return true;
  });
  EXPECT_EQ(r.finish_reason, FinishReason::stop);
  EXPECT_EQ(r.text, free_run.text.substr(0, cut));
  EXPECT_EQ(streamed, r.text);
}

TEST(EngineErrors, BadPromptsAreRefusedBeforeAnyStateChanges) {
  const auto model = load_test_model({}, 2, KvType::f32, 512, /*context=*/32);
  Session s(model);
  const auto prompt = ids_from(1, 6);
  s.generate(std::span<const TokenId>(prompt), greedy(3));
  const std::vector<TokenId> history(s.history().begin(), s.history().end());
  const auto expect_refused = [&](auto&& call, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(std::vector<TokenId>(s.history().begin(), s.history().end()), history);
  };
  const std::vector<TokenId> empty;
  expect_refused([&] { s.generate(std::span<const TokenId>(empty), greedy(3)); }, "empty");
  const auto too_long = ids_from(1, 33);
  expect_refused([&] { s.generate(std::span<const TokenId>(too_long), greedy(3)); }, "context");
  const std::vector<TokenId> bad = {1, 2, 100000};
  expect_refused([&] { s.generate(std::span<const TokenId>(bad), greedy(3)); }, "vocabulary");
  auto hot = greedy(3);
  hot.sampling.temperature = -1;
  expect_refused([&] { s.generate(std::span<const TokenId>(prompt), hot); }, "temperature");
  auto banned = greedy(3);
  for (TokenId id = 0; id < model->n_vocab(); ++id) banned.sampling.suppressed.push_back(id);
  expect_refused([&] { s.generate(std::span<const TokenId>(prompt), banned); }, "banned");
  auto loops = greedy(3);
  loops.loop_stop = true;
  loops.loop.max_period = 0;
  expect_refused([&] { s.generate(std::span<const TokenId>(prompt), loops); }, "period");
  auto top_p = greedy(3);
  top_p.sampling.top_p = 1.5f;
  expect_refused([&] { s.generate(std::span<const TokenId>(prompt), top_p); }, "top_p");
}

TEST(EngineErrors, UnknownArchitectureAndMissingFile) {
  EXPECT_THROW(Model::load("/nonexistent/model.gguf"), Error);
}

}  // namespace
}  // namespace cortiq
