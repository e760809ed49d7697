// The continuous-batching scheduler, in process: its tokens equal a
// Session's for the same prompt and seed (alone, next to 31 other
// sequences, after a prefix-cache hit), cancellation frees the sequence,
// admission waits for KV memory, a full queue refuses.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/fault_injection.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "kernels/cpu/log_softmax.hpp"
#include "kv/kv_cache.hpp"
#include "model/decoder_model.hpp"
#include "model/family.hpp"
#include "model/hparams.hpp"
#include "runtime/device_route.hpp"
#include "scoring/embedding.hpp"
#include "server/api_error.hpp"
#include "server/scheduler.hpp"

namespace cortiq::server {
namespace {

using namespace std::chrono_literals;

test::TestModelSpec spec() {
  test::TestModelSpec s;
  s.n_ctx = 512;
  return s;
}

using test::prompt_of;

GenerationJob job_of(std::vector<TokenId> prompt, uint64_t seed, int64_t max_tokens) {
  GenerationJob job;
  job.prompt = std::move(prompt);
  job.sampling.temperature = 0.9f;
  job.sampling.seed = seed;
  job.max_tokens = max_tokens;
  job.ignore_eos = true;
  return job;
}

struct Collected {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<std::vector<double>> logprobs;  // when the jobs asked for them
  std::vector<StreamEvent> finished;
};

// Waits until every part of the stream has ended (failures are test
// failures unless allowed; they land in `finished` as failed events).
Collected collect(RequestStream& stream, size_t parts, bool failures_allowed = false) {
  Collected out;
  out.tokens.resize(parts);
  out.logprobs.resize(parts);
  out.finished.resize(parts);
  size_t ended = 0;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  std::vector<StreamEvent> events;
  while (ended < parts) {
    EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "the scheduler stalled";
    if (std::chrono::steady_clock::now() > deadline) break;
    events.clear();
    stream.wait(events, 100ms);
    for (auto& e : events) {
      const auto c = static_cast<size_t>(e.choice);
      if (e.kind == StreamEvent::Kind::token) {
        out.tokens[c].push_back(e.token);
        if (e.has_logprob) out.logprobs[c].push_back(e.logprob.logprob);
      } else {
        if (!failures_allowed) {
          EXPECT_NE(e.kind, StreamEvent::Kind::failed) << e.error;
        }
        out.finished[c] = std::move(e);
        ++ended;
      }
    }
  }
  return out;
}

std::vector<TokenId> session_tokens(const std::shared_ptr<const Model>& model,
                                    const GenerationJob& job) {
  Session session(model);
  GenerateOptions options;
  options.sampling = job.sampling;
  options.max_tokens = job.max_tokens;
  options.ignore_eos = job.ignore_eos;
  return session.generate(std::span<const TokenId>(job.prompt), options).tokens;
}

std::vector<TokenId> run_alone(Scheduler& scheduler, GenerationJob job) {
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<GenerationJob>{std::move(job)}, stream);
  return collect(*stream, 1).tokens[0];
}

// The spec's model on the Vulkan device when there is one (-ngl
// gpu_layers, f32 cache rows as the device keeps them), else the CPU.
std::shared_ptr<const Model> load_on_device(const test::TestModelSpec& s,
                                            int64_t gpu_layers = kAllLayers) {
  LoadOptions options;
  options.threads = 2;
  options.kv_type = KvType::f32;
  options.device = "auto";
  options.gpu_layers = gpu_layers;
  return Model::load(test::test_model_path(s), options);
}

// `serve --device vulkan`: the scheduler's batched passes on the device
// (every layer, and the last one only) give a CPU session's greedy tokens
// for sequences of different lengths batched together. In the Vulkan tests'
// process (scripts/test.sh), as DeviceRoute.*.
TEST(DeviceRoute, TheSchedulersBatchedPassesRunOnTheDevice) {
  test::TestModelSpec s = spec();
  s.n_layer = 2;
  const auto cpu_model = test::load_test_model(s);
  for (const int64_t gpu_layers : {int64_t{-1}, int64_t{1}}) {
    const auto model = load_on_device(s, gpu_layers);
    if (model->device_route() == nullptr) GTEST_SKIP() << "no Vulkan device that runs llama";
    Metrics metrics;
    SchedulerOptions scheduler_options;
    scheduler_options.parallel = 4;
    scheduler_options.step_rows = 16;
    Scheduler scheduler(model, scheduler_options, metrics);
    std::vector<GenerationJob> jobs;
    for (int i = 0; i < 4; ++i) {
      GenerationJob job = job_of(prompt_of(7 + 11 * i, i + 2), 5, 6 + i);
      job.sampling.temperature = 0;
      job.choice = i;
      jobs.push_back(std::move(job));
    }
    const auto copies = jobs;
    auto stream = std::make_shared<RequestStream>();
    scheduler.submit(std::move(jobs), stream);
    const Collected got = collect(*stream, copies.size());
    // The steps ran there: at least one per generated token after the first.
    EXPECT_GE(model->device_route()->passes(), 6u + 3u);
    for (size_t i = 0; i < copies.size(); ++i) {
      EXPECT_EQ(got.tokens[i], session_tokens(cpu_model, copies[i]))
          << "-ngl " << gpu_layers << ", sequence " << i;
    }
  }
}

// A device lost mid-step on `serve --device`: the step's sequences end
// with the device's error (failed, not cancelled) and their slots are
// freed; the next request runs and gives the CPU session's tokens.
TEST(DeviceRoute, TheSchedulerEndsItsSequencesWithADeviceFaultAndRunsOn) {
  test::TestModelSpec s = spec();
  const auto model = load_on_device(s);
  if (model->device_route() == nullptr) GTEST_SKIP() << "no Vulkan device that runs llama";
  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{}, metrics);
  GenerationJob job = job_of(prompt_of(9, 4), 3, 6);
  job.sampling.temperature = 0;
  fault::arm(fault::Site::device_lost, 1);
  auto failing = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<GenerationJob>{job}, failing);
  const Collected failed = collect(*failing, 1, /*failures_allowed=*/true);
  fault::disarm();
  EXPECT_EQ(failed.finished[0].kind, StreamEvent::Kind::failed);
  EXPECT_NE(failed.finished[0].error.find("VK_ERROR_DEVICE_LOST"), std::string::npos)
      << failed.finished[0].error;
  EXPECT_EQ(run_alone(scheduler, job), session_tokens(test::load_test_model(s), job));
}

