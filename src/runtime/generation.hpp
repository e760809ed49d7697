// One sequence's generation: the loop every caller drives — Session (and
// through it the C API and Python) one pass at a time, the server's
// scheduler as one of many sequences in each batched pass.
//
//   feed → logits → constrain → sample / verify → stop / finish
//
// The driver forwards the rows next_rows() names after the sequence's cache
// and hands the logits of the wanted ones to take(), which samples (through
// the grammar, if any), checks the drafts forwarded after the last token,
// releases text, decides the finish and plans the next round's drafts. Each
// rule lives here once:
//   - sampling: the penalty window holds the output, after the prompt
//     unless penalize_prompt is false (llama.cpp's llama-cli counts the
//     prompt; OpenAI's presence and frequency penalties, as the server
//     applies them, do not);
//   - drafts: a sampled draft is kept by speculative sampling, a greedy one
//     when it is the token; the first one not kept ends the round, its rows
//     and those after leave the cache (recurrent state: back to the round's
//     checkpoint, the good rows owed to the next pass); the depth follows
//     what the last round kept; no drafts under a grammar;
//   - finishing, checked after each token in this order: an end-of-
//     generation token (unless ignore_eos), a stop string, a repeating tail
//     (loop stop), the caller's cancel, max_tokens, the context; a grammar
//     with nothing left to sample stops before the next token. Every finish
//     leaves the cache holding the prompt and the tokens before the last.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cortiq/cortiq.hpp"
#include "runtime/grammar_constraint.hpp"
#include "runtime/loop_detector.hpp"
#include "runtime/sampler.hpp"
#include "runtime/text_output.hpp"
#include "runtime/token_log_prob.hpp"
#include "tokenizer/vocab.hpp"

namespace cortiq {

class KvCache;

// What a generation follows, whoever asked for it.
struct GenerationRules {
  SamplingParams sampling;      // as generation_sampling() resolves them
  bool penalize_prompt = true;  // the penalty window holds the prompt before the output
  int64_t max_tokens = -1;      // < 0: until the context is full
  bool ignore_eos = false;
  std::vector<std::string> stop;
  std::optional<LoopStopParams> loop_stop;
  bool confidence = false;    // each token's probability at the calibration temperature
  int32_t top_logprobs = -1;  // >= 0: each token's log-probability and that many alternatives
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Speculative decoding: null for none (and none under a grammar). Not
  // owned: it must outlive the generation.
  Drafter* drafter = nullptr;
  int64_t draft_max = 16;
  int64_t draft_min = 0;
  bool same_draws = false;
  int64_t pass_rows = 0;  // rows one pass may append to the sequence (0: any)
};

// What a generation asks of whoever drives it.
class GenerationHost {
 public:
  virtual ~GenerationHost() = default;
  // A token's text, in order: the token `id`, tokens()[index]; or, with id
  // kNoToken and index npos, what the decoder and the stop matcher held
  // back to the end (only when not empty). A token's text may be empty
  // (held back). Returning false cancels the generation (what it returns
  // for the text at the end changes nothing).
  virtual bool release(TokenId id, size_t index, std::string_view text) = 0;
  // The sequence's cache keeps its first `rows` rows (a host whose cache
  // can no longer cut there forwards them again).
  virtual void cut(int64_t rows) = 0;
  // At the finish: rows of the context the cache does not hold yet (a
  // rejected round of a model with recurrent state owed them), for a host
  // whose cache outlives the generation to forward.
  virtual void settle(std::span<const TokenId> owed) = 0;
  // Checked after each token: the caller asked to stop.
  virtual bool cancelled() const { return false; }

  static constexpr size_t npos = static_cast<size_t>(-1);
};

// The rows the next pass forwards for the sequence, after its cache.
struct GenerationRows {
  std::span<const TokenId> owed;    // rows of the context, no logits wanted
  TokenId next = 0;                 // the last token: logits wanted from here on
  std::span<const TokenId> drafts;  // forwarded after it, logits wanted
  size_t wanted() const { return 1 + drafts.size(); }
};

class Generation {
 public:
  // Before the prompt's prefill, or after it: the first take() receives the
  // logits of the prompt's last row, the whole prompt then in the cache
  // (sequence `seq`). Throws cortiq::Error for invalid sampling values, a
  // grammar or loop-stop parameters it cannot use.
  Generation(const Model& model, KvCache& cache, int32_t seq, GenerationRules rules,
             std::span<const TokenId> prompt, GenerationHost& host);

