// Small random-weight models for the engine tests, written once per test
// binary run into a temporary directory (gen-model is deterministic, so the
// same options always give the same file).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cortiq/cortiq.hpp"
#include "model/gen_model/random_model.hpp"

namespace cortiq::test {

struct TestModelSpec {
  std::string arch = "llama";
  GgmlType type = GgmlType::F32;
  int64_t n_ctx = 256;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_ff = 128;
  int64_t n_layer = 2;
  uint64_t seed = 7;
};

// The path of a model file for the spec, generated on first use.
std::filesystem::path test_model_path(const TestModelSpec& spec);

// Loaded with `threads` threads and the given KV type and chunk size.
std::shared_ptr<const Model> load_test_model(const TestModelSpec& spec, int threads = 2,
                                             KvType kv = KvType::f32, int64_t chunk = 512,
                                             int64_t context = 0);

// n token ids walking over the small vocabularies (3..252), one walk per salt.
std::vector<TokenId> prompt_of(size_t n, uint32_t salt);

// Greedy generation of max_tokens tokens (-1: to the context), past any
// end-of-generation token.
GenerateOptions greedy(int64_t max_tokens);

}  // namespace cortiq::test