TEST(ServerScheduler, SeededOutputIsTheSameAloneAndNextTo31Others) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  SchedulerOptions options;
  options.parallel = 32;
  options.step_rows = 64;  // long prompts take several steps beside the decoders
  Scheduler scheduler(model, options, metrics);

  const GenerationJob probe = job_of(prompt_of(70, 1), 1234, 24);
  const auto expected = session_tokens(model, probe);
  ASSERT_EQ(expected.size(), 24u);
  EXPECT_EQ(run_alone(scheduler, probe), expected);

  // The probe among 31 others of different lengths, seeds and prompts.
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 32; ++i) {
    GenerationJob job = i == 17 ? probe : job_of(prompt_of(5 + 9 * i, i + 2), 99 + i, 8 + i);
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  auto stream = std::make_shared<RequestStream>();
  const auto copies = jobs;
  scheduler.submit(std::move(jobs), stream);
  const auto all = collect(*stream, 32);
  EXPECT_EQ(all.tokens[17], expected);
  for (int i = 0; i < 32; i += 5) {  // a sample of the others against a Session too
    EXPECT_EQ(all.tokens[static_cast<size_t>(i)],
              session_tokens(model, copies[static_cast<size_t>(i)]))
        << "sequence " << i;
  }
  for (const auto& f : all.finished) EXPECT_EQ(f.end, ChoiceEnd::length);
}

// The penalty window is one rule (runtime/generation.hpp) with one option:
// the server's penalties count the generated tokens only (OpenAI's), which
// a Session gives with penalize_prompt false; counting the prompt too (a
// Session's default, llama.cpp's) gives other tokens here.
TEST(ServerScheduler, PenaltiesCountTheOutputAsASessionWithoutThePrompt) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{}, metrics);
  GenerationJob job = job_of(prompt_of(40, 3), 77, 24);
  job.sampling.temperature = 0.0f;
  job.sampling.presence_penalty = 6.0f;
  job.sampling.frequency_penalty = 2.0f;
  job.sampling.repeat_penalty = 1.5f;
  job.sampling.penalty_last_n = -1;
  GenerateOptions options;
  options.sampling = job.sampling;
  options.max_tokens = job.max_tokens;
  options.ignore_eos = job.ignore_eos;
  options.penalize_prompt = false;
  const auto expected =
      Session(model).generate(std::span<const TokenId>(job.prompt), options).tokens;
  options.penalize_prompt = true;
  const auto with_prompt =
      Session(model).generate(std::span<const TokenId>(job.prompt), options).tokens;
  ASSERT_NE(expected, with_prompt)
      << "the prompt's tokens change nothing here: the test shows nothing";
  EXPECT_EQ(run_alone(scheduler, job), expected);
}

// Gemma 2's sliding-window layers (16 positions in the test model) keep
// only their window and a step of rows per sequence: sequences interleaved
// in steps of 8 rows still give a Session's tokens, and a second run of the
// same prompt (no prefix cache for such a model) gives them again.
TEST(ServerScheduler, SlidingWindowModelKeepsOnlyItsWindowAndGivesASessionsTokens) {
  test::TestModelSpec gemma2 = spec();
  gemma2.arch = "gemma2";
  const auto model = test::load_test_model(gemma2);
  Metrics metrics;
  SchedulerOptions options;
  options.parallel = 4;
  options.step_rows = 8;
  Scheduler scheduler(model, options, metrics);
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 4; ++i) {
    GenerationJob job = job_of(prompt_of(40 + 11 * i, i + 5), 7 + i, 20);
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  const auto copies = jobs;
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::move(jobs), stream);
  const auto all = collect(*stream, 4);
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_EQ(all.tokens[i], session_tokens(model, copies[i])) << "sequence " << i;
  }
  GenerationJob again = copies[2];
  again.choice = 0;
  EXPECT_EQ(run_alone(scheduler, again), all.tokens[2]);
}

