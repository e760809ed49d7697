// Cortiq's C++ API: load a model, open a session, generate.
//
//   cortiq::LoadOptions load;
//   load.threads = 4;
//   auto model = cortiq::Model::load("model.gguf", load);
//   cortiq::Session session(model);
//   cortiq::GenerateOptions gen;
//   gen.sampling.temperature = 0;  // greedy
//   gen.max_tokens = 64;
//   auto result = session.generate("Once upon a time", gen,
//       [](std::string_view piece, cortiq::TokenId) { std::fputs(...); return true; });
//
// A Model is immutable once loaded and may be shared by many sessions; a
// Session holds one conversation's KV cache and is used from one thread at a
// time (except cancel(), which any thread may call).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cortiq/loop_stop.hpp"
#include "cortiq/sampling.hpp"
#include "cortiq/types.hpp"

namespace cortiq {

// The engine's internals the API refers to only by pointer or reference.
class DecoderModel;
class DeviceRoute;
class Generation;
class KvCache;
struct BatchRow;
enum class RowOutput;
class ThreadPool;
class Tokenizer;
struct ModelHParams;
struct ForwardBuffers;
struct ForwardContext;
struct KvCacheShape;
namespace gguf {
class GgufFile;
}
namespace grammar {
class CompiledGrammar;
class TokenMask;
}  // namespace grammar

// Default prefill chunk: rows forwarded together while reading a prompt
// (the peer's default batch size).
inline constexpr int64_t kDefaultChunkSize = 512;
// Default context when the model's trained context is larger: a 128K-token
// KV cache would take gigabytes a short chat never uses.
inline constexpr int64_t kDefaultContextCap = 4096;
// The GGUF key `cortiq calibrate --write` stores its fitted temperature in.
inline constexpr std::string_view kCalibrationTemperatureKey = "cortiq.calibration.temperature";

struct LoadOptions {
  int threads = 0;  // 0: one per core
  // Another model's threads (Model::shared_pool) to run on instead of
  // threads of its own: a draft model takes turns with its target, and two
  // pools would spin against each other for the same cores.
  std::shared_ptr<ThreadPool> pool;
  int64_t context = 0;      // KV positions per session; 0: min(trained context, 4096)
  int64_t min_context = 0;  // with context 0: at least this many positions
  KvType kv_type = KvType::f16;
  int64_t chunk_size = kDefaultChunkSize;  // prefill rows per forward pass
  // Called with the fraction of the weights read while loading (0..1).
  std::function<void(double)> progress;
  // Where sessions run their passes: "cpu", "vulkan" (the first Vulkan
  // device; an error without one) or "auto" (a device when there is one).
  // A family the device cannot run declines at load and runs on the CPU,
  // with a warning that says why. The server's batched scheduler runs on
  // the CPU for now.
  std::string device = "cpu";
  // How many of the last layers run on the device, with the output head
  // (the rest on the CPU, the rows handed across each pass): -1 for all,
  // 0 for none (the CPU). What llama.cpp's -ngl counts.
  int64_t gpu_layers = -1;
};

class Model {
 public:
  // Opens the GGUF, reads the tokenizer and binds the weights. Throws
  // cortiq::Error with a message that names the problem (a missing file, an
  // unsupported architecture, not enough memory: how much it needs).
  static std::shared_ptr<const Model> load(const std::filesystem::path& path,
                                           const LoadOptions& options = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const gguf::GgufFile& file() const { return *file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const DecoderModel& decoder() const { return *decoder_; }
  const ModelHParams& hparams() const;
  const LoadOptions& options() const { return options_; }
  int64_t context_length() const { return context_; }
  // cortiq.calibration.temperature from the file (`cortiq calibrate
  // --write`), else 1: generation's per-token confidence is the token's
  // probability at this temperature.
  double calibration_temperature() const { return calibration_temperature_; }
  int64_t n_vocab() const;
  // The chat template stored in the file (tokenizer.chat_template), or "".
  std::string chat_template() const;
  ThreadPool& pool() const { return *pool_; }
  // The device sessions run on, or null for the CPU (LoadOptions::device).
  const DeviceRoute* device_route() const { return device_route_.get(); }
  // A KV cache of `shape` for this model's forward passes, its rows where
  // the passes read them: host memory, or with a device route the device's
  // layers on the device, of kv_type_for(shape).
  std::unique_ptr<KvCache> make_kv_cache(KvCacheShape shape) const;
  // The type make_kv_cache keeps `shape`'s rows in: the shape's, except f32
  // for a device whose f16 rows would be an odd number of halves wide.
  KvType kv_type_for(const KvCacheShape& shape) const;
  // Runs fn with the context of one forward pass on `buffers`: its ops on
  // the device route (after the CPU's layers when -ngl splits it), taking
  // turns with other passes there, or on the CPU.
  void run_pass(ForwardBuffers& buffers, const std::function<void(ForwardContext&)>& fn) const;
  std::shared_ptr<ThreadPool> shared_pool() const { return pool_; }
  // The vocabulary's pieces arranged for grammar masks, built on first use
  // (once, whichever thread asks first).
  const grammar::TokenMask& grammar_mask() const;

 private:
  Model() = default;
  std::unique_ptr<gguf::GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<DecoderModel> decoder_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<DeviceRoute> device_route_;  // after the decoder: it reads its weights
  LoadOptions options_;
  int64_t context_ = 0;
  double calibration_temperature_ = 1.0;
  mutable std::once_flag grammar_mask_once_;
  mutable std::unique_ptr<grammar::TokenMask> grammar_mask_;
};

enum class FinishReason { stop, max_tokens, length, cancelled, loop };
std::string_view finish_reason_name(FinishReason reason);

// Receives a prompt's progress after each forwarded chunk: its positions in
// the cache (reused ones included) out of its length. Returning false
// cancels the generation before its next chunk or its first token; an
// exception from it ends the generation as any failure does (the session
// is cleared).
using PrefillCallback = std::function<bool(int64_t done, int64_t total)>;

// Tokens a drafter sampled, each with the distribution it was drawn from.
struct SampledDraft {
  std::vector<TokenId> tokens;
  std::vector<TokenDistribution> distributions;  // one per token
};

// Proposes the tokens likely to follow a context, for speculative
// decoding (SpeculativeOptions). The model checks every drafted token
// before it is kept, so a drafter changes the speed, never the output (or,
// for sampled drafts, never the distribution of the output).
class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to max_tokens ids to follow `context` (the prompt and the tokens
  // generated so far, the last one included); fewer or none without a guess.
  virtual std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) = 0;
  // Whether draft_sampled() is available.
  virtual bool samples() const { return false; }
  // Up to max_tokens ids sampled with `params` (a seed the drafter derives
  // from params.seed and the context, so seeded runs repeat), each with the
  // distribution it was drawn from: the target keeps the i-th with
  // probability min(1, p/q) (speculative sampling).
  virtual SampledDraft draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                                     const SamplingParams& params);
  // A drafter of the same kind for another sequence running beside this
  // one (the server's slots): what it can share (a draft model's weights)
  // is shared, what follows one sequence (a draft model's cache) is not.
  virtual std::shared_ptr<Drafter> for_another_sequence() const;
  // Whether the drafter reads the target's hidden states (observe()).
  virtual bool observes_hidden() const { return false; }
  // Every row the target forwards while the drafter is in use: the ids at
  // positions [first_pos, first_pos + ids.size()) of the context and their
  // final-normed hidden states ([ids][n_embd]). A first_pos below what it
  // saw before means the context was cut back there.
  virtual void observe(std::span<const TokenId> ids, int64_t first_pos,
                       std::span<const float> hidden);
};

// Prompt lookup: the tokens that followed the latest earlier occurrence of
// the context's last n tokens, for the longest n from ngram_max down to
// ngram_min that occurs (no second model; pays where the output copies the
// prompt or itself: code edits, quotes, summaries, repetitive text).
class PromptLookupDrafter final : public Drafter {
 public:
  // Throws cortiq::Error unless 1 <= ngram_min <= ngram_max <= 64.
  explicit PromptLookupDrafter(int64_t ngram_min = 1, int64_t ngram_max = 4);
  std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) override;
  std::shared_ptr<Drafter> for_another_sequence() const override;

