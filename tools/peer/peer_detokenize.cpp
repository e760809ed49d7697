// peer-detokenize MODEL.gguf < ids: for each line of space-separated token
// ids, prints llama.cpp's llama_detokenize of them (remove_special = false,
// unparse_special = false: what Cortiq's Tokenizer::decode(ids) gives) as
// one line of hex. Built and run by tools/peer/make-unigram-goldens.sh.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf < ids\n", argv[0]);
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<llama_token> ids;
    std::istringstream fields(line);
    for (llama_token id; fields >> id;) ids.push_back(id);
    std::string text(ids.size() * 32 + 16, '\0');
    int32_t n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), text.data(),
                                 static_cast<int32_t>(text.size()), false, false);
    if (n < 0) {
      text.resize(static_cast<size_t>(-n));
      n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), text.data(),
                           static_cast<int32_t>(text.size()), false, false);
    }
    text.resize(static_cast<size_t>(n));
    for (unsigned char c : text) std::printf("%02x", c);
    std::printf("\n");
  }
  llama_model_free(model);
  return 0;
}
