// Options shared by the commands that run a model (run, chat, logits):
// loading (-m, -t, -c, --kv-type, -b) and sampling (--temp, --top-k, ...).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cortiq/cortiq.hpp"

namespace cortiq::cli {

void add_model_options(ArgParser& parser);
// --device and -ngl (what LoadOptions::device and gpu_layers take), for the
// commands that load with load_model_from.
void add_device_options(ArgParser& parser);
// Loads with a progress bar for large files; logs the load time. Without -c
// the context is the model's default, raised to min_context if that is more.
std::shared_ptr<const Model> load_model_from(const ParsedArgs& args, int64_t min_context = 0);

void add_sampling_options(ArgParser& parser);
// Validated against the model's vocabulary; throws UsageError naming the option.
SamplingParams sampling_from(const ParsedArgs& args, int64_t n_vocab);

// Speculative decoding (--spec lookup|draft|mtp, --draft-model, --draft-max,
// --draft-min, --spec-same-draws, the prompt lookup n-gram sizes); without
// --spec or --draft-model, none. A draft model loads with the target's
// context, KV type and chunk, on its threads.
void add_speculative_options(ArgParser& parser);
SpeculativeOptions speculative_from(const ParsedArgs& args,
                                    const std::shared_ptr<const Model>& target);
// "drafted N, accepted M (P %) in K passes", for the logs.
std::string speculative_text(const SpeculativeStats& stats);

// --grammar FILE: the output follows the GBNF grammar in FILE; or
// --json-schema FILE|JSON: JSON that the schema accepts (null without
// either). An error names the file and the problem (line, or where in the
// schema).
void add_grammar_options(ArgParser& parser);
std::shared_ptr<const grammar::CompiledGrammar> grammar_from(const ParsedArgs& args);

// "1 2 3" or "1,2,3" -> ids; throws UsageError on anything else.
std::vector<TokenId> parse_ids(const std::string& text, const std::string& option);

}  // namespace cortiq::cli
