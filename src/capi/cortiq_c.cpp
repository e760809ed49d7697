// The C API (include/cortiq/cortiq.h) over the C++ engine. Every entry
// point catches everything: no exception and no C++ type crosses the
// boundary, and a failure becomes a status plus this thread's message.
#include "cortiq/cortiq.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "base/version.hpp"
#include "chat/chat_template.hpp"
#include "cortiq/cortiq.hpp"
#include "model/hparams.hpp"
#include "runtime/device_route.hpp"
#include "scoring/chunks.hpp"
#include "scoring/embedding.hpp"
#include "scoring/perplexity.hpp"
#include "tokenizer/tokenizer.hpp"

// Handles carry a tag of their kind, cleared when freed: a handle of the
// wrong kind, or one freed while its memory is still mapped, is refused
// instead of used.
struct cortiq_model {
  static constexpr uint64_t kTag = 0x4c45444f4d515443;  // "CTQMODEL"
  uint64_t tag = kTag;
  std::shared_ptr<const cortiq::Model> model;
  std::string architecture;
  std::string device;  // cortiq_model_device
};

struct cortiq_session {
  static constexpr uint64_t kTag = 0x5353455351515443;  // "CTQQSESS"
  uint64_t tag = kTag;
  std::shared_ptr<const cortiq::Model> model;
  std::unique_ptr<cortiq::Session> session;
};

struct cortiq_result {
  static constexpr uint64_t kTag = 0x544c555345515443;  // "CTQRESLT"
  uint64_t tag = kTag;
  cortiq::GenerateResult result;
  std::vector<cortiq_token> tokens;
};

namespace {

using namespace cortiq;

thread_local std::string t_last_error;

// A caller's mistake (null pointer, bad handle, invalid value).
class InvalidArgument : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller's buffer is too small (the needed length was written).
class BufferTooSmall : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class F>
cortiq_status guarded(F&& body) noexcept {
  t_last_error.clear();
  try {
    body();
    return CORTIQ_OK;
  } catch (const InvalidArgument& e) {
    t_last_error = e.what();
    return CORTIQ_ERROR_INVALID_ARGUMENT;
  } catch (const BufferTooSmall& e) {
    t_last_error = e.what();
    return CORTIQ_ERROR_BUFFER_TOO_SMALL;
  } catch (const cortiq::Cancelled& e) {
    t_last_error = e.what();
    return CORTIQ_ERROR_CANCELLED;
  } catch (const std::bad_alloc&) {
    t_last_error = "out of memory";
    return CORTIQ_ERROR_OUT_OF_MEMORY;
  } catch (const Error& e) {
    t_last_error = e.what();
    return CORTIQ_ERROR_ENGINE;
  } catch (const std::exception& e) {
    t_last_error = std::string("internal error: ") + e.what();
    return CORTIQ_ERROR_INTERNAL;
  } catch (...) {
    t_last_error = "internal error: an unknown exception";
    return CORTIQ_ERROR_INTERNAL;
  }
}

// Calls that leave no history behind: forgotten however they end (a
// failure, a cancel).
struct ForgetHistoryAtExit {
  Session& session;
  ~ForgetHistoryAtExit() { session.reset(); }
};

// The C API's finish reasons and the engine's, one for one.
constexpr std::pair<FinishReason, cortiq_finish_reason> kFinishReasons[] = {
    {FinishReason::stop, CORTIQ_FINISH_STOP},
    {FinishReason::max_tokens, CORTIQ_FINISH_MAX_TOKENS},
    {FinishReason::length, CORTIQ_FINISH_LENGTH},
    {FinishReason::cancelled, CORTIQ_FINISH_CANCELLED},
    {FinishReason::loop, CORTIQ_FINISH_LOOP},
};

void require(bool ok, const char* what) {
  if (!ok) throw InvalidArgument(what);
}

template <class Handle>
bool valid(const Handle* h) {
  return h != nullptr && h->tag == Handle::kTag;
}

const cortiq_model& model_of(const cortiq_model* m) {
  require(valid(m), "not a model handle (null, freed, or another kind)");
  return *m;
}

cortiq_session& session_of(cortiq_session* s) {
  require(valid(s), "not a session handle (null, freed, or another kind)");
  return *s;
}

// The defaults into a caller's struct of `size` bytes (an older, shorter
// layout, or this one): only the fields it has are written.
template <class Options>
void init_options(Options* out, size_t size, Options defaults) {
  if (out == nullptr || size < sizeof(size_t)) return;
  defaults.struct_size = std::min(size, sizeof(Options));
  std::memcpy(out, &defaults, defaults.struct_size);
}

// Options of an older (shorter) or this layout: the caller's bytes over the
// defaults; the fields it lacks keep their defaults.
template <class Options>
Options read_options(const Options* given, void (*init)(Options*, size_t), const char* name) {
  Options options;
  init(&options, sizeof(Options));
  if (given == nullptr) return options;
  const size_t size = given->struct_size;
  if (size < sizeof(size_t) || size > (size_t{1} << 16)) {
    throw InvalidArgument(std::string(name) + ".struct_size is " + std::to_string(size) +
                          "; set it with the _init function");
  }
  std::memcpy(&options, given, std::min(size, sizeof(Options)));
  options.struct_size = sizeof(Options);
  return options;
}

std::span<const TokenId> ids_in(const Model& model, const cortiq_token* ids, size_t n,
                                bool allow_empty = false) {
  require(ids != nullptr || n == 0, "ids is null");
  require(allow_empty || n > 0, "no ids given");
  const int64_t n_vocab = model.n_vocab();
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= n_vocab) {
      throw InvalidArgument("id " + std::to_string(ids[i]) + " at " + std::to_string(i) +
                            " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
    }
  }
  return {ids, n};
}

