// What the scheduler runs for a request: one GenerationJob per completion
// choice (a request with n = 3 is three jobs sharing a stream), or one
// EmbeddingJob per input text. Everything in a job has been validated by the
// API layer; the scheduler only runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/sampler.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq::grammar {
class CompiledGrammar;
}

namespace cortiq::server {

struct GenerationJob {
  int32_t choice = 0;  // the index the answer reports
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 0;  // >= 1, already capped so prompt + max_tokens fits the context
  bool ignore_eos = false;
  std::vector<std::string> stop;
  int32_t top_logprobs = -1;  // < 0: no log-probabilities; else the alternatives per token
  // Constrained decoding (response_format, "grammar"): null for none.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

struct EmbeddingJob {
  int32_t index = 0;
  std::vector<TokenId> tokens;
};

}  // namespace cortiq::server