// Every architecture through the scheduler's paged cache: two sequences in
// steps of 16 rows, then the first prompt again (a prefix-cache hit where
// the family allows one), each with a Session's tokens.
TEST(ServerScheduler, EveryFamilyGivesASessionsTokens) {
  for (const Family* family : families()) {
    SCOPED_TRACE(std::string(family->arch));
    if (family->encoder) continue;  // EncoderEmbeddingsReadEachInputWhole
    test::TestModelSpec s = spec();
    s.arch = std::string(family->arch);
    const auto model = test::load_test_model(s);
    Metrics metrics;
    SchedulerOptions options;
    options.parallel = 2;
    options.step_rows = 16;
    Scheduler scheduler(model, options, metrics);
    std::vector<GenerationJob> jobs;
    for (int i = 0; i < 2; ++i) {
      GenerationJob job = job_of(prompt_of(37 + 5 * i, i + 3), 11 + i, 6);
      job.choice = i;
      jobs.push_back(std::move(job));
    }
    const auto copies = jobs;
    auto stream = std::make_shared<RequestStream>();
    scheduler.submit(std::move(jobs), stream);
    const auto all = collect(*stream, 2);
    for (size_t i = 0; i < copies.size(); ++i) {
      EXPECT_EQ(all.tokens[i], session_tokens(model, copies[i])) << "sequence " << i;
    }
    EXPECT_EQ(run_alone(scheduler, copies[0]), all.tokens[0]);
  }
}

// Runs the jobs as one request and collects them.
Collected run_all(Scheduler& scheduler, std::vector<GenerationJob> jobs) {
  const size_t n = jobs.size();
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::move(jobs), stream);
  return collect(*stream, n);
}

// Speculative decoding inside continuous batching: each sequence's drafts
// are verified in the same step as the others' rows, and every sequence
// gets the tokens and log-probabilities it gets without drafting (greedy
// and seeded sampling) — with prompt lookup, with the target as its own
// draft model (every draft kept), on a sliding-window model and on models
// with recurrent state (back to a checkpoint after a rejection). The
// drafted rows leave no KV blocks behind.
TEST(ServerScheduler, SpeculativeDecodingKeepsEverySequencesTokensAndLogprobs) {
  for (const char* arch : {"llama", "gemma2", "lfm2", "qwen3next"}) {
    SCOPED_TRACE(arch);
    test::TestModelSpec s = spec();
    s.arch = arch;
    const auto model = test::load_test_model(s);
    std::vector<GenerationJob> jobs;
    for (int i = 0; i < 6; ++i) {
      // Repeating prompts, so that prompt lookup finds something.
      std::vector<TokenId> prompt;
      for (int r = 0; r < 3; ++r) {
        const auto part = prompt_of(7 + i, i + 1);
        prompt.insert(prompt.end(), part.begin(), part.end());
      }
      GenerationJob job = job_of(prompt, 40 + i, 24 + i);
      if (i % 2 == 0) job.sampling.temperature = 0.0f;
      job.top_logprobs = 2;
      job.choice = i;
      jobs.push_back(std::move(job));
    }
    SchedulerOptions plain_options;
    plain_options.parallel = 6;
    plain_options.step_rows = 16;
    Metrics plain_metrics;
    Collected plain;
    {
      Scheduler scheduler(model, plain_options, plain_metrics);
      plain = run_all(scheduler, jobs);
    }
    for (size_t i = 0; i < jobs.size(); i += 3) {
      EXPECT_EQ(plain.tokens[i], session_tokens(model, jobs[i])) << "sequence " << i;
    }
    const std::pair<const char*, std::shared_ptr<Drafter>> drafters[] = {
        {"prompt lookup", std::make_shared<PromptLookupDrafter>(1, 3)},
        {"itself as draft model", std::make_shared<DraftModelDrafter>(model, *model)}};
    for (const auto& [what, drafter] : drafters) {
      SCOPED_TRACE(what);
      SchedulerOptions options = plain_options;
      options.drafter = drafter;
      options.draft_max = 5;
      options.same_draws = true;  // the draft model samples greedily: plain sampling's draws
      Metrics metrics;
      Scheduler scheduler(model, options, metrics);
      const Collected got = run_all(scheduler, jobs);
      int64_t drafted = 0, accepted = 0;
      for (size_t i = 0; i < jobs.size(); ++i) {
        EXPECT_EQ(got.tokens[i], plain.tokens[i]) << "sequence " << i;
        EXPECT_EQ(got.logprobs[i], plain.logprobs[i]) << "sequence " << i;
        drafted += got.finished[i].stats.drafted_tokens;
        accepted += got.finished[i].stats.accepted_tokens;
        if (std::string(what) != "prompt lookup" && jobs[i].sampling.temperature == 0.0f) {
          EXPECT_EQ(got.finished[i].stats.accepted_tokens, got.finished[i].stats.drafted_tokens)
              << "sequence " << i;
        }
      }
      EXPECT_GT(drafted, 0);
      // Prompt lookup finds repeats in what llama and Gemma 2 write here;
      // the other random models do not repeat themselves.
      const bool repeats = std::string(arch) == "llama" || std::string(arch) == "gemma2";
      if (std::string(what) != "prompt lookup" || repeats) {
        EXPECT_GT(accepted, 0);
      }
      const std::string text = metrics.prometheus_text();
      EXPECT_NE(text.find("cortiq_draft_tokens_total " + std::to_string(drafted)),
                std::string::npos)
          << text;
      for (int i = 0; i < 50 && metrics.state().running != 0; ++i) {
        std::this_thread::sleep_for(10ms);
      }
      EXPECT_EQ(metrics.state().kv_blocks_used, 0);
    }
  }
}