 private:
  int64_t ngram_min_, ngram_max_;
};

class Session;

// A draft model: a smaller model of the same vocabulary (a smaller size of
// the family, or the target quantized harder) drafts in a session of its
// own, whose cache follows the context (what it already holds is reused, a
// diverging tail is cut back): greedily, or sampling with the target's
// sampler settings for speculative sampling.
class DraftModelDrafter final : public Drafter {
 public:
  // Throws cortiq::Error when the draft's vocabulary is not the target's
  // (its size or any token's text).
  DraftModelDrafter(std::shared_ptr<const Model> draft, const Model& target);
  ~DraftModelDrafter() override;
  std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) override;
  bool samples() const override { return true; }
  SampledDraft draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                             const SamplingParams& params) override;
  std::shared_ptr<Drafter> for_another_sequence() const override;

 private:
  DraftModelDrafter() = default;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Session> session_;
  // Brings the draft session's history to `context` and returns the logits
  // of its last token (empty when it does not fit the draft's context).
  std::vector<float> follow(std::span<const TokenId> context, size_t max_tokens);
};

// Multi-token prediction: the model's own MTP layer (the nextn layer of a
// GLM-4.5 file) drafts from the target's final hidden state and the last
// token, then from its own output, one token per step (llama.cpp's
// draft-mtp). Its layer keeps a cache of its own, filled from every row the
// target forwards (observe()): a session must use it in every generate(),
// from the first; after a history it did not see it drafts nothing until
// the session starts over.
class MtpDrafter final : public Drafter {
 public:
  // Throws cortiq::Error when the model runs no MTP layer.
  explicit MtpDrafter(std::shared_ptr<const Model> model);
  ~MtpDrafter() override;
  std::vector<TokenId> draft(std::span<const TokenId> context, size_t max_tokens) override;
  bool samples() const override { return true; }
  SampledDraft draft_sampled(std::span<const TokenId> context, size_t max_tokens,
                             const SamplingParams& params) override;
  bool observes_hidden() const override { return true; }
  void observe(std::span<const TokenId> ids, int64_t first_pos,
               std::span<const float> hidden) override;
  std::shared_ptr<Drafter> for_another_sequence() const override;
  // Receives the MTP layer's logits at each draft step with the position
  // it predicts from (for diagnostics and the tests against llama.cpp).
  using StepCallback = std::function<void(int64_t position, std::span<const float> logits)>;
  void on_step(StepCallback callback) { on_step_ = std::move(callback); }

