// The CLI's options reach the engine: each sampling flag of `cortiq run`
// gives the tokens the C++ API gives with the same option set (and not the
// tokens without it), and -c / -b default as the README says.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/json_parser.hpp"
#include "cortiq/cortiq.hpp"
#include "engine_test_models.hpp"
#include "test_support.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq {
namespace {

// Commands log to stderr, which run_cli folds into the output: keep the
// log quiet where the test parses stdout.
struct QuietLog {
  QuietLog() { ::setenv("CORTIQ_LOG", "warn", 1); }
  ~QuietLog() { ::unsetenv("CORTIQ_LOG"); }
};

const test::TestModelSpec kModel{.arch = "llama"};
const std::vector<TokenId> kPrompt = {1, 5, 9, 5, 9, 14, 5, 9};
constexpr int64_t kTokens = 16;
constexpr uint64_t kSeed = 11;
constexpr float kTemperature = 1.3f;

struct Outcome {
  std::vector<int64_t> ids;
  std::string finish_reason;
  std::string text;
  int64_t drafted = 0;
};

// `cortiq run` on the test model with the common options plus `flags`.
Outcome cli_run(const std::string& flags) {
  std::string out;
  const int rc = test::run_cli("run -m " + test::test_model_path(kModel).string() +
                                   " --ids '1 5 9 5 9 14 5 9' -n " + std::to_string(kTokens) +
                                   " --ignore-eos --json --seed " + std::to_string(kSeed) +
                                   " --temp 1.3 " + flags,
                               &out);
  if (rc != 0)
    throw std::runtime_error("cortiq run " + flags + " exited " + std::to_string(rc) + ": " + out);
  const Json json = parse_json(out);
  Outcome o;
  for (const Json& id : json.find("ids")->array) o.ids.push_back(id.integer);
  o.finish_reason = json.find("finish_reason")->string;
  o.text = json.find("text")->string;
  o.drafted = json.find("speculative")->find("drafted")->integer;
  return o;
}

// The same through the C++ API: the CLI's defaults (f16 cache, chunk 512,
// the model's context) with `set` applied to the options.
Outcome api_run(const std::function<void(GenerateOptions&)>& set) {
  const auto model = test::load_test_model(kModel, 2, KvType::f16);
  GenerateOptions options;
  options.sampling.temperature = kTemperature;
  options.sampling.seed = kSeed;
  options.max_tokens = kTokens;
  options.ignore_eos = true;
  set(options);
  Session session(model);
  const GenerateResult r = session.generate(std::span<const TokenId>(kPrompt), options);
  Outcome o;
  o.ids.assign(r.tokens.begin(), r.tokens.end());
  o.finish_reason = std::string(finish_reason_name(r.finish_reason));
  o.text = r.text;
  o.drafted = r.speculative.drafted;
  return o;
}

struct FlagCase {
  std::string flags;
  std::function<void(GenerateOptions&)> set;
};

// Every sampling flag (README "Use"): the CLI's tokens are the API's with
// the option set, and differ from the tokens without the flag, so a flag
// the CLI dropped or mapped to the wrong field fails here.
TEST(CliOptions, EverySamplingFlagGivesTheTokensOfItsOption) {
  const QuietLog quiet;
  const Outcome plain = cli_run("");
  ASSERT_EQ(plain.ids, api_run([](GenerateOptions&) {}).ids) << "the defaults differ";
  const std::vector<FlagCase> cases = {
      {"--temp 0", [](GenerateOptions& o) { o.sampling.temperature = 0; }},
      {"--top-k 2", [](GenerateOptions& o) { o.sampling.top_k = 2; }},
      {"--top-p 0.3", [](GenerateOptions& o) { o.sampling.top_p = 0.3f; }},
      {"--min-p 0.5", [](GenerateOptions& o) { o.sampling.min_p = 0.5f; }},
      {"--typical 0.3", [](GenerateOptions& o) { o.sampling.typical_p = 0.3f; }},
      {"--repeat-penalty 4 --repeat-last-n -1",
       [](GenerateOptions& o) {
         o.sampling.repeat_penalty = 4;
         o.sampling.penalty_last_n = -1;
       }},
      {"--presence-penalty 8", [](GenerateOptions& o) { o.sampling.presence_penalty = 8; }},
      {"--frequency-penalty 4", [](GenerateOptions& o) { o.sampling.frequency_penalty = 4; }},
      {"--logit-bias 7=5 --logit-bias 9=-inf",
       [](GenerateOptions& o) {
         o.sampling.logit_bias = {{7, 5.0f}, {9, -INFINITY}};
       }},
  };
  for (const FlagCase& c : cases) {
    const Outcome cli = cli_run(c.flags);
    EXPECT_EQ(cli.ids, api_run(c.set).ids) << c.flags;
    EXPECT_NE(cli.ids, plain.ids) << c.flags << " changed nothing";
  }
  // --suppress: the tokens plain sampling drew first never appear.
  const std::string banned = std::to_string(plain.ids[0]) + "," + std::to_string(plain.ids[1]);
  const Outcome suppressed = cli_run("--suppress " + banned + " --suppress 3");
  EXPECT_EQ(suppressed.ids, api_run([&](GenerateOptions& o) {
                              o.sampling.suppressed = {static_cast<TokenId>(plain.ids[0]),
                                                       static_cast<TokenId>(plain.ids[1]), 3};
                            }).ids);
  for (const int64_t id : suppressed.ids) {
    EXPECT_TRUE(id != plain.ids[0] && id != plain.ids[1] && id != 3) << id;
  }
  // --repeat-last-n 0 turns the penalties off: the plain tokens again.
  EXPECT_EQ(cli_run("--repeat-penalty 4 --repeat-last-n 0").ids, plain.ids);
}

// --stop cuts the text before the stop string (finish_reason stop), as the
// API's stop option does.
TEST(CliOptions, StopEndsWhereTheApiEnds) {
  const QuietLog quiet;
  const Outcome plain = cli_run("");
  // Two letters or digits from the middle of the text: safe to quote.
  std::string stop;
  for (size_t i = plain.text.size() / 3; i + 1 < plain.text.size() && stop.empty(); ++i) {
    if (std::isalnum(static_cast<unsigned char>(plain.text[i])) &&
        std::isalnum(static_cast<unsigned char>(plain.text[i + 1]))) {
      stop = plain.text.substr(i, 2);
    }
  }
  ASSERT_FALSE(stop.empty()) << "no two alphanumerics in: " << plain.text;
  const Outcome cli = cli_run("--stop '" + stop + "'");
  const Outcome api = api_run([&](GenerateOptions& o) { o.stop = {stop}; });
  EXPECT_EQ(cli.text, api.text);
  EXPECT_EQ(cli.ids, api.ids);
  EXPECT_EQ(cli.finish_reason, "stop");
  EXPECT_EQ(cli.text, plain.text.substr(0, plain.text.find(stop)));
}

// --loop-stop ends a run that repeats itself (finish_reason loop) where
// the API with loop_stop ends; a bias makes token 7 the greedy choice at
// every step, so the run loops from its first token.
TEST(CliOptions, LoopStopEndsWhereTheApiEnds) {
  const QuietLog quiet;
  const std::string looping = "--temp 0 -n 200 --logit-bias 7=100";
  const Outcome cli = cli_run(looping + " --loop-stop");
  const Outcome api = api_run([](GenerateOptions& o) {
    o.sampling.temperature = 0;
    o.sampling.logit_bias = {{7, 100.0f}};
    o.max_tokens = 200;
    o.loop_stop = true;
  });
  EXPECT_EQ(cli.ids, api.ids);
  EXPECT_EQ(cli.finish_reason, "loop");
  EXPECT_LT(cli.ids.size(), 200u);
  EXPECT_EQ(cli_run(looping).ids.size(), 200u);
}

// --draft-min (with lookup drafting: the drafts of the API's draft_min, the
// greedy ids unchanged, other drafts than without it); --spec-same-draws
// with a draft model keeps plain sampling's draws for the seed, which
// speculative sampling (the default) does not.
TEST(CliOptions, SpeculativeFlagsChangeTheDraftsNotTheGreedyTokens) {
  const QuietLog quiet;
  const Outcome greedy = cli_run("--temp 0 -n 48");
  const Outcome lookup = cli_run("--temp 0 -n 48 --spec lookup");
  const Outcome lookup_min = cli_run("--temp 0 -n 48 --spec lookup --draft-min 3");
  const Outcome api_min = api_run([](GenerateOptions& o) {
    o.sampling.temperature = 0;
    o.max_tokens = 48;
    o.speculative.drafter = std::make_shared<PromptLookupDrafter>(1, 4);
    o.speculative.draft_min = 3;
  });
  EXPECT_EQ(lookup.ids, greedy.ids);
  EXPECT_EQ(lookup_min.ids, greedy.ids);
  EXPECT_EQ(api_min.ids, greedy.ids);
  EXPECT_GT(lookup.drafted, 0);
  EXPECT_EQ(lookup_min.drafted, api_min.drafted);
  EXPECT_NE(lookup_min.drafted, lookup.drafted);
  const std::string draft = " --draft-model " + test::test_model_path(kModel).string();
  const Outcome plain = cli_run("");
  const Outcome same = cli_run(draft + " --spec-same-draws");
  EXPECT_EQ(same.ids, plain.ids);
  EXPECT_GT(same.drafted, 0);
  EXPECT_NE(cli_run(draft).ids, plain.ids);
}

// The context and the prefill chunk, as --verbose logs them.
std::string verbose_run(const test::TestModelSpec& spec, const std::string& flags) {
  std::string out;
  const int rc = test::run_cli(
      "run -m " + test::test_model_path(spec).string() + " --ids '1 2 3' -n 1 --temp 0 -v " + flags,
      &out);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

int64_t logged_context(const std::string& out) {
  const auto at = out.find("; context ");
  if (at == std::string::npos) return -1;
  return std::strtoll(out.c_str() + at + 10, nullptr, 10);
}

// -c defaults to the model's trained context, at most 4096.
TEST(CliOptions, ContextDefaultsToTheModelsUpTo4096) {
  EXPECT_EQ(logged_context(verbose_run({.arch = "llama", .n_ctx = 256}, "")), 256);
  EXPECT_EQ(logged_context(verbose_run({.arch = "llama", .n_ctx = 8192}, "")), 4096);
  EXPECT_EQ(logged_context(verbose_run({.arch = "llama", .n_ctx = 8192}, "-c 6000")), 6000);
  EXPECT_EQ(logged_context(verbose_run({.arch = "llama", .n_ctx = 256}, "-c 100")), 100);
}

// -b defaults to 512: a sliding-window layer keeps window - 1 + 2 x chunk
// positions, so the KV memory --verbose logs shows the chunk.
TEST(CliOptions, PrefillChunkDefaultsTo512) {
  const test::TestModelSpec gemma2{.arch = "gemma2", .n_ctx = 8192};
  const auto memory = [&](const std::string& flags) {
    const std::string out = verbose_run(gemma2, flags);
    const auto at = out.find("memory per sequence: KV cache ");
    return at == std::string::npos ? "none in: " + out : out.substr(at, out.find('\n', at) - at);
  };
  const std::string by_default = memory("");
  EXPECT_EQ(by_default, memory("-b 512"));
  EXPECT_NE(by_default, memory("-b 64"));
  EXPECT_NE(by_default, memory("-b 1024"));
}

// Ctrl-C during a chat reply stops the reply ("[stopped]"), not the
// program: the next line (/exit) is still read and the exit status is 0.
// The reply could run for thousands of tokens (no end-of-generation token,
// an 8192-position context), so only the interrupt ends it early.
TEST(CliOptions, CtrlCStopsAChatReplyNotTheProgram) {
  const test::TestModelSpec spec{
      .arch = "llama", .n_ctx = 8192, .n_embd = 256, .n_ff = 512, .n_layer = 4};
  const TokenId eos = test::load_test_model(spec)->tokenizer().vocab().eos;
  test::TempDir dir;
  const std::string script =
      "cd " + dir.path().string() + " && mkfifo in || exit 1; " + CORTIQ_CLI_PATH + " chat -m " +
      test::test_model_path(spec).string() + " -c 8192 --temp 0 --logit-bias " +
      std::to_string(eos) + "=-inf < in > out 2> err & pid=$!; exec 3<> in; echo Hi >&3; " +
      "for i in $(seq 600); do [ -s out ] && break; sleep 0.05; done; kill -INT $pid; " +
      "echo /exit >&3; exec 3>&-; wait $pid; echo \"rc=$?\"; cat err";
  const std::string command = "bash -c '" + script + "' 2>&1";
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  ::pclose(pipe);
  EXPECT_NE(out.find("rc=0"), std::string::npos) << out;
  EXPECT_NE(out.find("[stopped]"), std::string::npos) << out;
  EXPECT_GT(test::read_file_bytes(dir / "out").size(), 0u);
}

}  // namespace
}  // namespace cortiq