// GLM-4.5's MTP layer drafting per slot: each sequence's tokens and
// log-probabilities as without drafting; the drafters see every row of
// their sequence, prompt chunks included.
TEST(ServerScheduler, MtpDraftsPerSlotKeepTheTokens) {
  test::TestModelSpec s = spec();
  s.arch = "glm4moe";
  const auto model = test::load_test_model(s);
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 4; ++i) {
    GenerationJob job = job_of(prompt_of(30 + 9 * i, i + 4), 70 + i, 16);
    if (i % 2 == 0) job.sampling.temperature = 0.0f;
    job.top_logprobs = 1;
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  SchedulerOptions options;
  options.parallel = 4;
  options.step_rows = 16;  // prompts over several steps beside the decoders
  Metrics plain_metrics;
  Collected plain;
  {
    Scheduler scheduler(model, options, plain_metrics);
    plain = run_all(scheduler, jobs);
  }
  options.drafter = std::make_shared<MtpDrafter>(model);
  options.draft_max = 3;
  options.same_draws = true;
  Metrics metrics;
  Scheduler scheduler(model, options, metrics);
  const Collected got = run_all(scheduler, jobs);
  int64_t drafted = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(got.tokens[i], plain.tokens[i]) << "sequence " << i;
    EXPECT_EQ(got.logprobs[i], plain.logprobs[i]) << "sequence " << i;
    drafted += got.finished[i].stats.drafted_tokens;
    if (jobs[i].sampling.temperature > 0) continue;
    // Greedy, a Session drafts as many with its own MTP drafter: the
    // slot's drafter saw every row (one that missed some drafts nothing).
    GenerateOptions o;
    o.sampling = jobs[i].sampling;
    o.max_tokens = jobs[i].max_tokens;
    o.ignore_eos = true;
    o.speculative.drafter = std::make_shared<MtpDrafter>(model);
    o.speculative.draft_max = 3;
    const GenerateResult alone =
        Session(model).generate(std::span<const TokenId>(jobs[i].prompt), o);
    EXPECT_EQ(got.finished[i].stats.drafted_tokens, alone.speculative.drafted) << "sequence " << i;
  }
  EXPECT_GT(drafted, static_cast<int64_t>(jobs.size()));
}

// Sampled drafts (a draft model at a sampling temperature) are checked by
// speculative sampling: a seeded request repeats, alone or beside others.
TEST(ServerScheduler, SpeculativeSamplingRepeatsForASeed) {
  const auto model = test::load_test_model(spec());
  test::TestModelSpec other = spec();  // the weights in Q4_0: most drafts kept, not all
  other.type = GgmlType::Q4_0;
  SchedulerOptions options;
  options.parallel = 4;
  options.drafter = std::make_shared<DraftModelDrafter>(test::load_test_model(other), *model);
  Metrics metrics;
  Scheduler scheduler(model, options, metrics);
  const GenerationJob probe = job_of(prompt_of(30, 2), 77, 30);
  const auto alone = run_alone(scheduler, probe);
  ASSERT_EQ(alone.size(), 30u);
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 4; ++i) {
    GenerationJob job = i == 2 ? probe : job_of(prompt_of(20 + i, i + 9), i, 20);
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  const Collected all = run_all(scheduler, jobs);
  EXPECT_EQ(all.tokens[2], alone);
  int64_t drafted = 0, accepted = 0;
  for (const auto& f : all.finished) {
    drafted += f.stats.drafted_tokens;
    accepted += f.stats.accepted_tokens;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
}

TEST(ServerScheduler, PrefixCacheHitReusesBlocksAndKeepsTheTokens) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{}, metrics);
  const auto shared = prompt_of(100, 5);
  run_alone(scheduler, job_of(shared, 1, 4));

  auto longer = shared;
  for (TokenId id : prompt_of(7, 9)) longer.push_back(id);
  const GenerationJob job = job_of(longer, 77, 12);
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<GenerationJob>{job}, stream);
  const auto result = collect(*stream, 1);
  // Whole 16-position blocks of the shared 100 tokens: 96.
  EXPECT_EQ(result.finished[0].stats.cached_tokens, 96);
  EXPECT_EQ(result.tokens[0], session_tokens(model, job));
}