// Refuses a caller's buffer of `capacity` items shorter than `needed`; the
// message asks for `wanted` (needed, or one more for a NUL).
void require_capacity(size_t capacity, size_t needed, size_t wanted, const char* unit = "items") {
  if (capacity < needed) {
    throw BufferTooSmall("the buffer holds " + std::to_string(capacity) + " " + unit + "; " +
                         std::to_string(wanted) + " are needed");
  }
}

// Copies `count` items to a caller's buffer of `capacity`; always sets
// *needed.
template <class T>
void copy_out(std::span<const T> items, T* out, size_t capacity, size_t* needed, bool nul = false) {
  require(needed != nullptr, "the length pointer is null");
  *needed = items.size();
  const size_t room = items.size() + (nul ? 1 : 0);
  require_capacity(capacity, items.size(), room);
  require(out != nullptr || capacity == 0, "the buffer is null");
  std::copy(items.begin(), items.end(), out);
  if (nul && capacity >= room) out[items.size()] = T{};
}

SamplingParams sampling_from(const cortiq_sampling_options& o, int64_t n_vocab) {
  SamplingParams p;
  p.temperature = o.temperature;
  p.top_k = o.top_k;
  p.top_p = o.top_p;
  p.min_p = o.min_p;
  p.typical_p = o.typical_p;
  p.repeat_penalty = o.repeat_penalty;
  p.penalty_last_n = o.repeat_last_n;
  p.presence_penalty = o.presence_penalty;
  p.frequency_penalty = o.frequency_penalty;
  p.seed = o.seed;
  require(o.logit_bias != nullptr || o.n_logit_bias == 0, "sampling.logit_bias is null");
  for (size_t i = 0; i < o.n_logit_bias; ++i) {
    p.logit_bias.emplace_back(o.logit_bias[i].token, o.logit_bias[i].bias);
  }
  require(o.suppressed != nullptr || o.n_suppressed == 0, "sampling.suppressed is null");
  p.suppressed.assign(o.suppressed, o.suppressed + o.n_suppressed);
  try {
    p.validate(n_vocab);
  } catch (const Error& e) {
    throw InvalidArgument(std::string("sampling: ") + e.what());
  }
  return p;
}

GenerateOptions generate_options_from(const cortiq_generate_options* given, int64_t n_vocab) {
  const cortiq_generate_options o =
      read_options(given, cortiq_generate_options_init, "cortiq_generate_options");
  GenerateOptions g;
  const cortiq_sampling_options sampling =
      read_options(o.sampling, cortiq_sampling_options_init, "cortiq_sampling_options");
  g.sampling = sampling_from(sampling, n_vocab);
  g.max_tokens = o.max_tokens;
  g.ignore_eos = o.ignore_eos != 0;
  require(o.stop != nullptr || o.n_stop == 0, "stop is null");
  for (size_t i = 0; i < o.n_stop; ++i) {
    require(o.stop[i] != nullptr, "a stop string is null");
    require(o.stop[i][0] != '\0', "a stop string is empty");
    g.stop.emplace_back(o.stop[i]);
  }
  g.loop_stop = o.loop_stop != 0;
  g.confidence = o.confidence != 0;
  g.add_special = o.add_special != 0;
  g.parse_special = o.parse_special != 0;
  return g;
}

