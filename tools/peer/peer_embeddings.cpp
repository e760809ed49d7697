// peer-embeddings: runs llama.cpp on an encoder GGUF (BERT) and writes the
// hidden state of every position (pooling none: llama.cpp's per-token
// embeddings) as raw little-endian float32, row-major [n_tokens][n_embd].
// The ids are used as given (no special tokens are added); the whole
// sequence goes through one llama_encode, as llama.cpp requires for
// non-causal attention.
//   peer-embeddings -m MODEL.gguf --ids "1 2 3" -o OUT.f32 [-t THREADS]
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  std::string model_path, ids_text, out_path;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "missing value for %s\n", arg.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "-m") {
      model_path = value;
    } else if (arg == "--ids") {
      ids_text = value;
    } else if (arg == "-o") {
      out_path = value;
    } else if (arg == "-t") {
      threads = std::atoi(value.c_str());
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (model_path.empty() || ids_text.empty() || out_path.empty()) {
    std::fprintf(stderr, "usage: peer-embeddings -m MODEL --ids \"1 2 3\" -o OUT.f32 [-t N]\n");
    return 2;
  }
  std::vector<llama_token> ids;
  std::istringstream in(ids_text);
  for (long id; in >> id;) ids.push_back(static_cast<llama_token>(id));
  if (ids.empty()) {
    std::fprintf(stderr, "no ids\n");
    return 2;
  }

  llama_backend_init();
  llama_model_params model_params = llama_model_default_params();
  model_params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), model_params);
  if (model == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    return 1;
  }
  llama_context_params ctx_params = llama_context_default_params();
  const auto n = static_cast<uint32_t>(ids.size());
  ctx_params.n_ctx = n;
  ctx_params.n_batch = ctx_params.n_ubatch = n;
  ctx_params.n_threads = ctx_params.n_threads_batch = threads;
  ctx_params.embeddings = true;
  ctx_params.pooling_type = LLAMA_POOLING_TYPE_NONE;
  ctx_params.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  ctx_params.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, ctx_params);
  if (ctx == nullptr) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  llama_batch batch = llama_batch_init(static_cast<int32_t>(n), 0, 1);
  for (uint32_t i = 0; i < n; ++i) {
    batch.token[i] = ids[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = static_cast<int32_t>(n);
  if (llama_encode(ctx, batch) != 0) {
    std::fprintf(stderr, "llama_encode failed\n");
    return 1;
  }
  const int n_embd = llama_model_n_embd(model);
  FILE* out = std::fopen(out_path.c_str(), "wb");
  if (out == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", out_path.c_str());
    return 1;
  }
  for (uint32_t i = 0; i < n; ++i) {
    const float* row = llama_get_embeddings_ith(ctx, static_cast<int32_t>(i));
    if (row == nullptr) {
      std::fprintf(stderr, "no embedding for position %u\n", i);
      return 1;
    }
    std::fwrite(row, sizeof(float), static_cast<size_t>(n_embd), out);
  }
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
