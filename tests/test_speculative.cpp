// Speculative decoding (SpeculativeOptions): whatever the drafter proposes,
// generate() gives the tokens, the cache and the last logits of plain
// decoding, bit for bit — with a drafter that is always right, one wrong at
// every third token, one that is never right, and prompt lookup; greedy and
// seeded sampling; dense, mixture-of-experts, sliding-window, latent
// attention, recurrent and hybrid models.
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <random>

#include "base/error.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "formats/gguf/gguf_writer.hpp"
#include "gguf_test_files.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

// Replays a known continuation of `prompt`, corrupting every `wrong_every`-th
// drafted token (0: never); with `noise`, drafts random ids instead.
class ScriptedDrafter final : public Drafter {
 public:
  ScriptedDrafter(std::vector<TokenId> prompt, std::vector<TokenId> continuation,
                  size_t wrong_every, bool noise)
      : script_(std::move(prompt)), wrong_every_(wrong_every), noise_(noise) {
    script_.insert(script_.end(), continuation.begin(), continuation.end());
  }
  std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) override {
    std::vector<TokenId> out;
    for (size_t i = context.size(); i < script_.size() && out.size() < max_tokens; ++i) {
      TokenId id = script_[i];
      ++drafted_;
      if (noise_) id = static_cast<TokenId>(rng_() % 600);
      if (wrong_every_ > 0 && drafted_ % wrong_every_ == 0) id = (id + 1) % 600;
      out.push_back(id);
    }
    return out;
  }

 private:
  std::vector<TokenId> script_;
  size_t wrong_every_;
  bool noise_;
  size_t drafted_ = 0;
  std::mt19937 rng_{5};
};