 private:
  struct State;
  StepCallback on_step_;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<State> state_;
  // Brings the MTP cache to the context's first n - 1 tokens; false when it
  // has not seen them.
  bool follow(std::span<const TokenId> context);
  // Up to max_tokens drafts, each picked from the MTP logits by `pick`.
  std::vector<TokenId> run(std::span<const TokenId> context, size_t max_tokens,
                           const std::function<TokenId(std::span<const float>)>& pick);
};

// Speculative decoding: each step forwards the sampled token and up to
// draft_max drafted ones in one pass, and keeps the drafts as long as the
// sampler, run on each row in turn exactly as in plain decoding, picks
// them. The tokens, their logits, the cache and (for a seeded sampler) the
// random draws are those of plain decoding, bit for bit; only the number
// of passes changes. Models with recurrent state keep a checkpoint of it
// before each round: a rejection goes back to it, and the kept rows ride
// with the next pass.
//
// With a sampling temperature and a drafter that samples (a draft model),
// drafts are checked by speculative sampling instead (kept with
// probability min(1, p/q), Sampler::sample_speculative): more of them are
// kept, and the tokens are distributed as plain sampling's but are not
// its draws for the same seed (same_draws keeps those).
struct SpeculativeOptions {
  std::shared_ptr<Drafter> drafter;  // null: plain decoding
  bool same_draws = false;           // sampling: draft greedily, keep plain decoding's draws
  // Drafted tokens per pass at most. Each round asks for as many as the
  // last one kept, plus one, or twice the last depth after a round kept
  // whole (starting at draft_max), never past the token budget or the
  // context.
  int64_t draft_max = 16;
  int64_t draft_min = 0;  // fewer drafted than this: a plain step
};

struct SpeculativeStats {
  int64_t passes = 0;    // forward passes that carried drafted tokens
  int64_t drafted = 0;   // drafted tokens forwarded
  int64_t accepted = 0;  // of them, kept
  double acceptance_rate() const {
    return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
  }
  // Drafted tokens kept per pass that carried drafts.
  double mean_accepted_length() const {
    return passes > 0 ? static_cast<double>(accepted) / static_cast<double>(passes) : 0.0;
  }
};