// The log-probability of each generated token as a cold Session computes
// it: the prompt and the tokens forwarded in one evaluate(), each token's
// row through the same log-softmax the server uses.
std::vector<double> session_logprobs(const std::shared_ptr<const Model>& model,
                                     const std::vector<TokenId>& prompt,
                                     const std::vector<TokenId>& tokens) {
  std::vector<TokenId> ids = prompt;
  ids.insert(ids.end(), tokens.begin(), tokens.end() - 1);
  Session session(model);
  const std::vector<float> logits = session.evaluate(ids, 0, prompt.size() - 1);
  const auto n_vocab = static_cast<size_t>(model->n_vocab());
  std::vector<double> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto row = std::span<const float>(logits).subspan(i * n_vocab, n_vocab);
    out.push_back(kernels::log_softmax(row).log_prob(row, tokens[i]));
  }
  return out;
}

// The logits themselves, not sampled tokens: a quantized model with the
// default f16 cache gives a cold Session's log-probabilities bit for bit
// for a sequence batched beside 31 others, and after a prefix-cache hit.
TEST(ServerScheduler, LogprobsEqualAColdSessionsBesideOthersAndAfterACacheHit) {
  test::TestModelSpec q = spec();
  q.type = GgmlType::Q4_K;
  const auto model = test::load_test_model(q, 2, KvType::f16);
  Metrics metrics;
  SchedulerOptions options;
  options.parallel = 32;
  options.step_rows = 64;
  Scheduler scheduler(model, options, metrics);
  const auto shared = prompt_of(100, 5);
  GenerationJob probe = job_of(shared, 3, 16);
  probe.sampling.temperature = 0.0f;
  probe.top_logprobs = 0;
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 32; ++i) {
    GenerationJob job = i == 11 ? probe : job_of(prompt_of(5 + 9 * i, i + 2), 99 + i, 8 + i);
    job.top_logprobs = 0;
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  const Collected all = run_all(scheduler, jobs);
  const auto& tokens = all.tokens[11];
  ASSERT_EQ(tokens.size(), 16u);
  EXPECT_EQ(all.logprobs[11], session_logprobs(model, shared, tokens));
  // A longer prompt sharing those 100 tokens attaches their cached blocks.
  auto longer = shared;
  for (const TokenId id : prompt_of(7, 9)) longer.push_back(id);
  GenerationJob hit = probe;
  hit.prompt = longer;
  hit.choice = 0;
  const Collected again = run_all(scheduler, {hit});
  EXPECT_EQ(again.finished[0].stats.cached_tokens, 96);
  EXPECT_EQ(again.logprobs[0], session_logprobs(model, longer, again.tokens[0]));
}

// The n choices of one request: the same prompt, seeds first_seed...
std::vector<GenerationJob> choices_of(const std::vector<TokenId>& prompt, int n,
                                      uint64_t first_seed, int64_t max_tokens) {
  std::vector<GenerationJob> jobs;
  for (int c = 0; c < n; ++c) {
    jobs.push_back(job_of(prompt, first_seed + static_cast<uint64_t>(c), max_tokens));
    jobs.back().choice = c;
  }
  return jobs;
}

TEST(ServerScheduler, ChoicesOfOneRequestShareTheirPromptsBlocks) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{}, metrics);
  std::vector<GenerationJob> jobs = choices_of(prompt_of(100, 11), 3, 40, 6);
  const auto copies = jobs;
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::move(jobs), stream);
  const auto result = collect(*stream, 3);
  EXPECT_EQ(result.finished[0].stats.cached_tokens, 0);
  for (size_t c = 0; c < 3; ++c) {
    if (c > 0) {
      EXPECT_EQ(result.finished[c].stats.cached_tokens, 96) << "choice " << c;
    }
    EXPECT_EQ(result.tokens[c], session_tokens(model, copies[c])) << "choice " << c;
  }
}

