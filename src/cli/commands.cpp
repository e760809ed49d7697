#include "cli/commands.hpp"

namespace cortiq::cli {

std::span<const Command> commands() {
  static constexpr Command kCommands[] = {
      {"run", "generate text after a prompt, streamed to stdout", run_run},
      {"chat", "talk with a model interactively, with its chat template", run_chat},
      {"serve", "serve the model over HTTP with OpenAI's API (continuous batching)", run_serve},
      {"logits", "write the logits of every position of a token sequence", run_logits},
      {"perplexity",
       "perplexity of a text, saved log-probabilities, KL divergence (llama-perplexity)",
       run_perplexity},
      {"calibrate", "confidence calibration: reliability table, ECE, fitted temperature",
       run_calibrate},
      {"explain", "show the most likely next tokens after a prompt, with probabilities",
       run_explain},
      {"embed", "a text's embedding: pooled final-normed hidden states", run_embed},
      {"bench", "measure prompt processing and generation speed (llama-bench's pp/tg)", run_bench},
      {"inspect", "show a GGUF file's metadata and tensors", run_inspect},
      {"quantize", "convert a GGUF model to another weight type", run_quantize},
      {"gen-model", "write a deterministic random-weight model for tests", run_gen_model},
      {"convert", "import a llama2.c checkpoint into a GGUF model", run_convert},
      {"tokenize", "turn text into a model's token ids", run_tokenize},
      {"detokenize", "turn token ids back into text", run_detokenize},
      {"template", "render a conversation with the model's chat template", run_template},
  };
  return kCommands;
}

}  // namespace cortiq::cli