struct GenerateOptions {
  SamplingParams sampling;
  // The penalties' window (SamplingParams::penalty_last_n) holds the
  // generated tokens after the prompt's (llama.cpp's llama-cli); false: the
  // generated tokens only (OpenAI's presence and frequency penalties, what
  // the server applies).
  bool penalize_prompt = true;
  int64_t max_tokens = -1;        // < 0: until the context is full
  bool ignore_eos = false;        // end-of-generation tokens are never sampled
  std::vector<std::string> stop;  // text matching one is never emitted
  bool loop_stop = false;         // end on a repeating tail (finish_reason loop)
  LoopStopParams loop;
  bool confidence = false;     // fill GenerateResult::confidence
  bool add_special = true;     // text prompts: BOS/EOS as the model adds them
  bool parse_special = true;   // text prompts: <|im_start|> etc. become their tokens
  PrefillCallback on_prefill;  // the prompt's progress, chunk by chunk
  SpeculativeOptions speculative;
  // Constrained decoding (compile_grammar): only tokens that keep the
  // output inside the grammar are sampled, and an end-of-generation token
  // only where the grammar may end; the generation stops where nothing may
  // follow. Speculative drafting is off while a grammar is set.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

// A grammar for GenerateOptions::grammar from GBNF text (llama.cpp's
// notation, src/grammar/gbnf_parser.hpp). Throws cortiq::Error naming the
// line and the problem.
std::shared_ptr<const grammar::CompiledGrammar> compile_grammar(std::string_view gbnf);
// A grammar whose sentences are the JSON texts a JSON Schema accepts
// (src/grammar/json_schema.hpp says which keywords). Throws cortiq::Error
// naming where in the schema a keyword cannot be expressed.
std::shared_ptr<const grammar::CompiledGrammar> compile_json_schema(std::string_view schema);

struct Timings {
  int64_t prefill_tokens = 0;  // rows actually forwarded for the prompt
  double prefill_seconds = 0;
  int64_t decode_tokens = 0;
  double decode_seconds = 0;
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerateResult {
  std::string text;             // what was emitted (stop strings cut out)
  std::vector<TokenId> tokens;  // generated ids (an end-of-generation token included)
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens reused from the session's cache
  int64_t generated_tokens = 0;
  FinishReason finish_reason = FinishReason::stop;
  std::vector<float> confidence;  // per generated token: its probability at the
                                  // model's calibration temperature
  Timings timings;
  SpeculativeStats speculative;
};

// Receives each generated token's text (UTF-8-safe, possibly empty while a
// character or a possible stop string is incomplete); returning false
// cancels the generation.
using TokenCallback = std::function<bool(std::string_view piece, TokenId id)>;

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Generates from a text prompt (tokenized as options say) or from ids. The
  // prompt is compared with the session's history (the tokens in its cache):
  // a shared prefix is reused and only the rest is forwarded; a diverging
  // history is cut back to the common prefix. Throws cortiq::Error for an
  // empty prompt, a prompt that does not fit the context, ids outside the
  // vocabulary or invalid sampling values — before any state changes.
  GenerateResult generate(std::string_view prompt, const GenerateOptions& options,
                          const TokenCallback& on_token = {});
  GenerateResult generate(std::span<const TokenId> prompt, const GenerateOptions& options,
                          const TokenCallback& on_token = {});

  // Logits of the positions [first_row, ids.size()) of `ids` fed after the
  // current history ([ids.size() - first_row][n_vocab], row-major),
  // forwarded in chunks of chunk_size (0: the model's). The lm_head runs only
  // for those rows. The ids join the history.
  std::vector<float> evaluate(std::span<const TokenId> ids, int64_t chunk_size = 0,
                              size_t first_row = 0);

  // Teacher-forced scoring: the ids are fed after the current history and
  // ids[i], for every i >= from, is scored given all tokens before it (the
  // history and ids[0, i)): nll.sum is the sum of -log p(ids[i] | ...), in
  // double precision, over nll.count tokens. With an empty history ids[0]
  // has no prediction and is not scored. Callers combine windows by adding
  // sums and counts before taking exp(sum / count). The ids join the history.
  struct NllSum {
    double sum = 0.0;
    int64_t count = 0;
  };
  NllSum nll(std::span<const TokenId> ids, size_t from = 0, int64_t chunk_size = 0);

  // The final-normed hidden state of every position of `ids` fed after the
  // current history ([ids.size()][n_embd], the input of the lm_head), for
  // models used as text encoders; pool them with scoring/embedding.hpp.
  // The ids join the history. A bidirectional encoder (BERT: no output
  // layer, so its last layer's states) embeds the ids alone: the history is
  // forgotten first and the ids go through in one pass, whatever the chunk.
  // A cancel() between chunks throws cortiq::Cancelled (the forwarded
  // prefix stays in the history).
  std::vector<float> embeddings(std::span<const TokenId> ids, int64_t chunk_size = 0);

  // Forwards ids after the current history (chunked prefill, logits only
  // for the last row, kept in last_logits()). The ids join the history.
  void append(std::span<const TokenId> ids);
  // The logits after the last forwarded token ([n_vocab]).
  std::span<const float> last_logits() const { return last_logits_; }

