// The options and input of the commands that score a text in chunks
// (`perplexity`, `calibrate`), and the prompt options of the commands that
// read one prompt (`explain`, `embed`).
#pragma once

#include <vector>

#include "cli/args.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {
class Model;
}

namespace cortiq::cli {

// -m, -f TEXT, --ids-file, -c CTX (default 512), -b, --chunks, -t, --kv-type.
void add_chunked_text_options(ArgParser& parser);
// The text of -f tokenized as llama-perplexity does (the model's BOS/EOS,
// special tokens as text), or the ids of --ids-file as given.
std::vector<TokenId> chunked_text_tokens(const ParsedArgs& args, const Model& model);
// --chunks, or -1 (all).
int64_t max_chunks_from(const ParsedArgs& args);

// -p TEXT, --ids, --no-bos, --no-special.
void add_prompt_options(ArgParser& parser);
// Throws UsageError unless exactly one of -p and --ids is given.
void require_one_prompt(const ParsedArgs& args);
// --ids as given, or -p tokenized with the model's BOS (unless --no-bos) and
// special tokens matched (unless --no-special), as `run` does. Throws when
// there are no tokens.
std::vector<TokenId> prompt_ids(const ParsedArgs& args, const Model& model);
// How many ids --ids holds (0 without it): the context the model needs.
int64_t given_ids_count(const ParsedArgs& args);

}  // namespace cortiq::cli