  // The logits of the wanted rows of the last pass ([n_rows][n_vocab]; the
  // first call: the prompt's last row). Samples a token from each row in
  // turn while the drafts are kept, and finishes or readies the next pass.
  // Throws what sampling and drafting throw (every token banned, a
  // grammar's dead end, a drafter's failure).
  void take(std::span<const float> logits, size_t n_rows);
  // The rows the next pass forwards (only while !finished()). With drafts
  // and recurrent state, the state is checkpointed here.
  GenerationRows next_rows();
  // Ends the generation as cancelled between passes (not while next_rows()'
  // rows are out), without releasing what is held back (the server's
  // cancelled requests).
  void cancel();
  // Drafting stops for the rest of the generation (a drafter that failed
  // outside take(): the tokens never rest on a drafter).
  void stop_drafting();

  bool finished() const { return finished_; }
  FinishReason finish_reason() const { return finish_reason_; }
  std::span<const TokenId> tokens() const { return tokens_; }
  std::span<const float> confidence() const { return confidence_; }
  std::span<const ChosenTokenLogProb> log_probs() const { return log_probs_; }
  const SpeculativeStats& speculation() const { return speculation_; }
  // Tokens after which the generation went on (each needed its row).
  int64_t continued() const { return continued_; }
  // Which of the last take()'s rows it read last: the row the last token
  // was sampled from, or the one it finished at.
  size_t last_row() const { return last_row_; }
  // The drafter the generation drafts with (null: none, under a grammar,
  // or since stop_drafting()).
  Drafter* drafter() const { return rules_.drafter; }

 private:
  // The token from row j of the pass (the row after j kept drafts); none
  // when a grammar has nothing left to sample.
  std::optional<TokenId> sample(std::span<const float> row, size_t j);
  // After the token of row j (tokens_.back()): whether it ends the
  // generation, and why.
  std::optional<FinishReason> ends_after(size_t j);
  void release_up_to(size_t end);
  // Ends the generation after `kept` drafts of the pass in flight were kept.
  void finish(FinishReason reason, size_t kept);
  // The round in flight ends after `kept` of its drafts: the rest leave
  // the cache.
  void end_round(size_t kept);
  void plan_drafts();
  bool reached_max() const;

  const Model& model_;
  KvCache& cache_;
  int32_t seq_;
  GenerationRules rules_;
  GenerationHost& host_;
  int64_t prompt_tokens_;
  int64_t context_;
  Sampler sampler_;
  std::optional<GrammarConstraint> constraint_;
  // Text: `output_` gets the tokens the loop detector released (all at
  // once without loop stop); with loop stop `lookahead_` sees each token as
  // it is sampled, so a stop string is found while tokens are held back.
  TextOutput output_;
  std::optional<TextOutput> lookahead_;
  std::optional<LoopDetector> loops_;
  size_t released_ = 0;
  bool keep_going_ = true;
  bool ends_with_eog_ = false;
  size_t loop_keep_ = 0;

  std::vector<TokenId> tokens_;
  std::vector<float> confidence_;
  std::vector<ChosenTokenLogProb> log_probs_;
  // Drafts forwarded after the last token (unchecked until take()), the
  // distribution of each when sampled, the round's checkpoint (recurrent
  // state) and the rows owed to the next pass after a rollback.
  std::vector<TokenId> drafts_;
  std::vector<TokenDistribution> draft_q_;
  std::vector<TokenId> owed_, forwarded_owed_;
  bool in_flight_ = false;  // next_rows() handed out the rows; take() has not seen them
  int64_t round_start_ = 0;
  int64_t draft_depth_ = 0;
  SpeculativeStats speculation_;
  int64_t continued_ = 0;
  size_t last_row_ = 0;
  bool finished_ = false;
  FinishReason finish_reason_ = FinishReason::stop;
};

}  // namespace cortiq
