// Every `cortiq quantize` recipe writes what `llama-quantize` writes: the
// same general.file_type and, per tensor, the same type and bytes (an FNV-1a
// 64 hash of them). The goldens in tests/golden/quantize/ come from
// tools/peer/make-quantize-goldens.sh, which ran llama-quantize on the same
// gen-model inputs; each names its input's gen-model arguments and recipe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "formats/gguf/gguf_file.hpp"
#include "quant/ggml_type.hpp"
#include "test_support.hpp"

namespace cortiq {
namespace {

struct RecipeGolden {
  std::string gen_model_args;
  std::string recipe;
  uint64_t file_type = 0;
  // name -> (type, hash), in the file's order.
  std::vector<std::tuple<std::string, std::string, std::string>> tensors;
};

RecipeGolden read_golden(const std::filesystem::path& path) {
  std::ifstream in(path);
  RecipeGolden golden;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key;
    std::getline(fields, key, '\t');
    std::string rest;
    std::getline(fields, rest);
    if (key == "gen-model") {
      golden.gen_model_args = rest;
    } else if (key == "recipe") {
      golden.recipe = rest;
    } else if (key == "file_type") {
      golden.file_type = std::stoull(rest);
    } else {
      const size_t tab = rest.find('\t');
      golden.tensors.emplace_back(key, rest.substr(0, tab), rest.substr(tab + 1));
    }
  }
  return golden;
}

std::string fnv1a64(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const std::byte b : bytes) h = (h ^ static_cast<uint64_t>(b)) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::vector<std::filesystem::path> golden_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(test::golden_dir() / "quantize")) {
    if (entry.path().extension() == ".tsv") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(QuantRecipeGolden, EveryRecipeWritesLlamaQuantizesTypesAndBytes) {
  const auto files = golden_files();
  ASSERT_GE(files.size(), 20u) << "tests/golden/quantize holds too few goldens";
  test::TempDir dir;
  std::map<std::string, std::filesystem::path> inputs;  // gen-model arguments -> file
  for (const auto& path : files) {
    const RecipeGolden golden = read_golden(path);
    SCOPED_TRACE(path.filename().string());
    ASSERT_FALSE(golden.gen_model_args.empty());
    ASSERT_FALSE(golden.tensors.empty());
    auto [input, inserted] = inputs.try_emplace(
        golden.gen_model_args, dir / ("input-" + std::to_string(inputs.size()) + ".gguf"));
    std::string out;
    if (inserted) {
      ASSERT_EQ(test::run_cli(
                    "gen-model " + golden.gen_model_args + " -o " + input->second.string(), &out),
                0)
          << out;
    }
    const auto quantized = dir / "quantized.gguf";
    ASSERT_EQ(test::run_cli("quantize " + input->second.string() + " " + quantized.string() + " " +
                                golden.recipe + " --threads 2",
                            &out),
              0)
        << out;
    const gguf::GgufFile file = gguf::GgufFile::open(quantized);
    EXPECT_EQ(file.get_uint("general.file_type"), golden.file_type);
    ASSERT_EQ(file.tensors().size(), golden.tensors.size());
    int differ = 0;
    for (const auto& [name, type, hash] : golden.tensors) {
      const gguf::TensorInfo* t = file.find_tensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(ggml_type_name(t->type), type) << name;
      if (fnv1a64(t->data) != hash) ++differ;
      EXPECT_EQ(fnv1a64(t->data), hash) << name << " (" << type << "): bytes differ";
    }
    EXPECT_EQ(differ, 0) << golden.recipe;
  }
}

}  // namespace
}  // namespace cortiq
