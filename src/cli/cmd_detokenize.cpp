// `cortiq detokenize -m FILE [--special] IDS...`: the text of token ids under
// a model's tokenizer.
#include <cstdio>

#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "formats/gguf/gguf_file.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::cli {

namespace {

ArgParser detokenize_parser() {
  ArgParser parser("detokenize", "-m FILE [--special] IDS...",
                   "Turns token ids back into text with the tokenizer stored in a GGUF model\n"
                   "file. IDS may be separate arguments or one list: \"1 2 3\", \"[1, 2, 3]\".");
  parser.option("-m,--model", "FILE", "a .gguf model (or vocabulary-only) file")
      .flag("--special", "show control tokens (<s>, </s>, ...) as their text")
      .positional("IDS", "token ids", /*required=*/true, /*variadic=*/true);
  return parser;
}

// Ids separated by spaces, commas or brackets, so that the output of
// `tokenize --ids` or a Python list both work.
std::vector<TokenId> parse_ids(std::span<const std::string> args) {
  std::vector<TokenId> ids;
  for (const std::string& arg : args) {
    std::string text = arg;
    for (char& c : text) {
      if (c == ',' || c == '[' || c == ']' || c == '\t' || c == '\n') c = ' ';
    }
    for (std::string_view field : split(text, ' ')) {
      if (field.empty()) continue;
      int64_t id = 0;
      if (!parse_int64(field, id) || id < INT32_MIN || id > INT32_MAX) {
        throw UsageError("'" + std::string(field) + "' is not a token id");
      }
      ids.push_back(static_cast<TokenId>(id));
    }
  }
  return ids;
}

}  // namespace

int run_detokenize(std::span<const std::string> args) {
  const ArgParser parser = detokenize_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  if (!parsed->has("model")) throw UsageError("missing -m FILE (the model whose tokenizer to use)");
  const std::vector<TokenId> ids = parse_ids(parsed->positionals());
  const Tokenizer tok = Tokenizer::from_gguf(gguf::GgufFile::open(parsed->get("model")));
  const std::string text = tok.decode(ids, parsed->has("special")) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace cortiq::cli