std::vector<TokenId> concat(std::vector<TokenId> a, std::span<const TokenId> b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A model with recurrent state shares prefixes through state snapshots at
// block boundaries (16 positions), each hit giving a fresh Session's tokens
// and, bit for bit, the log-probabilities of a server that shares nothing:
// the same prompt again resumes at its last boundary before the final
// token; the next turn (prompt + reply + more) at the reply's last
// boundary, or at the prompt's end when it is one; a prompt that leaves a
// cached one inside resumes nowhere the first time and at the point where
// it left the second time; the choices of one request share their
// prompt's snapshot. Without snapshots nothing is shared.
TEST(ServerScheduler, ModelsWithStateResumeFromStateSnapshots) {
  int with_state = 0;
  for (const Family* family : families()) {
    if (family->encoder) continue;
    test::TestModelSpec s = spec();
    s.arch = std::string(family->arch);
    const auto model = test::load_test_model(s);
    if (model->decoder().kv_cache_shape(1, 1, KvType::f32, 1).state_width() == 0) continue;
    ++with_state;
    SCOPED_TRACE(s.arch);
    Metrics metrics;
    SchedulerOptions options;
    options.parallel = 3;
    options.step_rows = 40;  // prompts take several steps
    Scheduler scheduler(model, options, metrics);
    options.state_snapshots = 0;
    Scheduler reference(model, options, metrics);
    const auto run = [](Scheduler& on, GenerationJob job) {
      job.top_logprobs = 0;
      auto stream = std::make_shared<RequestStream>();
      on.submit(std::vector<GenerationJob>{std::move(job)}, stream);
      return collect(*stream, 1);
    };
    const auto hit = [&](const GenerationJob& job, int64_t expected_cached) {
      const auto result = run(scheduler, job);
      const auto fresh = run(reference, job);
      EXPECT_EQ(result.finished[0].stats.cached_tokens, expected_cached);
      EXPECT_EQ(fresh.finished[0].stats.cached_tokens, 0);
      EXPECT_EQ(result.tokens[0], session_tokens(model, job));
      EXPECT_EQ(result.tokens[0], fresh.tokens[0]);
      EXPECT_EQ(result.logprobs[0], fresh.logprobs[0]);  // exact doubles
      EXPECT_EQ(result.logprobs[0].size(), result.tokens[0].size());
      return result.tokens[0];
    };
    const auto prompt = prompt_of(100, 5);
    const auto reply = hit(job_of(prompt, 3, 20), 0);
    hit(job_of(prompt, 4, 6), 96);
    // The reply's 19 forwarded tokens end at 119: its last boundary is 112.
    hit(job_of(concat(concat(prompt, reply), prompt_of(9, 7)), 5, 6), 112);
    // Leaving the cached prompt at 70: the chain is registered to 64.
    const auto head = std::span<const TokenId>(prompt).first(70);
    hit(job_of(concat({head.begin(), head.end()}, prompt_of(30, 9)), 6, 4), 0);
    hit(job_of(concat({head.begin(), head.end()}, prompt_of(30, 11)), 7, 4), 64);
    // A prompt of whole blocks keeps its end: a short reply's next turn
    // resumes there.
    const auto whole = prompt_of(64, 13);
    const auto short_reply = hit(job_of(whole, 8, 6), 0);
    hit(job_of(concat(concat(whole, short_reply), prompt_of(5, 3)), 9, 4), 64);

    std::vector<GenerationJob> jobs = choices_of(prompt_of(50, 21), 3, 40, 5);
    const auto copies = jobs;
    auto stream = std::make_shared<RequestStream>();
    scheduler.submit(std::move(jobs), stream);
    const auto choices = collect(*stream, 3);
    for (size_t c = 0; c < 3; ++c) {
      EXPECT_EQ(choices.finished[c].stats.cached_tokens, c == 0 ? 0 : 48) << "choice " << c;
      EXPECT_EQ(choices.tokens[c], session_tokens(model, copies[c])) << "choice " << c;
    }
  }
  EXPECT_GE(with_state, 17);  // lfm2 ... kimi-linear, rwkv6, rwkv7: none skipped by mistake
}

TEST(ServerScheduler, ModelWithStateSharesNothingWithoutSnapshots) {
  test::TestModelSpec s = spec();
  s.arch = "lfm2";
  const auto model = test::load_test_model(s);
  Metrics metrics;
  SchedulerOptions options;
  options.state_snapshots = 0;
  Scheduler scheduler(model, options, metrics);
  const GenerationJob job = job_of(prompt_of(100, 5), 3, 4);
  run_alone(scheduler, job);
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<GenerationJob>{job}, stream);
  const auto again = collect(*stream, 1);
  EXPECT_EQ(again.finished[0].stats.cached_tokens, 0);
  EXPECT_EQ(again.tokens[0], session_tokens(model, job));
}

// The vectors of n embeddings events, by input index (each must succeed).
std::vector<std::vector<float>> collect_embeddings(RequestStream& stream, size_t n) {
  std::vector<std::vector<float>> vectors(n);
  for (size_t got = 0; got < n;) {
    std::vector<StreamEvent> events;
    stream.wait(events, 100ms);
    for (auto& e : events) {
      EXPECT_EQ(e.kind, StreamEvent::Kind::embedding) << e.error;
      vectors[static_cast<size_t>(e.choice)] = std::move(e.embedding);
      ++got;
    }
  }
  return vectors;
}