TokenCallback token_callback(const cortiq_generate_options* given) {
  if (given == nullptr ||
      given->struct_size < offsetof(cortiq_generate_options, user_data) + sizeof(void*) ||
      given->on_token == nullptr) {
    return {};
  }
  const cortiq_token_callback callback = given->on_token;
  void* user_data = given->user_data;
  return [callback, user_data](std::string_view piece, TokenId id) {
    return callback(piece.data(), piece.size(), id, user_data) == 0;
  };
}

cortiq_status run_generation(cortiq_session* handle, const cortiq_generate_options* options,
                             cortiq_result** out,
                             const std::function<GenerateResult(Session&, const GenerateOptions&,
                                                                const TokenCallback&)>& run) {
  return guarded([&] {
    cortiq_session& s = session_of(handle);
    require(out != nullptr, "result is null");
    const GenerateOptions g = generate_options_from(options, s.model->n_vocab());
    auto result = std::make_unique<cortiq_result>();
    result->result = run(*s.session, g, token_callback(options));
    result->tokens.assign(result->result.tokens.begin(), result->result.tokens.end());
    *out = result.release();
  });
}

const cortiq_result* result_of(const cortiq_result* r) {
  return valid(r) ? r : nullptr;
}

}  // namespace

extern "C" {

const char* cortiq_version(void) {
  static const std::string version = std::string(kVersion) + " (commit " + kGitCommit + ")";
  return version.c_str();
}

int cortiq_api_version(void) {
  return CORTIQ_API_VERSION;
}

const char* cortiq_last_error(void) {
  return t_last_error.c_str();
}

const char* cortiq_status_name(cortiq_status status) {
  switch (status) {
    case CORTIQ_OK:
      return "ok";
    case CORTIQ_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case CORTIQ_ERROR_BUFFER_TOO_SMALL:
      return "buffer too small";
    case CORTIQ_ERROR_ENGINE:
      return "engine error";
    case CORTIQ_ERROR_CANCELLED:
      return "cancelled";
    case CORTIQ_ERROR_OUT_OF_MEMORY:
      return "out of memory";
    case CORTIQ_ERROR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

void cortiq_load_options_init(cortiq_load_options* options, size_t struct_size) {
  cortiq_load_options d{};
  d.kv_type = CORTIQ_KV_F16;
  d.chunk_size = kDefaultChunkSize;
  d.gpu_layers = -1;
  init_options(options, struct_size, d);
}

cortiq_status cortiq_model_load(const char* path, const cortiq_load_options* options,
                                cortiq_model** model) {
  return guarded([&] {
    require(path != nullptr, "path is null");
    require(model != nullptr, "model is null");
    const cortiq_load_options o =
        read_options(options, cortiq_load_options_init, "cortiq_load_options");
    require(o.threads >= 0 && o.threads <= 1024, "threads must be in [0, 1024]");
    require(o.context >= 0, "context must be >= 0");
    require(o.chunk_size >= 1 && o.chunk_size <= (1 << 16), "chunk_size must be in [1, 65536]");
    require(o.kv_type == CORTIQ_KV_F16 || o.kv_type == CORTIQ_KV_F32,
            "kv_type must be CORTIQ_KV_F16 or CORTIQ_KV_F32");
    require(o.gpu_layers >= -1, "gpu_layers must be -1 (all) or a layer count");
    const std::string_view device = o.device != nullptr ? o.device : "cpu";
    require(device == "cpu" || device == "vulkan" || device == "auto",
            "device must be \"cpu\", \"vulkan\" or \"auto\"");
    LoadOptions load;
    load.threads = o.threads;
    load.context = o.context;
    load.kv_type = o.kv_type == CORTIQ_KV_F32 ? KvType::f32 : KvType::f16;
    load.chunk_size = o.chunk_size;
    load.device = device;
    load.gpu_layers = o.gpu_layers;
    if (o.progress != nullptr) {
      load.progress = [progress = o.progress, user_data = o.user_data](double fraction) {
        progress(fraction, user_data);
      };
    }
    auto handle = std::make_unique<cortiq_model>();
    handle->model = Model::load(path, load);
    handle->architecture = handle->model->hparams().arch;
    const DeviceRoute* route = handle->model->device_route();
    handle->device = route != nullptr ? route->description() : "cpu";
    *model = handle.release();
  });
}

void cortiq_model_free(cortiq_model* model) {
  if (!valid(model)) return;
  model->tag = 0;
  delete model;
}

int64_t cortiq_model_n_vocab(const cortiq_model* model) {
  return valid(model) ? model->model->n_vocab() : -1;
}

int64_t cortiq_model_context(const cortiq_model* model) {
  return valid(model) ? model->model->context_length() : -1;
}

int64_t cortiq_model_n_embd(const cortiq_model* model) {
  return valid(model) ? model->model->hparams().n_embd : -1;
}

const char* cortiq_model_architecture(const cortiq_model* model) {
  return valid(model) ? model->architecture.c_str() : "";
}

const char* cortiq_model_device(const cortiq_model* model) {
  return valid(model) ? model->device.c_str() : "";
}

cortiq_token cortiq_model_bos(const cortiq_model* model) {
  return valid(model) ? model->model->tokenizer().vocab().bos : -1;
}

cortiq_token cortiq_model_eos(const cortiq_model* model) {
  return valid(model) ? model->model->tokenizer().vocab().eos : -1;
}

cortiq_status cortiq_tokenize(const cortiq_model* model, const char* text, size_t text_length,
                              int add_special, int parse_special, cortiq_token* ids,
                              size_t capacity, size_t* n_ids) {
  return guarded([&] {
    const cortiq_model& m = model_of(model);
    require(text != nullptr || text_length == 0, "text is null");
    const std::vector<TokenId> tokens = m.model->tokenizer().encode(
        std::string_view(text == nullptr ? "" : text, text_length),
        TokenizeOptions{.add_special = add_special != 0, .parse_special = parse_special != 0});
    copy_out(std::span<const TokenId>(tokens), ids, capacity, n_ids);
  });
}

cortiq_status cortiq_detokenize(const cortiq_model* model, const cortiq_token* ids, size_t n_ids,
                                char* text, size_t capacity, size_t* length) {
  return guarded([&] {
    const cortiq_model& m = model_of(model);
    const std::string out =
        m.model->tokenizer().decode(ids_in(*m.model, ids, n_ids, /*allow_empty=*/true));
    copy_out(std::span<const char>(out), text, capacity, length, /*nul=*/true);
  });
}

cortiq_status cortiq_apply_chat_template(const cortiq_model* model,
                                         const cortiq_chat_message* messages, size_t n_messages,
                                         int add_generation_prompt, char* text, size_t capacity,
                                         size_t* length) {
  return guarded([&] {
    const cortiq_model& m = model_of(model);
    require(messages != nullptr || n_messages == 0, "messages is null");
    JsonWriter json;
    json.begin_array();
    for (size_t i = 0; i < n_messages; ++i) {
      require(messages[i].role != nullptr && messages[i].content != nullptr,
              "a message's role or content is null");
      json.begin_object().key("role").value(messages[i].role);
      json.key("content").value(messages[i].content).end_object();
    }
    json.end_array();
    std::string source = m.model->chat_template();
    if (source.empty()) source = std::string(chatml_template());
    const ChatTemplate tmpl(source);
    const Vocab& vocab = m.model->tokenizer().vocab();
    ChatInputs in;
    in.messages = messages_from_json(json.text());
    in.add_generation_prompt = add_generation_prompt != 0;
    in.bos_token = vocab.bos >= 0 ? std::string(vocab.token_text(vocab.bos)) : "";
    in.eos_token = vocab.eos >= 0 ? std::string(vocab.token_text(vocab.eos)) : "";
    const std::string prompt = tmpl.render(in);
    copy_out(std::span<const char>(prompt), text, capacity, length, /*nul=*/true);
  });
}

cortiq_status cortiq_session_create(cortiq_model* model, cortiq_session** session) {
  return guarded([&] {
    const cortiq_model& m = model_of(model);
    require(session != nullptr, "session is null");
    auto handle = std::make_unique<cortiq_session>();
    handle->model = m.model;
    handle->session = std::make_unique<Session>(m.model);
    *session = handle.release();
  });
}

void cortiq_session_free(cortiq_session* session) {
  if (!valid(session)) return;
  session->tag = 0;
  delete session;
}

cortiq_status cortiq_session_reset(cortiq_session* session) {
  return guarded([&] { session_of(session).session->reset(); });
}

// Async-signal-safe: a tag read and a lock-free atomic store.
void cortiq_cancel(cortiq_session* session) {
  if (valid(session)) session->session->cancel();
}

void cortiq_sampling_options_init(cortiq_sampling_options* options, size_t struct_size) {
  const SamplingParams p;
  cortiq_sampling_options d{};
  d.temperature = p.temperature;
  d.top_k = p.top_k;
  d.top_p = p.top_p;
  d.min_p = p.min_p;
  d.typical_p = p.typical_p;
  d.repeat_penalty = p.repeat_penalty;
  d.repeat_last_n = p.penalty_last_n;
  d.presence_penalty = p.presence_penalty;
  d.frequency_penalty = p.frequency_penalty;
  d.seed = p.seed;
  init_options(options, struct_size, d);
}

void cortiq_generate_options_init(cortiq_generate_options* options, size_t struct_size) {
  const GenerateOptions g;
  cortiq_generate_options d{};
  d.max_tokens = g.max_tokens;
  d.add_special = g.add_special ? 1 : 0;
  d.parse_special = g.parse_special ? 1 : 0;
  init_options(options, struct_size, d);
}

cortiq_status cortiq_generate(cortiq_session* session, const char* prompt,
                              const cortiq_generate_options* options, cortiq_result** result) {
  return run_generation(session, options, result,
                        [prompt](Session& s, const GenerateOptions& g, const TokenCallback& cb) {
                          require(prompt != nullptr, "prompt is null");
                          return s.generate(std::string_view(prompt), g, cb);
                        });
}

cortiq_status cortiq_generate_ids(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                                  const cortiq_generate_options* options, cortiq_result** result) {
  return run_generation(session, options, result,
                        [&](Session& s, const GenerateOptions& g, const TokenCallback& cb) {
                          return s.generate(ids_in(s.model(), ids, n_ids), g, cb);
                        });
}

void cortiq_result_free(cortiq_result* result) {
  if (!valid(result)) return;
  result->tag = 0;
  delete result;
}

const char* cortiq_result_text(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.text.c_str() : "";
}

const cortiq_token* cortiq_result_tokens(const cortiq_result* result, size_t* n_tokens) {
  const cortiq_result* r = result_of(result);
  if (n_tokens != nullptr) *n_tokens = r ? r->tokens.size() : 0;
  return r ? r->tokens.data() : nullptr;
}

cortiq_finish_reason cortiq_result_finish_reason(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  if (r == nullptr) return CORTIQ_FINISH_STOP;
  for (const auto& [engine, c] : kFinishReasons) {
    if (engine == r->result.finish_reason) return c;
  }
  return CORTIQ_FINISH_STOP;
}

const char* cortiq_finish_reason_name(cortiq_finish_reason reason) {
  for (const auto& [engine, c] : kFinishReasons) {
    // The engine's names are literals: NUL-terminated, static storage.
    if (c == reason) return finish_reason_name(engine).data();
  }
  return "unknown";
}

int64_t cortiq_result_prompt_tokens(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.prompt_tokens : 0;
}

int64_t cortiq_result_cached_tokens(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.cached_tokens : 0;
}

int64_t cortiq_result_generated_tokens(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.generated_tokens : 0;
}

double cortiq_result_prefill_tokens_per_second(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.timings.prefill_tokens_per_second() : 0.0;
}

double cortiq_result_decode_tokens_per_second(const cortiq_result* result) {
  const cortiq_result* r = result_of(result);
  return r ? r->result.timings.decode_tokens_per_second() : 0.0;
}

const float* cortiq_result_confidence(const cortiq_result* result, size_t* n) {
  const cortiq_result* r = result_of(result);
  if (n != nullptr) *n = r ? r->result.confidence.size() : 0;
  return r && !r->result.confidence.empty() ? r->result.confidence.data() : nullptr;
}

cortiq_status cortiq_evaluate(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                              float* logits, size_t capacity, size_t* n_floats) {
  return guarded([&] {
    cortiq_session& s = session_of(session);
    require(n_floats != nullptr, "n_floats is null");
    const auto tokens = ids_in(*s.model, ids, n_ids);
    const size_t needed = n_ids * static_cast<size_t>(s.model->n_vocab());
    *n_floats = needed;
    // Checked before the forward: a short buffer leaves the history as it was.
    require_capacity(capacity, needed, needed, "floats");
    require(logits != nullptr, "logits is null");
    const std::vector<float> rows = s.session->evaluate(tokens);
    std::copy(rows.begin(), rows.end(), logits);
  });
}

cortiq_status cortiq_nll(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                         size_t from, double* nll_sum, int64_t* count) {
  return guarded([&] {
    cortiq_session& s = session_of(session);
    require(nll_sum != nullptr && count != nullptr, "nll_sum or count is null");
    const Session::CancelScope one_call(*s.session);
    const Session::NllSum nll = s.session->nll(ids_in(*s.model, ids, n_ids), from);
    *nll_sum = nll.sum;
    *count = nll.count;
  });
}

cortiq_status cortiq_perplexity(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                                int64_t context, int64_t max_chunks, double* perplexity,
                                double* error) {
  return guarded([&] {
    cortiq_session& s = session_of(session);
    require(perplexity != nullptr, "perplexity is null");
    require(context == 0 || context >= 4, "context must be 0 (512) or at least 4");
    require(max_chunks != 0, "max_chunks must be at least 1, or negative for every chunk");
    const auto tokens = ids_in(*s.model, ids, n_ids);
    // The command's default, within what the model and the session hold.
    if (context == 0) context = std::min<int64_t>(512, s.model->context_length());
    if (context > s.model->context_length()) {
      throw InvalidArgument(strfmt(
          "context %lld is longer than the loaded model's (%lld; load "
          "with a larger cortiq_model_options.context)",
          static_cast<long long>(context), static_cast<long long>(s.model->context_length())));
    }
    scoring::ChunkPlan plan;
    try {
      plan = scoring::plan_chunks(*s.model, tokens, context, max_chunks);
    } catch (const Error& e) {
      throw InvalidArgument(e.what());  // the text is too short for the context, ...
    }
    const ForgetHistoryAtExit forget{*s.session};
    // A cancel between two chunks ends the run too.
    const Session::CancelScope one_call(*s.session);
    const scoring::ChunkProgress done = scoring::perplexity(*s.session, tokens, plan);
    *perplexity = done.nll.perplexity();
    if (error != nullptr) *error = done.nll.perplexity_error();
  });
}

cortiq_status cortiq_embed(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                           int32_t pooling, int normalize, float* embedding, size_t capacity,
                           size_t* n_floats) {
  return guarded([&] {
    cortiq_session& s = session_of(session);
    require(n_floats != nullptr, "n_floats is null");
    const auto tokens = ids_in(*s.model, ids, n_ids);
    scoring::Pooling how = scoring::Pooling::mean;
    switch (pooling) {
      case CORTIQ_POOLING_DEFAULT:
        how = scoring::pooling_of_file(s.model->hparams().pooling_type);
        break;
      case CORTIQ_POOLING_MEAN:
        how = scoring::Pooling::mean;
        break;
      case CORTIQ_POOLING_LAST:
        how = scoring::Pooling::last;
        break;
      case CORTIQ_POOLING_CLS:
        how = scoring::Pooling::cls;
        break;
      default:
        throw InvalidArgument("pooling must be one of the cortiq_pooling values");
    }
    const auto n_embd = static_cast<size_t>(s.model->hparams().n_embd);
    *n_floats = n_embd;
    require_capacity(capacity, n_embd, n_embd, "floats");
    require(embedding != nullptr, "embedding is null");
    s.session->reset();
    const ForgetHistoryAtExit forget{*s.session};
    const Session::CancelScope one_call(*s.session);
    const std::vector<float> hidden = s.session->embeddings(tokens);
    const std::vector<float> pooled = scoring::pool_embeddings(hidden, n_embd, how, normalize != 0);
    std::copy(pooled.begin(), pooled.end(), embedding);
  });
}

}  // extern "C"