bool same_floats(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

GenerateOptions options_for(float temperature, int64_t max_tokens) {
  GenerateOptions o;
  o.sampling.temperature = temperature;
  o.sampling.seed = 11;
  o.max_tokens = max_tokens;
  o.ignore_eos = true;
  return o;
}

struct Case {
  const char* arch;
  float temperature;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << " at temperature " << c.temperature;
}

class Speculative : public ::testing::TestWithParam<Case> {};

TEST_P(Speculative, GivesThePlainTokensCacheAndLogits) {
  test::TestModelSpec spec;
  spec.arch = GetParam().arch;
  const auto model = test::load_test_model(spec);
  const std::vector<TokenId> prompt = {5, 17, 29, 41, 17, 29, 41, 53, 8, 17, 29};
  const GenerateOptions plain_options = options_for(GetParam().temperature, 40);
  Session plain(model);
  const GenerateResult expected = plain.generate(std::span<const TokenId>(prompt), plain_options);
  ASSERT_EQ(expected.tokens.size(), 40u);
  // What the next turn sees after plain decoding.
  const std::vector<TokenId> more = {9, 10};
  Session plain_next(model);
  plain_next.generate(std::span<const TokenId>(prompt), plain_options);
  const std::vector<float> expected_more = plain_next.evaluate(more);

  const auto check = [&](std::shared_ptr<Drafter> drafter, const char* what, bool accepts) {
    SCOPED_TRACE(what);
    GenerateOptions o = plain_options;
    o.speculative.drafter = std::move(drafter);
    // Sampling with a draft model keeps plain sampling's draws only so (by
    // default it is speculative sampling: test_speculative_sampling.cpp).
    o.speculative.same_draws = true;
    o.speculative.draft_max = 5;
    Session session(model);
    const GenerateResult got = session.generate(std::span<const TokenId>(prompt), o);
    EXPECT_EQ(got.tokens, expected.tokens);
    EXPECT_EQ(got.text, expected.text);
    EXPECT_TRUE(std::ranges::equal(session.history(), plain.history()));
    EXPECT_TRUE(same_floats(session.last_logits(), plain.last_logits()));
    EXPECT_GT(got.speculative.drafted, 0);
    if (accepts) {
      EXPECT_GT(got.speculative.accepted, 0);
    }
    EXPECT_LE(got.speculative.accepted, got.speculative.drafted);
    // The next turn continues the same history.
    EXPECT_TRUE(same_floats(session.evaluate(more), expected_more));
  };
  check(std::make_shared<ScriptedDrafter>(prompt, expected.tokens, 0, false), "perfect", true);
  check(std::make_shared<ScriptedDrafter>(prompt, expected.tokens, 3, false), "every third wrong",
        true);
  check(std::make_shared<ScriptedDrafter>(prompt, expected.tokens, 0, true), "noise", false);
  check(std::make_shared<PromptLookupDrafter>(1, 3), "prompt lookup", false);
  test::TestModelSpec small = spec;
  small.n_layer = 1;
  small.seed = 8;
  check(std::make_shared<DraftModelDrafter>(test::load_test_model(small), *model), "draft model",
        false);
}

INSTANTIATE_TEST_SUITE_P(Families, Speculative,
                         ::testing::Values(Case{"llama", 0.0f}, Case{"llama", 0.9f},
                                           Case{"qwen3moe", 0.0f}, Case{"gemma2", 0.0f},
                                           Case{"deepseek2", 0.0f}, Case{"gpt-oss", 0.7f},
                                           Case{"lfm2", 0.0f}, Case{"mamba2", 0.9f},
                                           Case{"qwen3next", 0.0f}, Case{"rwkv7", 0.0f},
                                           Case{"falcon-h1", 0.8f}),
                         [](const auto& info) {
                           std::string name = info.param.arch;
                           std::ranges::replace(name, '-', '_');
                           return name + (info.param.temperature > 0 ? "_sampled" : "_greedy");
                         });

// A perfect drafter saves passes: 40 tokens in far fewer than 40.
TEST(SpeculativeDecoding, APerfectDrafterSavesPasses) {
  const auto model = test::load_test_model({});
  const std::vector<TokenId> prompt = {5, 17, 29, 41};
  const GenerateResult plain =
      Session(model).generate(std::span<const TokenId>(prompt), options_for(0.0f, 40));
  GenerateOptions o = options_for(0.0f, 40);
  o.speculative.drafter = std::make_shared<ScriptedDrafter>(prompt, plain.tokens, 0, false);
  o.speculative.draft_max = 8;
  const GenerateResult got = Session(model).generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_EQ(got.speculative.accepted, got.speculative.drafted);
  // One pass per 9 tokens (the sampled one and 8 drafts), the budget capping
  // the last draft: 39 forwarded tokens after the prompt in 5 passes.
  EXPECT_EQ(got.speculative.passes, 5);
  EXPECT_EQ(got.speculative.accepted, 34);
  EXPECT_DOUBLE_EQ(got.speculative.acceptance_rate(), 1.0);
}

// The depth adapts: after a round that kept nothing the next drafts one
// token, so a drafter that is never right costs about one row per pass.
TEST(SpeculativeDecoding, AUselessDrafterDraftsAboutOneTokenPerPass) {
  const auto model = test::load_test_model({});
  const std::vector<TokenId> prompt = {5, 17, 29, 41};
  const GenerateResult plain =
      Session(model).generate(std::span<const TokenId>(prompt), options_for(0.0f, 40));
  GenerateOptions o = options_for(0.0f, 40);
  o.speculative.drafter = std::make_shared<ScriptedDrafter>(prompt, plain.tokens, 0, true);
  o.speculative.draft_max = 8;
  const GenerateResult got = Session(model).generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_GE(got.speculative.passes, 30);
  EXPECT_LE(got.speculative.drafted, 8 + 2 * (got.speculative.passes - 1));
}

// The target as its own draft model drafts what the target samples
// greedily: every draft is kept. A draft model with another vocabulary is
// refused, naming the first token that differs.
TEST(SpeculativeDecoding, DraftModelOfTheSameWeightsIsAlwaysRight) {
  const auto model = test::load_test_model({});
  const std::vector<TokenId> prompt = {5, 17, 29, 41};
  const GenerateResult plain =
      Session(model).generate(std::span<const TokenId>(prompt), options_for(0.0f, 40));
  GenerateOptions o = options_for(0.0f, 40);
  o.speculative.drafter = std::make_shared<DraftModelDrafter>(model, *model);
  o.speculative.draft_max = 6;
  const GenerateResult got = Session(model).generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_GT(got.speculative.drafted, 0);
  EXPECT_EQ(got.speculative.accepted, got.speculative.drafted);

  test::TempDir dir;
  test::rewrite_metadata(test::test_model_path({}), dir / "other.gguf", [](gguf::GgufWriter& w) {
    const gguf::GgufFile original = gguf::GgufFile::open(test::test_model_path({}));
    gguf::Array tokens = *original.find("tokenizer.ggml.tokens")->as_array();
    std::get<std::vector<std::string>>(tokens.items)[10] = "other";
    w.set("tokenizer.ggml.tokens", gguf::Value(tokens));
  });
  try {
    DraftModelDrafter drafter(Model::load(dir / "other.gguf", {}), *model);
    ADD_FAILURE() << "a draft model with another vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token 10"), std::string::npos) << e.what();
  }
}