TEST(ServerScheduler, EmbeddingsRunInChunksAndMatchASession) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  SchedulerOptions options;
  options.step_rows = 16;  // the 70-token input takes five chunks
  Scheduler scheduler(model, options, metrics);
  const auto long_input = prompt_of(70, 3);
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<EmbeddingJob>{{0, long_input}, {1, prompt_of(5, 4)}}, stream);
  const auto vectors = collect_embeddings(*stream, 2);
  Session session(model);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  EXPECT_EQ(vectors[0], scoring::pool_embeddings(session.embeddings(long_input), n_embd,
                                                 scoring::Pooling::mean, true));
}

// An encoder (BERT) reads each input in one step, however small the step,
// pooled as its file says (the first token here): a Session's vector, bit
// for bit, for each of two inputs queued together.
TEST(ServerScheduler, EncoderEmbeddingsReadEachInputWhole) {
  test::TestModelSpec s = spec();
  s.arch = "bert";
  const auto model = test::load_test_model(s);
  ASSERT_EQ(model->hparams().pooling_type, 2);
  Metrics metrics;
  SchedulerOptions options;
  options.step_rows = 16;
  Scheduler scheduler(model, options, metrics);
  const std::vector<std::vector<TokenId>> inputs = {prompt_of(70, 3), prompt_of(5, 4)};
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<EmbeddingJob>{{0, inputs[0]}, {1, inputs[1]}}, stream);
  const auto vectors = collect_embeddings(*stream, 2);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Session session(model);
    EXPECT_EQ(vectors[i], scoring::pool_embeddings(session.embeddings(inputs[i]), n_embd,
                                                   scoring::Pooling::cls, true))
        << "input " << i;
  }
}

TEST(ServerScheduler, CancelledSequenceStopsAndFreesItsBlocks) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  Scheduler scheduler(model, SchedulerOptions{}, metrics);
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::vector<GenerationJob>{job_of(prompt_of(20, 3), 5, 400)}, stream);
  std::vector<StreamEvent> events;
  while (events.empty()) stream->wait(events, 100ms);
  stream->cancel();
  const auto result = collect(*stream, 1);
  EXPECT_EQ(result.finished[0].end, ChoiceEnd::cancelled);
  EXPECT_LT(result.finished[0].stats.generated_tokens, 400);
  // The worker publishes its state after the step that dropped it.
  for (int i = 0; i < 50 && metrics.state().running != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(metrics.state().running, 0);
  EXPECT_EQ(metrics.state().kv_blocks_used, 0);
}

