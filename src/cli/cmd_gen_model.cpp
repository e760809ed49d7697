// `cortiq gen-model --arch A [geometry] [--type T] [--seed S] -o OUT.gguf`:
// a deterministic random-weight model with a real architecture's layout.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "base/strings.hpp"
#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "model/family.hpp"
#include "model/gen_model/random_model.hpp"

namespace cortiq::cli {

namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;

std::string arch_names() {
  std::string names;
  for (const Family* family : families()) {
    if (!names.empty()) names += '|';
    names += family->arch;
  }
  return names;
}

ArgParser gen_model_parser() {
  const ModelGeometry d;
  ArgParser parser("gen-model", "--arch A [options] -o OUT.gguf",
                   "Writes a model with the exact tensor names, shapes and metadata of a real\n"
                   "architecture, filled with seeded random weights: matrices normal(0,\n"
                   "1/sqrt(fan_in)), norm weights 1 + normal(0, 0.02), biases normal(0, 0.02).\n"
                   "The same options give a byte-identical file.");
  parser.option("--arch", "A", "architecture: " + arch_names())
      .option("-o,--output", "OUT", "the .gguf file to write")
      .option("--type", "T", "type of the weight matrices (1-D tensors stay F32)", "F32")
      .option("--seed", "S", "random seed", "1")
      .option("--vocab", "N", "vocabulary size (default: the tokenizer's)")
      .option("--chat-template", "FILE", "store this Jinja file as tokenizer.chat_template")
      .option("--vocab-from", "FILE",
              "copy the tokenizer.* keys of this GGUF (default: built-in SPM vocab)")
      .option("--embd", "N", "embedding length", std::to_string(d.n_embd))
      .option("--layers", "N", "number of blocks", std::to_string(d.n_layer))
      .option("--heads", "N", "attention heads", std::to_string(d.n_head))
      .option("--kv-heads", "N", "key/value heads", std::to_string(d.n_head_kv))
      .option("--head-dim", "N", "dimension per head (default: embd / heads)")
      .option("--ff", "N", "feed-forward length", std::to_string(d.n_ff))
      .option("--ctx", "N", "context length", std::to_string(d.n_ctx))
      .option("--rope-base", "F", "RoPE frequency base", "10000")
      .option("--rms-eps", "F", "RMS norm epsilon", "1e-5")
      .option("--sliding-window", "N",
              "sliding-window families' window (default: 16, so short sequences cross it)")
      .option("--experts", "N",
              "mixture-of-experts families' experts (default: 4; llama: Mixtral-style "
              "layers only when given)")
      .option("--experts-used", "K", "experts per token (default: 2)")
      .option("--ssm-state", "N", "Gated DeltaNet families' head size (default: 16)")
      .option("--ssm-heads", "N", "Gated DeltaNet families' value heads (default: embd / 64)")
      .option("--ssm-groups", "N",
              "Gated DeltaNet families' key heads, dividing the value heads (default: half)")
      .flag("--tied", "no output.weight: the token embedding doubles as the output matrix")
      .flag("--untied", "write a separate output.weight (default)")
      .flag("--all-tensors",
            "write every optional tensor the architecture can read (biases, norms,\n"
            "per-tensor scales...), not only those of its converted checkpoints")
      .option("--name", "TEXT", "general.name (default: cortiq-random-ARCH)");
  return parser;
}

ModelGeometry geometry_from(const ParsedArgs& args) {
  ModelGeometry g;
  if (args.has("vocab")) g.n_vocab = args.get_int("vocab", 1, kMaxDim * 4);
  g.n_embd = args.get_int("embd", 1, kMaxDim);
  g.n_layer = args.get_int("layers", 1, 4096);
  g.n_head = args.get_int("heads", 1, 4096);
  g.n_head_kv = args.get_int("kv-heads", 1, 4096);
  if (args.has("head-dim")) g.head_dim = args.get_int("head-dim", 2, 65536);
  g.n_ff = args.get_int("ff", 1, kMaxDim);
  g.n_ctx = args.get_int("ctx", 1, kMaxDim * 16);
  g.rope_base = args.get_double("rope-base");
  g.rms_eps = args.get_double("rms-eps");
  if (args.has("sliding-window"))
    g.sliding_window = args.get_int("sliding-window", 1, kMaxDim * 16);
  if (args.has("experts")) g.n_expert = args.get_int("experts", 1, 1024);
  if (args.has("experts-used")) g.n_expert_used = args.get_int("experts-used", 1, 1024);
  if (args.has("ssm-state")) g.ssm_state = args.get_int("ssm-state", 1, 4096);
  if (args.has("ssm-heads")) g.ssm_heads = args.get_int("ssm-heads", 1, 4096);
  if (args.has("ssm-groups")) g.ssm_groups = args.get_int("ssm-groups", 1, 4096);
  if (args.has("tied") && args.has("untied"))
    throw UsageError("--tied and --untied exclude each other");
  g.tied = args.has("tied");
  return g;
}

RandomModelOptions options_from(const ParsedArgs& args) {
  RandomModelOptions options;
  if (!args.has("arch")) throw UsageError("missing --arch (" + arch_names() + ")");
  options.family = find_family(args.get("arch"));
  if (options.family == nullptr) {
    throw UsageError("unknown architecture '" + args.get("arch") + "' (" + arch_names() + ")");
  }
  const std::string type_name = args.get("type");
  const std::optional<GgmlType> type = ggml_type_from_name(type_name);
  if (!type || !can_quantize(*type)) {
    throw UsageError("--type " + type_name + " is not a type we can write");
  }
  options.weight_type = *type;
  const int64_t seed = args.get_int("seed", 0, INT64_MAX);
  options.seed = static_cast<uint64_t>(seed);
  options.vocab_from = args.get("vocab-from");
  if (args.has("chat-template")) {
    std::ifstream in(args.get("chat-template"), std::ios::binary);
    if (!in) throw Error("cannot read " + args.get("chat-template"));
    std::ostringstream text;
    text << in.rdbuf();
    options.chat_template = text.str();
  }
  options.name = args.get("name");
  if (args.has("all-tensors")) options.optional = OptionalTensors::all;
  options.geometry = geometry_from(args);
  return options;
}

}  // namespace

int run_gen_model(std::span<const std::string> args) {
  const ArgParser parser = gen_model_parser();
  const std::optional<ParsedArgs> parsed = parser.parse(args);
  if (!parsed) return 0;
  if (!parsed->has("output")) throw UsageError("missing -o OUT.gguf");
  const RandomModelOptions options = options_from(*parsed);
  const std::string output = parsed->get("output");
  const RandomModelSummary s = write_random_model(options, output);
  std::fprintf(stderr, "wrote %s: %s, %zu tensors, %s parameters, vocab %lld, %s\n", output.c_str(),
               std::string(options.family->arch).c_str(), s.n_tensors,
               with_commas(s.n_parameters).c_str(), static_cast<long long>(s.n_vocab),
               human_bytes(s.file_bytes).c_str());
  return 0;
}

}  // namespace cortiq::cli
