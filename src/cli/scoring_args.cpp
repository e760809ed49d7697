#include "cli/scoring_args.hpp"

#include "base/error.hpp"
#include "cli/generation_args.hpp"
#include "cortiq/cortiq.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

void add_chunked_text_options(ArgParser& parser) {
  parser.option("-m,--model", "FILE", "the .gguf model")
      .option("-f,--file", "TEXT", "the text")
      .option("--ids-file", "IDS", "token ids (space or comma separated) instead of text")
      .option("-c,--ctx", "N", "tokens per chunk", "512")
      .option("-b,--chunk", "N", "rows per forward pass", std::to_string(kDefaultChunkSize))
      .option("--chunks", "N", "use at most N chunks (default: all)")
      .option("-t,--threads", "N", "threads (default: one per core)")
      .option("--kv-type", "T", "KV cache storage: f16 or f32", "f16");
  add_device_options(parser);
}

std::vector<TokenId> chunked_text_tokens(const ParsedArgs& args, const Model& model) {
  if (args.has("ids-file")) {
    return parse_ids(read_text_file(args.get("ids-file")), "--ids-file");
  }
  return model.tokenizer().encode(read_text_file(args.get("file")));
}

int64_t max_chunks_from(const ParsedArgs& args) {
  return args.has("chunks") ? args.get_int("chunks", 1, 1 << 30) : -1;
}

void add_prompt_options(ArgParser& parser) {
  parser.option("-p,--prompt", "TEXT", "the prompt")
      .option("--ids", "\"1 2 3\"", "the prompt as token ids, used as given (no BOS added)")
      .flag("--no-bos", "do not add the BOS token the model adds by default")
      .flag("--no-special", "treat <|...|> special-token text in the prompt as plain text");
}

void require_one_prompt(const ParsedArgs& args) {
  if (args.has("ids") == args.has("prompt")) throw UsageError("give exactly one of -p or --ids");
}

std::vector<TokenId> prompt_ids(const ParsedArgs& args, const Model& model) {
  std::vector<TokenId> ids;
  if (args.has("ids")) {
    ids = parse_ids(args.get("ids"), "--ids");
  } else {
    TokenizeOptions options;
    options.add_special = !args.has("no-bos");
    options.parse_special = !args.has("no-special");
    ids = model.tokenizer().encode(args.get("prompt"), options);
  }
  if (ids.empty()) throw Error("the prompt has no tokens");
  return ids;
}

int64_t given_ids_count(const ParsedArgs& args) {
  return args.has("ids") ? static_cast<int64_t>(parse_ids(args.get("ids"), "--ids").size()) : 0;
}

}  // namespace cortiq::cli
