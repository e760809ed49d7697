// `cortiq run`, `cortiq logits` and `cortiq chat` end to end on a small
// random-weight model (the text is random; the plumbing is real).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "base/json_parser.hpp"
#include "engine_test_models.hpp"
#include "test_support.hpp"

#if CORTIQ_HAVE_VULKAN
#include "backends/vulkan/vulkan_device.hpp"
#endif

namespace cortiq {
namespace {

// Commands log to stderr, which run_cli folds into the output: keep the
// log quiet where the test parses stdout.
struct QuietLog {
  QuietLog() { ::setenv("CORTIQ_LOG", "warn", 1); }
  ~QuietLog() { ::unsetenv("CORTIQ_LOG"); }
};

std::string model_arg() {
  return "-m " + test::test_model_path({.arch = "llama"}).string();
}

TEST(CliRun, GreedyJsonResult) {
  const QuietLog quiet;
  std::string out;
  ASSERT_EQ(test::run_cli("run " + model_arg() +
                              " -p 'Hello there' -n 6 --temp 0 --ignore-eos "
                              "--json --confidence ",
                          &out),
            0)
      << out;
  const Json json = parse_json(out);
  const auto field = [&](std::string_view key) -> const Json& {
    const Json* v = json.find(key);
    if (!v) throw std::runtime_error("no " + std::string(key) + " in " + out);
    return *v;
  };
  EXPECT_EQ(field("generated_tokens").integer, 6);
  EXPECT_EQ(field("ids").array.size(), 6u);
  EXPECT_EQ(field("confidence").array.size(), 6u);
  EXPECT_EQ(field("finish_reason").string, "max_tokens");
  EXPECT_GT(field("prompt_tokens").integer, 1);
  EXPECT_NE(field("timings").find("decode_tokens_per_second"), nullptr);
  // The same greedy run streams the same text.
  std::string streamed;
  ASSERT_EQ(test::run_cli("run " + model_arg() + " -p 'Hello there' -n 6 --temp 0 --ignore-eos ",
                          &streamed),
            0);
  EXPECT_EQ(streamed, field("text").string + "\n");
}

// --spec lookup and --draft-model: the ids of plain decoding, the drafts
// counted in the result; an unknown drafter, --spec draft without a model
// or n-gram sizes the wrong way round are refused.
TEST(CliRun, SpecLookupGivesThePlainIds) {
  const QuietLog quiet;
  const std::string common =
      "run " + model_arg() +
      " --ids '5 17 29 41 17 29 41 53 17 29' -n 24 --temp 0 --ignore-eos --json";
  std::string plain, spec;
  ASSERT_EQ(test::run_cli(common, &plain), 0) << plain;
  ASSERT_EQ(test::run_cli(common + " --spec lookup --draft-max 4", &spec), 0) << spec;
  const Json a = parse_json(plain), b = parse_json(spec);
  ASSERT_NE(a.find("ids"), nullptr);
  ASSERT_NE(b.find("ids"), nullptr);
  ASSERT_EQ(a.find("ids")->array.size(), 24u);
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(a.find("ids")->array[i].integer, b.find("ids")->array[i].integer) << i;
  }
  EXPECT_EQ(a.find("speculative")->find("drafted")->integer, 0);
  EXPECT_GT(b.find("speculative")->find("drafted")->integer, 0);
  std::string out;
  EXPECT_EQ(test::run_cli(common + " --spec draft", &out), 2);
  EXPECT_NE(out.find("--spec draft needs --draft-model"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli(common + " --spec medusa", &out), 2);
  EXPECT_NE(out.find("--spec: 'medusa'"), std::string::npos) << out;
  // The model as its own draft: the same ids, every draft kept.
  std::string drafted;
  ASSERT_EQ(
      test::run_cli(common + " --draft-model " + test::test_model_path({.arch = "llama"}).string(),
                    &drafted),
      0)
      << drafted;
  const Json c = parse_json(drafted);
  for (size_t i = 0; i < 24; ++i) {
    EXPECT_EQ(a.find("ids")->array[i].integer, c.find("ids")->array[i].integer) << i;
  }
  EXPECT_EQ(c.find("speculative")->find("accepted")->integer,
            c.find("speculative")->find("drafted")->integer);
  EXPECT_EQ(
      test::run_cli(common + " --spec lookup --lookup-ngram-min 3 --lookup-ngram-max 2", &out), 2);
  EXPECT_NE(out.find("--lookup-ngram-min"), std::string::npos) << out;
}

TEST(CliRun, SpeedGoesToStderr) {
  std::string out;
  ASSERT_EQ(test::run_cli("run " + model_arg() + " --ids '1 5 9' -n 3 --temp 0.7 --seed 3", &out),
            0);
  EXPECT_NE(out.find("tokens/s"), std::string::npos) << out;
  EXPECT_NE(out.find("loaded"), std::string::npos) << out;
}

// --verbose logs what one sequence takes beside the weights, even under a
// quieter CORTIQ_LOG: KV rows per position and, for a model with recurrent
// layers, the fixed state.
TEST(CliRun, VerboseReportsTheMemoryPerSequence) {
  const QuietLog quiet;
  std::string out;
  const auto lfm2 = test::test_model_path({.arch = "lfm2"}).string();
  ASSERT_EQ(test::run_cli("run -m " + lfm2 + " --ids '1 5 9' -n 2 --temp 0 --verbose", &out), 0);
  EXPECT_NE(out.find("memory per sequence: KV cache"), std::string::npos) << out;
  EXPECT_NE(out.find("bytes per position, f16), recurrent state"), std::string::npos) << out;
  ASSERT_EQ(test::run_cli("run " + model_arg() + " --ids '1 5 9' -n 2 --temp 0", &out), 0);
  EXPECT_EQ(out.find("memory per sequence"), std::string::npos) << out;
}

TEST(CliRun, InvalidValuesNameTheOption) {
  std::string out;
  EXPECT_EQ(test::run_cli("run " + model_arg() + " -p hi --top-p 1.5", &out), 2);
  EXPECT_NE(out.find("top_p"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("run " + model_arg() + " -p hi --temp -1", &out), 2);
  EXPECT_NE(out.find("temperature"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("run " + model_arg() + " -p hi --kv-type q8", &out), 2);
  EXPECT_EQ(test::run_cli("run -p hi", &out), 2);
  EXPECT_EQ(test::run_cli("run " + model_arg() + " --ids '1 99999'", &out), 1);
  EXPECT_NE(out.find("vocabulary"), std::string::npos) << out;
  EXPECT_EQ(test::run_cli("run -m /nonexistent.gguf -p hi", &out), 1);
}

TEST(CliLogits, WritesEveryPositionAndArgmaxLines) {
  const QuietLog quiet;
  test::TempDir dir;
  std::string out;
  const auto file = dir / "out.f32";
  ASSERT_EQ(
      test::run_cli("logits " + model_arg() + " --ids '1 2 3 4 5' -b 2 -o " + file.string() + " ",
                    &out),
      0)
      << out;
  EXPECT_EQ(std::filesystem::file_size(file), 5u * 612u * 4u);
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 5);
  EXPECT_EQ(out.rfind("0 1 ", 0), 0u) << out;
}

TEST(CliChat, AnswersEachTurnAndResets) {
  test::TempDir dir;
  const auto input = dir / "input.txt";
  const std::string turns = "Hi\n/reset\nAgain\n/exit\n";
  test::write_file_bytes(input, std::vector<uint8_t>(turns.begin(), turns.end()));
  std::string out;
  ASSERT_EQ(
      test::run_cli(
          "chat " + model_arg() + " --temp 0 -n 5 --system 'Be brief.' < " + input.string(), &out),
      0)
      << out;
  EXPECT_NE(out.find("conversation reset"), std::string::npos) << out;
  EXPECT_NE(out.find("ChatML"), std::string::npos) << out;  // no template in the file
}

TEST(CliChat, ATurnThatNoLongerFitsIsDroppedNotFatal) {
  test::TempDir dir;
  const auto input = dir / "input.txt";
  const std::string turns = "Hi\nThis second message makes the conversation too long\n/reset\nHi\n";
  test::write_file_bytes(input, std::vector<uint8_t>(turns.begin(), turns.end()));
  std::string out;
  EXPECT_EQ(test::run_cli("chat " + model_arg() + " -c 40 --temp 0 -n 4 < " + input.string(), &out),
            0)
      << out;
  EXPECT_NE(out.find("turn dropped"), std::string::npos) << out;
}

}  // namespace
}  // namespace cortiq

namespace cortiq {
namespace {

TEST(CliRun, ModelThatDoesNotFitSaysHowMuchItNeeds) {
  std::string out;
  EXPECT_EQ(test::run_cli("run " + model_arg() + " -c 1000000000 --kv-type f32 -p hi", &out), 1);
  EXPECT_NE(out.find("does not fit in memory: it needs"), std::string::npos) << out;
}

}  // namespace
}  // namespace cortiq

namespace cortiq {
namespace {

TEST(CliBench, ReportsPromptAndGenerationRowsInEachFormat) {
  const QuietLog quiet;
  std::string out;
  ASSERT_EQ(test::run_cli("bench " + model_arg() + " -p 16 -n 4 -r 2", &out), 0) << out;
  EXPECT_NE(out.find("| llama "), std::string::npos) << out;
  EXPECT_NE(out.find("pp16"), std::string::npos) << out;
  EXPECT_NE(out.find("tg4"), std::string::npos) << out;
  ASSERT_EQ(test::run_cli("bench " + model_arg() + " -p 8 -n 0 -r 1 -o json", &out), 0) << out;
  const Json json = parse_json(out);
  ASSERT_EQ(json.array.size(), 1u);
  EXPECT_EQ(json.array[0].find("test")->string, "pp8");
  EXPECT_GT(json.array[0].find("avg_ts")->number, 0.0);
  EXPECT_EQ(test::run_cli("bench " + model_arg() + " -o xml", &out), 2);
}

// -d D runs each test after D tokens in the cache, named as llama-bench
// names it; tg reports the bytes a step reads (weights plus the cache rows
// it attends to, so more at depth) and the machine's read bandwidth.
double number_of(const Json* j) {
  return j->type == Json::Type::integer ? static_cast<double>(j->integer) : j->number;
}

TEST(CliBench, DepthAndReadBandwidth) {
  const QuietLog quiet;
  std::string out;
  ASSERT_EQ(test::run_cli("bench " + model_arg() + " -p 8 -n 4 -d 24 -r 1", &out), 0) << out;
  EXPECT_NE(out.find("pp8 @ d24"), std::string::npos) << out;
  EXPECT_NE(out.find("tg4 @ d24: "), std::string::npos) << out;
  EXPECT_NE(out.find("of the machine's read bandwidth"), std::string::npos) << out;
  double bytes[2] = {};
  for (const int depth : {0, 24}) {
    ASSERT_EQ(
        test::run_cli(
            "bench " + model_arg() + " -p 0 -n 4 -r 1 -o json -d " + std::to_string(depth), &out),
        0)
        << out;
    const Json json = parse_json(out);
    ASSERT_EQ(json.array.size(), 1u);
    const Json& tg = json.array[0];
    EXPECT_EQ(number_of(tg.find("n_depth")), depth);
    EXPECT_GT(number_of(tg.find("machine_read_bytes_per_second")), 0.0);
    EXPECT_NEAR(number_of(tg.find("read_bytes_per_second")),
                number_of(tg.find("bytes_per_token")) * number_of(tg.find("avg_ts")),
                1e-6 * number_of(tg.find("read_bytes_per_second")));
    bytes[depth > 0] = number_of(tg.find("bytes_per_token"));
  }
  EXPECT_GT(bytes[1], bytes[0]);  // 24 more cache rows per step
}

// `bench --device vulkan` (and -ngl): the backend column and the device
// named, the tg test's achieved read rate (bytes per token x t/s; the
// device's peak is not measured, so no share of it). In the Vulkan tests'
// process, as DeviceRoute.*.
TEST(DeviceRoute, BenchReportsTheDeviceAndTheAchievedBandwidth) {
#if CORTIQ_HAVE_VULKAN
  if (vulkan::list_vulkan_devices().empty()) GTEST_SKIP() << "no Vulkan device";
#else
  GTEST_SKIP() << "built without the Vulkan backend";
#endif
  const QuietLog quiet;
  std::string out;
  ASSERT_EQ(test::run_cli("bench " + model_arg() + " -p 8 -n 4 -r 1 --device vulkan", &out), 0)
      << out;
  EXPECT_NE(out.find("| Vulkan "), std::string::npos) << out;
  EXPECT_NE(out.find("device: vulkan 0: "), std::string::npos) << out;
  EXPECT_NE(out.find("tg4: "), std::string::npos) << out;
  EXPECT_NE(out.find("GB/s (on Vulkan)"), std::string::npos) << out;
  for (const char* ngl : {"-1", "1"}) {
    SCOPED_TRACE(std::string("-ngl ") + ngl);
    ASSERT_EQ(test::run_cli("bench " + model_arg() + " -p 8 -n 4 -r 1 -o json --device vulkan " +
                                "-ngl " + ngl,
                            &out),
              0)
        << out;
    const Json json = parse_json(out);
    ASSERT_EQ(json.array.size(), 2u);
    const Json& tg = json.array[1];
    EXPECT_EQ(tg.find("backends")->string, std::string(ngl) == "1" ? "CPU+Vulkan" : "Vulkan");
    EXPECT_NE(tg.find("device")->string.find("vulkan 0"), std::string::npos);
    EXPECT_GT(number_of(tg.find("avg_ts")), 0.0);
    EXPECT_NEAR(number_of(tg.find("read_bytes_per_second")),
                number_of(tg.find("bytes_per_token")) * number_of(tg.find("avg_ts")),
                1e-6 * number_of(tg.find("read_bytes_per_second")));
    EXPECT_EQ(tg.find("machine_read_bytes_per_second"), nullptr);
  }
}

}  // namespace
}  // namespace cortiq