// A model with recurrent state goes back to its checkpoint after a
// rejected round and forwards the kept rows with the next pass: the same
// tokens and cache as plain decoding in fewer passes, the turn's prompt
// snapshot still there for the next turn, and no checkpoint left behind.
TEST(SpeculativeDecoding, ModelsWithStateRollBackToACheckpoint) {
  test::TestModelSpec spec;
  spec.arch = "lfm2";
  const auto model = test::load_test_model(spec);
  const std::vector<TokenId> prompt = {5, 17, 29, 41, 17, 29};
  Session plain(model);
  const GenerateResult expected =
      plain.generate(std::span<const TokenId>(prompt), options_for(0.0f, 30));
  GenerateOptions o = options_for(0.0f, 30);
  o.speculative.drafter = std::make_shared<ScriptedDrafter>(prompt, expected.tokens, 3, false);
  o.speculative.draft_max = 4;
  Session session(model);
  const GenerateResult got = session.generate(std::span<const TokenId>(prompt), o);
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_GT(got.speculative.accepted, 0);
  EXPECT_LT(got.speculative.accepted, got.speculative.drafted);
  EXPECT_LT(got.speculative.passes + 5, static_cast<int64_t>(expected.tokens.size()))
      << got.speculative.drafted << " drafted, " << got.speculative.accepted << " kept";
  EXPECT_TRUE(std::ranges::equal(session.history(), plain.history()));
  EXPECT_TRUE(same_floats(session.last_logits(), plain.last_logits()));
  // The next turn resumes from the prompt's snapshot in both.
  std::vector<TokenId> next_turn = prompt;
  next_turn.insert(next_turn.end(), {7, 9});
  const GenerateResult a =
      plain.generate(std::span<const TokenId>(next_turn), options_for(0.0f, 8));
  const GenerateResult b =
      session.generate(std::span<const TokenId>(next_turn), options_for(0.0f, 8));
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.cached_tokens, b.cached_tokens);
}

TEST(PromptLookupDrafter, TheLatestLongestMatchAndWhatFollowedIt) {
  PromptLookupDrafter lookup(1, 3);
  // "7 8" occurs twice before the end; the later one (at 4) is followed by 9 1.
  const std::vector<TokenId> context = {7, 8, 2, 3, 7, 8, 9, 1, 5, 7, 8};
  EXPECT_EQ(lookup.draft(context, 4), (std::vector<TokenId>{9, 1, 5, 7}));
  EXPECT_EQ(lookup.draft(context, 2), (std::vector<TokenId>{9, 1}));
  // The 3-gram "5 7 8" never occurred before; "7 8" did: the longest wins,
  // not the latest 1-gram (8, followed by 9 at the last occurrence too).
  const std::vector<TokenId> longer = {1, 2, 3, 9, 2, 3, 4, 6, 1, 2, 3};
  EXPECT_EQ(lookup.draft(longer, 3), (std::vector<TokenId>{9, 2, 3}));
  // Nothing repeats: no draft.
  EXPECT_TRUE(lookup.draft(std::vector<TokenId>{1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(lookup.draft(std::vector<TokenId>{1}, 4).empty());
  EXPECT_TRUE(lookup.draft(context, 0).empty());
  // Only n-grams of at least ngram_min count.
  EXPECT_TRUE(PromptLookupDrafter(2, 3).draft(std::vector<TokenId>{4, 1, 5, 1}, 4).empty());
  EXPECT_THROW(PromptLookupDrafter(0, 3), Error);
  EXPECT_THROW(PromptLookupDrafter(3, 2), Error);
}

}  // namespace
}  // namespace cortiq
