// The `cortiq` front end: help, usage errors (exit 2) and failures (exit 1).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace cortiq {
namespace {

using test::run_cli;

TEST(CliMain, HelpListsCommands) {
  std::string out;
  EXPECT_EQ(run_cli("--help", &out), 0);
  EXPECT_NE(out.find("inspect"), std::string::npos) << out;
  EXPECT_NE(out.find("quantize"), std::string::npos);
  EXPECT_NE(out.find("gen-model"), std::string::npos);
}

TEST(CliMain, NoArgumentsOrUnknownCommandIsAUsageError) {
  std::string out;
  EXPECT_EQ(run_cli("", &out), 2);
  EXPECT_EQ(run_cli("frobnicate", &out), 2);
  EXPECT_NE(out.find("unknown command 'frobnicate'"), std::string::npos) << out;
}

TEST(CliMain, CommandHelp) {
  std::string out;
  EXPECT_EQ(run_cli("inspect --help", &out), 0);
  EXPECT_NE(out.find("usage: cortiq inspect"), std::string::npos) << out;
  EXPECT_NE(out.find("--json"), std::string::npos);
  EXPECT_EQ(run_cli("quantize --help", &out), 0);
  EXPECT_NE(out.find("Q4_K_M"), std::string::npos) << out;
  EXPECT_NE(out.find("--pure"), std::string::npos);
  EXPECT_EQ(run_cli("gen-model -h", &out), 0);
  EXPECT_NE(out.find("--arch"), std::string::npos) << out;
  EXPECT_NE(out.find("qwen3"), std::string::npos);
}

struct UsageCase {
  const char* args;
  const char* message;
};

TEST(CliMain, BadArgumentsExitTwoWithAMessage) {
  const UsageCase cases[] = {
      {"inspect", "missing argument FILE"},
      {"inspect --bogus x.gguf", "unknown option --bogus"},
      {"inspect a.gguf b.gguf", "unexpected argument 'b.gguf'"},
      {"quantize in.gguf out.gguf", "missing argument TYPE"},
      {"quantize in.gguf out.gguf NOPE", "unknown type or recipe 'NOPE'"},
      {"quantize in.gguf out.gguf Q4_0 --threads 0", "--threads"},
      {"gen-model -o x.gguf", "missing --arch"},
      {"gen-model --arch llama", "missing -o"},
      {"gen-model --arch gpt9 -o x.gguf", "unknown architecture 'gpt9'"},
      {"gen-model --arch llama --layers 0 -o x.gguf", "--layers"},
      {"gen-model --arch llama --embd abc -o x.gguf", "not an integer"},
      {"gen-model --arch llama --type IQ2_XXS -o x.gguf", "--type IQ2_XXS"},
      {"gen-model --arch llama --tied --untied -o x.gguf", "exclude"},
  };
  for (const UsageCase& c : cases) {
    std::string out;
    EXPECT_EQ(run_cli(c.args, &out), 2) << c.args << "\n" << out;
    EXPECT_NE(out.find(c.message), std::string::npos) << c.args << "\n" << out;
    EXPECT_NE(out.find("--help"), std::string::npos) << c.args;  // the hint
  }
}

TEST(CliMain, MissingFileExitsOneNamingThePath) {
  test::TempDir dir;
  const std::string missing = (dir / "no-such-model.gguf").string();
  std::string out;
  EXPECT_EQ(run_cli("inspect " + missing, &out), 1);
  EXPECT_NE(out.find(missing), std::string::npos) << out;
  EXPECT_EQ(run_cli("quantize " + missing + " " + (dir / "out.gguf").string() + " Q8_0", &out), 1);
  EXPECT_NE(out.find(missing), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "out.gguf"));
  EXPECT_EQ(
      run_cli("gen-model --arch llama --vocab-from " + missing + " -o " + (dir / "m.gguf").string(),
              &out),
      1);
  EXPECT_NE(out.find(missing), std::string::npos) << out;
}

TEST(CliMain, ImpossibleGeometryIsAnError) {
  test::TempDir dir;
  std::string out;
  EXPECT_EQ(run_cli("gen-model --arch llama --heads 3 -o " + (dir / "m.gguf").string(), &out), 1);
  EXPECT_NE(out.find("invalid model geometry"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir / "m.gguf"));
}

}  // namespace
}  // namespace cortiq
