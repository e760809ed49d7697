// The `cortiq` front end: help, usage errors (exit 2) and failures (exit 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/cpu_features.hpp"
#include "base/version.hpp"
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

// `cortiq --version`: the release, the commit it was built from and what
// the CPU offers, with the kernel level the engine will run.
TEST(CliMain, VersionNamesTheReleaseCommitAndKernelLevel) {
  std::string out;
  ASSERT_EQ(run_cli("--version", &out), 0) << out;
  const std::string head = std::string("cortiq ") + kVersion + " (commit " + kGitCommit + ")\n";
  EXPECT_EQ(out.substr(0, head.size()), head) << out;
  EXPECT_NE(out.find("cpu features: " + cpu_features_string() + "; kernels: "), std::string::npos)
      << out;
  EXPECT_EQ(run_cli("-V", &out), 0);
  EXPECT_EQ(out.substr(0, head.size()), head) << out;
}

// The kernel level --version reports under CORTIQ_SIMD.
std::string kernels_under(const std::string& simd) {
  std::string out;
  const std::string env = simd.empty() ? "env -u CORTIQ_SIMD " : "env CORTIQ_SIMD=" + simd + " ";
  // run_cli prefixes the CLI's path: run it through env instead.
  const std::string command = env + CORTIQ_CLI_PATH + " --version 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "popen failed";
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  const auto at = out.find("kernels: ");
  if (at == std::string::npos) return "no kernels line in: " + out;
  const auto end = out.find('\n', at);
  return out.substr(at + 9, end - at - 9) +
         (out.find("warn") != std::string::npos ? " (warned)" : "");
}

// CORTIQ_SIMD lowers the level and never raises it past the CPU's; an
// unknown name is refused with a warning and the best level kept.
TEST(CliMain, CortiqSimdCapsTheKernelLevel) {
  const std::vector<std::string> order = {"scalar", "avx2", "avx512"};
  const std::string best = kernels_under("");
  const auto rank = [&](const std::string& level) {
    return std::find(order.begin(), order.end(), level) - order.begin();
  };
  if (rank(best) == static_cast<long>(order.size())) {
    GTEST_SKIP() << "not an x86-64 build (kernels: " << best << ")";
  }
  for (const std::string& wanted : order) {
    const std::string expected = rank(wanted) < rank(best) ? wanted : best;
    EXPECT_EQ(kernels_under(wanted), expected) << "CORTIQ_SIMD=" << wanted;
  }
  EXPECT_EQ(kernels_under("sse9"), best + " (warned)");
}

}  // namespace
}  // namespace cortiq
