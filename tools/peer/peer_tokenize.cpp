// Tokenizes each string of a .inp file (separated by
// "\n__ggml_vocab_test__\n", as llama.cpp's test-tokenizer-0 reads them)
// with llama.cpp's tokenizer of a vocabulary-only load, no BOS/EOS and
// specials not parsed (with --special: add_special and parse_special both
// true), and prints one line of ids per string (the .out format of
// llama.cpp's vocabulary tests). Built and run by make-tokenizer-goldens.sh;
// not part of Cortiq's build.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  const bool special = argc == 4 && std::string(argv[3]) == "--special";
  if (argc != 3 && !special) {
    std::fprintf(stderr, "usage: %s VOCAB.gguf INPUT.inp [--special]\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params params = llama_model_default_params();
  params.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], params);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string raw = buffer.str();
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  for (const std::string& text : inputs) {
    std::vector<llama_token> ids(text.size() * 4 + 16);
    const int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                                 static_cast<int32_t>(ids.size()), special, special);
    if (n < 0) return 1;
    for (int i = 0; i < n; ++i) std::printf(" %d", ids[static_cast<size_t>(i)]);
    std::printf("\n");
  }
  llama_model_free(model);
  return 0;
}