  // Asks a running call to stop at its next chunk or step; safe from any
  // thread. generate() returns `cancelled`; evaluate(), nll(), append() and
  // embeddings() throw cortiq::Cancelled. The session stays usable. Each
  // call forgets a cancel() that came before it, unless a CancelScope is
  // open.
  void cancel() { cancel_requested_.store(true, std::memory_order_relaxed); }

  // Makes the calls made while it is open one call for cancel(): the
  // request is forgotten when the outermost scope opens, not at each call,
  // so a cancel() that lands between two calls (the chunks of a perplexity
  // run) ends the next one. Opened and closed on the session's thread.
  class CancelScope {
   public:
    explicit CancelScope(Session& session);
    ~CancelScope();
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

   private:
    Session& session_;
  };

  // Forgets the history (the cache is emptied).
  void reset();
  // Keeps the first n_tokens of the history and forgets the rest, as if
  // only they had been forwarded (a sliding-window model whose cache no
  // longer holds the rows a cut there needs forwards them again).
  // last_logits() is not recomputed. Throws cortiq::Error when the history
  // is shorter than n_tokens.
  void truncate(size_t n_tokens);
  // The tokens whose keys and values are in the cache, in order (the
  // cache records them).
  std::span<const TokenId> history() const;
  int64_t cache_rows() const;
  const Model& model() const { return *model_; }

 private:
  size_t reuse_prefix(std::span<const TokenId> prompt);
  void check_prompt(std::span<const TokenId> prompt) const;
  // check_prompt, and the ids fit in the context after the history.
  void check_extension(std::span<const TokenId> ids) const;
  // Keeps the first `rows` positions of the history (forwarding them again
  // when the cache can no longer cut there).
  void cut_history(int64_t rows);
  // Forwards ids after the history whatever cancel() says (what a cut
  // takes back), the last row's logits into last_logits_.
  void refeed(std::span<const TokenId> ids);
  // Rows per forward pass for a requested chunk size (0: the model's).
  size_t chunk_rows(int64_t requested) const;
  // Forwards ids after the history in chunks; the logits of the rows from
  // first_row on land in *logits (when given), those of the last row in
  // last_logits_ (unless !last_logits: none computed then). Returns false
  // when cancelled between chunks.
  bool prefill(std::span<const TokenId> ids, int64_t chunk_size, size_t first_row,
               std::vector<float>* logits, bool last_logits = true);
  // generate()'s prompt after the reused history: with recurrent state, a
  // snapshot before the last token (KvCache::save_state_snapshot), where a
  // next turn that repeats or extends this prompt resumes. Returns false
  // when cancelled.
  bool prefill_prompt(std::span<const TokenId> ids);
  // evaluate() and append(): checked, chunked, cancellable; throws when
  // cancelled. Returns the logits of rows [first_row, ids.size()) when
  // want_logits, else nothing.
  std::vector<float> extend(std::span<const TokenId> ids, int64_t chunk_size, bool want_logits,
                            size_t first_row = 0);
  // Forwards ids after the history; rows [first_wanted, ids.size()) write
  // their logits, in order, to `logits`.
  void forward_rows(std::span<const TokenId> ids, size_t first_wanted, std::span<float> logits,
                    RowOutput output);
  // What the generation loop (runtime/generation.hpp) asks of the session.
  class Host;
  // generate()'s passes through `generation` after the prompt's prefill.
  void decode_loop(Generation& generation, GenerateResult& result);
  bool cancelled() const { return cancel_requested_.load(std::memory_order_relaxed); }
  // At the start of a public call: forgets an earlier cancel(), unless a
  // CancelScope makes this call part of a larger one.
  void begin_call();

  std::shared_ptr<const Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ForwardBuffers> buffers_;
  std::vector<float> last_logits_;  // n_vocab: logits after the last forwarded token
  // decode_loop's rows of a pass and, with drafts, their logits.
  std::vector<TokenId> pass_ids_;
  std::vector<float> pass_logits_;
  bool refed_ = false;  // refeed() ran (since decode_loop last cleared it)
  std::vector<BatchRow> rows_;
  // generate()'s decode phase: its passes forward generated rows (what a
  // fault injected at "decode" rather than "prefill" fails).
  bool decoding_ = false;
  // While generate() runs with a drafter that reads hidden states (MTP):
  // it, and the hidden states of the rows forwarded.
  Drafter* observer_ = nullptr;
  std::vector<float> observed_hidden_;
  std::atomic<bool> cancel_requested_{false};
  int open_cancel_scopes_ = 0;
  // generate()'s GenerateOptions::on_prefill and prompt length while it
  // forwards the prompt (null otherwise).
  const PrefillCallback* on_prefill_ = nullptr;
  int64_t prefill_total_ = 0;
};

}  // namespace cortiq
