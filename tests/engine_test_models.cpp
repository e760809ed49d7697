#include "engine_test_models.hpp"

#include <map>
#include <mutex>

#include "base/strings.hpp"
#include "model/family.hpp"
#include "test_support.hpp"

namespace cortiq::test {

namespace {

std::string key_of(const TestModelSpec& s) {
  return strfmt("%s-%s-c%lld-e%lld-h%lld-kv%lld-ff%lld-l%lld-s%llu", s.arch.c_str(),
                std::string(ggml_type_name(s.type)).c_str(), static_cast<long long>(s.n_ctx),
                static_cast<long long>(s.n_embd), static_cast<long long>(s.n_head),
                static_cast<long long>(s.n_head_kv), static_cast<long long>(s.n_ff),
                static_cast<long long>(s.n_layer), static_cast<unsigned long long>(s.seed));
}

}  // namespace

std::filesystem::path test_model_path(const TestModelSpec& spec) {
  static test::TempDir dir;
  static std::mutex mutex;
  static std::map<std::string, std::filesystem::path> made;
  const std::lock_guard lock(mutex);
  const std::string key = key_of(spec);
  if (auto it = made.find(key); it != made.end()) return it->second;
  RandomModelOptions options;
  options.family = find_family(spec.arch);
  options.geometry.n_embd = spec.n_embd;
  options.geometry.n_layer = spec.n_layer;
  options.geometry.n_head = spec.n_head;
  options.geometry.n_head_kv = spec.n_head_kv;
  options.geometry.n_ff = spec.n_ff;
  options.geometry.n_ctx = spec.n_ctx;
  options.weight_type = spec.type;
  options.seed = spec.seed;
  const auto path = dir / (key + ".gguf");
  write_random_model(options, path);
  made.emplace(key, path);
  return path;
}

std::shared_ptr<const Model> load_test_model(const TestModelSpec& spec, int threads, KvType kv,
                                             int64_t chunk, int64_t context) {
  LoadOptions options;
  options.threads = threads;
  options.kv_type = kv;
  options.chunk_size = chunk;
  options.context = context;
  return Model::load(test_model_path(spec), options);
}

GenerateOptions greedy(int64_t max_tokens) {
  GenerateOptions options;
  options.sampling.temperature = 0;
  options.max_tokens = max_tokens;
  options.ignore_eos = true;
  return options;
}

std::vector<TokenId> prompt_of(size_t n, uint32_t salt) {
  std::vector<TokenId> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(static_cast<TokenId>(3 + (i * 7 + salt * 13) % 250));
  return ids;
}

}  // namespace cortiq::test