// The failure model: a fault in a forward pass (a prefill chunk, a decode
// step, its working memory, a KV block) fails the requests in that step
// with the error (never `cancelled`), counts them in
// cortiq_requests_failed_total, frees every block they held, and the same
// requests then give a fresh Session's tokens (a prefix-cache hit on what
// the failed step left cached included).
TEST(ServerScheduler, FaultFailsTheStepsRequestsFreesTheirBlocksAndTheNextRunIsFresh) {
  struct Case {
    const char* arch;
    fault::Site site;
    int64_t nth;
    const char* error;
  };
  for (const Case c : {Case{"llama", fault::Site::prefill, 2, "injected fault: prefill"},
                       Case{"llama", fault::Site::decode, 3, "injected fault: decode"},
                       Case{"llama", fault::Site::alloc, 60, "out of memory"},
                       Case{"llama", fault::Site::kv_block, 4, "injected fault: kv_block"},
                       Case{"mamba2", fault::Site::prefill, 3, "injected fault: prefill"},
                       Case{"mamba2", fault::Site::decode, 2, "injected fault: decode"}}) {
    SCOPED_TRACE(std::string(c.arch) + " " + c.error);
    test::TestModelSpec s = spec();
    s.arch = c.arch;
    const auto model = test::load_test_model(s);
    Metrics metrics;
    SchedulerOptions options;
    options.parallel = 4;
    options.step_rows = 16;
    Scheduler scheduler(model, options, metrics);
    std::vector<GenerationJob> jobs;
    for (int i = 0; i < 3; ++i) {
      GenerationJob job = job_of(prompt_of(25 + 8 * static_cast<size_t>(i), i + 1), 50 + i, 12);
      job.choice = i;
      jobs.push_back(std::move(job));
    }
    const auto copies = jobs;
    fault::arm(c.site, c.nth);
    auto stream = std::make_shared<RequestStream>();
    scheduler.submit(std::move(jobs), stream);
    const Collected failed = collect(*stream, 3, /*failures_allowed=*/true);
    fault::disarm();
    int n_failed = 0;
    for (const StreamEvent& event : failed.finished) {
      if (event.kind == StreamEvent::Kind::failed) {
        ++n_failed;
        EXPECT_NE(event.error.find(c.error), std::string::npos) << event.error;
      } else {
        EXPECT_NE(event.end, ChoiceEnd::cancelled);
      }
    }
    EXPECT_GT(n_failed, 0) << "the fault failed no request";
    for (int i = 0; i < 50 && metrics.state().running != 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(metrics.state().running, 0);
    EXPECT_EQ(metrics.state().kv_blocks_used, 0);
    EXPECT_NE(metrics.prometheus_text().find("cortiq_requests_failed_total " +
                                             std::to_string(n_failed) + "\n"),
              std::string::npos);
    EXPECT_NE(metrics.prometheus_text().find("cortiq_requests_cancelled_total 0\n"),
              std::string::npos);
    const Collected again = run_all(scheduler, copies);
    for (size_t i = 0; i < copies.size(); ++i) {
      EXPECT_EQ(again.tokens[i], session_tokens(model, copies[i])) << "job " << i;
    }
  }
}

// Embeddings: a fault in an input's pass fails it and the inputs after it;
// the slot comes back and the next request embeds as a Session does.
TEST(ServerScheduler, FaultInAnEmbeddingPassFailsItsInputsAndTheNextRequestIsFresh) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  SchedulerOptions options;
  options.step_rows = 16;
  Scheduler scheduler(model, options, metrics);
  std::vector<EmbeddingJob> jobs;
  for (int i = 0; i < 3; ++i) {
    EmbeddingJob job;
    job.index = i;
    job.tokens = prompt_of(30, i + 7);
    jobs.push_back(std::move(job));
  }
  const auto copies = jobs;
  fault::arm(fault::Site::prefill, 4);  // the second input's second pass
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::move(jobs), stream);
  std::vector<StreamEvent> ended;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (ended.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::vector<StreamEvent> events;
    stream->wait(events, 100ms);
    for (auto& e : events) ended.push_back(std::move(e));
  }
  fault::disarm();
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended[0].kind, StreamEvent::Kind::embedding);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(ended[i].kind, StreamEvent::Kind::failed);
    EXPECT_EQ(ended[i].error, "injected fault: prefill");
  }
  for (int i = 0; i < 50 && metrics.state().kv_blocks_used != 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(metrics.state().kv_blocks_used, 0);
  auto again = std::make_shared<RequestStream>();
  scheduler.submit(copies, again);
  const auto vectors = collect_embeddings(*again, 3);
  const auto n_embd = static_cast<size_t>(model->hparams().n_embd);
  for (size_t i = 0; i < 3; ++i) {
    Session session(model);
    EXPECT_EQ(vectors[i], scoring::pool_embeddings(session.embeddings(copies[i].tokens), n_embd,
                                                   scoring::Pooling::mean, true))
        << "input " << i;
  }
}

TEST(ServerScheduler, AdmissionWaitsForKvMemory) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  SchedulerOptions options;
  options.parallel = 4;
  options.kv_cells = 512;  // one full context: the jobs below fit one or two at a time
  Scheduler scheduler(model, options, metrics);
  std::vector<GenerationJob> jobs;
  for (int i = 0; i < 4; ++i) {
    GenerationJob job = job_of(prompt_of(150, i), i, 100);
    job.choice = i;
    jobs.push_back(std::move(job));
  }
  const auto copies = jobs;
  auto stream = std::make_shared<RequestStream>();
  scheduler.submit(std::move(jobs), stream);
  const auto result = collect(*stream, 4);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(result.tokens[i], session_tokens(model, copies[i])) << "job " << i;
  }
}

TEST(ServerScheduler, FullQueueRefusesWithServiceUnavailable) {
  const auto model = test::load_test_model(spec());
  Metrics metrics;
  SchedulerOptions options;
  options.parallel = 1;
  options.max_queued = 2;
  Scheduler scheduler(model, options, metrics);
  const auto submit = [&](int n, int64_t max_tokens) {
    std::vector<GenerationJob> jobs;
    for (int i = 0; i < n; ++i) {
      jobs.push_back(job_of(prompt_of(10, i), i, max_tokens));
      jobs.back().choice = i;
    }
    auto stream = std::make_shared<RequestStream>();
    scheduler.submit(std::move(jobs), stream);
    return stream;
  };
  const auto status_of = [&](int n) {
    try {
      submit(n, 5)->cancel();
      return 200;
    } catch (const ApiError& e) {
      return e.status();
    }
  };
  EXPECT_EQ(status_of(4), 400);  // more choices than slots + queue: never
  auto running = submit(1, 400);
  std::vector<StreamEvent> events;
  while (events.empty()) running->wait(events, 100ms);  // it holds the slot
  auto waiting = submit(2, 5);                          // the queue is full now
  EXPECT_EQ(status_of(1), 503);
  running->cancel();
  waiting->cancel();
}

}  // namespace
}  // namespace cortiq::server
