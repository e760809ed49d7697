/* Cortiq's C API: the stable interface bindings (Python, Go, Rust, ...)
 * are built on. libcortiq.so exports only the cortiq_* functions below.
 *
 *   cortiq_model* model = NULL;
 *   if (cortiq_model_load("model.gguf", NULL, &model) != CORTIQ_OK) {
 *     fprintf(stderr, "%s\n", cortiq_last_error());
 *     return 1;
 *   }
 *   cortiq_session* session = NULL;
 *   cortiq_session_create(model, &session);
 *   cortiq_sampling_options sampling;
 *   cortiq_sampling_options_init(&sampling, sizeof sampling);
 *   sampling.temperature = 0;  // greedy
 *   cortiq_generate_options options;
 *   cortiq_generate_options_init(&options, sizeof options);
 *   options.sampling = &sampling;
 *   options.max_tokens = 64;
 *   cortiq_result* result = NULL;
 *   if (cortiq_generate(session, "Once upon a time", &options, &result) == CORTIQ_OK) {
 *     printf("%s\n", cortiq_result_text(result));
 *     cortiq_result_free(result);
 *   }
 *   cortiq_session_free(session);
 *   cortiq_model_free(model);
 *
 * Conventions:
 * - Every function that can fail returns a cortiq_status; on failure
 *   cortiq_last_error() (per thread) says why, in the engine's words.
 * - Nothing aborts the process on bad input: null pointers, a handle of the
 *   wrong kind or already freed (where detectable), invalid option values
 *   and ids outside the vocabulary are CORTIQ_ERROR_INVALID_ARGUMENT.
 * - Options structs carry their own size (struct_size): fill them with the
 *   matching *_init function and sizeof the struct, then change fields.
 *   A newer library writes and reads only the fields an older caller's
 *   struct has, with defaults for the rest.
 * - Functions that write into a caller's buffer take its capacity and
 *   report the length needed; a buffer too small gives
 *   CORTIQ_ERROR_BUFFER_TOO_SMALL with the needed length set, so a caller
 *   may ask with capacity 0 first.
 * - A model may be shared by sessions on many threads; a session is used
 *   from one thread at a time, except cortiq_cancel().
 */
#ifndef CORTIQ_H
#define CORTIQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CORTIQ_API __attribute__((visibility("default")))
#else
#define CORTIQ_API
#endif

/* The version of this interface: raised when functions or fields are
 * added (never removed or changed). 2 added cortiq_load_options's device
 * and gpu_layers, and cortiq_model_device. */
#define CORTIQ_API_VERSION 2

typedef enum cortiq_status {
  CORTIQ_OK = 0,
  CORTIQ_ERROR_INVALID_ARGUMENT = 1, /* a null pointer, a bad handle, an invalid value */
  CORTIQ_ERROR_BUFFER_TOO_SMALL = 2, /* the needed length was written */
  CORTIQ_ERROR_ENGINE = 3,           /* the engine refused: a file, a prompt, a model */
  CORTIQ_ERROR_CANCELLED = 4,        /* cortiq_cancel() stopped a scoring call */
  CORTIQ_ERROR_OUT_OF_MEMORY = 5,
  CORTIQ_ERROR_INTERNAL = 6 /* a defect: please report it with the message */
} cortiq_status;

typedef int32_t cortiq_token;
typedef struct cortiq_model cortiq_model;
typedef struct cortiq_session cortiq_session;
typedef struct cortiq_result cortiq_result;

/* "0.1.0 (commit abc123)"; static storage. */
CORTIQ_API const char* cortiq_version(void);
/* CORTIQ_API_VERSION of the library (which may be newer than the header). */
CORTIQ_API int cortiq_api_version(void);
/* The message of this thread's last failure ("" when none); valid until
 * this thread's next cortiq_* call. */
CORTIQ_API const char* cortiq_last_error(void);
/* A name for a status ("invalid argument", ...); static storage. */
CORTIQ_API const char* cortiq_status_name(cortiq_status status);

/* ---- Models ---------------------------------------------------------- */

typedef enum cortiq_kv_type { CORTIQ_KV_F16 = 0, CORTIQ_KV_F32 = 1 } cortiq_kv_type;

typedef struct cortiq_load_options {
  size_t struct_size;
  int32_t threads;    /* 0: one per core */
  int64_t context;    /* KV positions per session; 0: the model's, at most 4096 */
  int32_t kv_type;    /* a cortiq_kv_type (an int: any value a caller sets is checked) */
  int64_t chunk_size; /* prompt rows per forward pass (default 512) */
  /* Called with the fraction of the weights read (0..1) while loading. */
  void (*progress)(double fraction, void* user_data);
  void* user_data;
  /* Where sessions run their passes: "cpu" (or NULL), "vulkan" (the first
   * Vulkan device; an error without one) or "auto" (a device when there is
   * one). A family the device cannot run declines and runs on the CPU;
   * cortiq_model_device says where a model ended up. */
  const char* device;
  /* With a device: the last gpu_layers layers and the output head on it,
   * the rest on the CPU (-1, the default: all; 0: none). */
  int64_t gpu_layers;
} cortiq_load_options;

/* The defaults into the caller's struct of struct_size bytes (pass sizeof):
 * a library newer than the caller's header writes only the fields the
 * caller has. */
CORTIQ_API void cortiq_load_options_init(cortiq_load_options* options, size_t struct_size);
/* options may be NULL (the defaults). *model is set on success only. */
CORTIQ_API cortiq_status cortiq_model_load(const char* path, const cortiq_load_options* options,
                                           cortiq_model** model);
/* NULL is ignored. Sessions of the model keep it alive until they are freed. */
CORTIQ_API void cortiq_model_free(cortiq_model* model);

CORTIQ_API int64_t cortiq_model_n_vocab(const cortiq_model* model); /* -1 on a bad handle */
CORTIQ_API int64_t cortiq_model_context(const cortiq_model* model); /* -1 on a bad handle */
CORTIQ_API int64_t cortiq_model_n_embd(const cortiq_model* model);  /* -1 on a bad handle */
/* general.architecture ("llama", ...); "" on a bad handle. Lives as long as the model. */
CORTIQ_API const char* cortiq_model_architecture(const cortiq_model* model);
/* Where the model's sessions run: "cpu", or the device ("vulkan 0: ...",
 * with the layers it runs when split); "" on a bad handle. Lives as long
 * as the model. */
CORTIQ_API const char* cortiq_model_device(const cortiq_model* model);
/* Beginning / end of sequence ids, -1 when the vocabulary has none. */
CORTIQ_API cortiq_token cortiq_model_bos(const cortiq_model* model);
CORTIQ_API cortiq_token cortiq_model_eos(const cortiq_model* model);

/* ---- Text ------------------------------------------------------------ */

/* Text to ids: add_special adds BOS/EOS as the model's metadata says,
 * parse_special turns control tokens written in the text (<|im_start|>)
 * into their ids. Writes up to capacity ids, sets *n_ids to the count. */
CORTIQ_API cortiq_status cortiq_tokenize(const cortiq_model* model, const char* text,
                                         size_t text_length, int add_special, int parse_special,
                                         cortiq_token* ids, size_t capacity, size_t* n_ids);
/* Ids to text (bytes as the tokens give them; not NUL-terminated unless
 * there is room: *length excludes the NUL). */
CORTIQ_API cortiq_status cortiq_detokenize(const cortiq_model* model, const cortiq_token* ids,
                                           size_t n_ids, char* text, size_t capacity,
                                           size_t* length);

typedef struct cortiq_chat_message {
  const char* role; /* "system", "user", "assistant", "tool" */
  const char* content;
} cortiq_chat_message;

/* The prompt the model's chat template (ChatML when the file has none)
 * makes of the messages; NUL-terminated when there is room. */
CORTIQ_API cortiq_status cortiq_apply_chat_template(const cortiq_model* model,
                                                    const cortiq_chat_message* messages,
                                                    size_t n_messages, int add_generation_prompt,
                                                    char* text, size_t capacity, size_t* length);

/* ---- Sessions -------------------------------------------------------- */

/* A conversation: its KV cache. A new prompt that extends the history
 * reuses it; one that diverges cuts it back to the common prefix. */
CORTIQ_API cortiq_status cortiq_session_create(cortiq_model* model, cortiq_session** session);
CORTIQ_API void cortiq_session_free(cortiq_session* session);
/* Forgets the history. */
CORTIQ_API cortiq_status cortiq_session_reset(cortiq_session* session);
/* Stops the session's running call at its next prefill chunk or decode
 * step (generation: finish reason CORTIQ_FINISH_CANCELLED; scoring and
 * embeddings: CORTIQ_ERROR_CANCELLED); the session stays usable. Safe from
 * any thread and from a signal handler (async-signal-safe); idempotent; a
 * call that starts afterwards is not affected (a cancel that lands before a
 * call starts is forgotten, so a canceller racing a call's start repeats
 * it until the call returns). */
CORTIQ_API void cortiq_cancel(cortiq_session* session);

/* ---- Generation ------------------------------------------------------ */

typedef struct cortiq_logit_bias {
  cortiq_token token;
  float bias; /* added to the logit; -INFINITY bans the token */
} cortiq_logit_bias;

/* The sampling options of `cortiq run` (same defaults). */
typedef struct cortiq_sampling_options {
  size_t struct_size;
  float temperature;       /* 0: greedy (default 0.8) */
  int32_t top_k;           /* 0: off (default 40) */
  float top_p;             /* (0, 1]; 1: off (default 0.95) */
  float min_p;             /* [0, 1]; 0: off (default 0.05) */
  float typical_p;         /* (0, 1]; 1: off */
  float repeat_penalty;    /* 1: off */
  int32_t repeat_last_n;   /* tokens the penalties look back over; -1: all (default 64) */
  float presence_penalty;  /* default 0 */
  float frequency_penalty; /* default 0 */
  uint64_t seed;
  const cortiq_logit_bias* logit_bias;
  size_t n_logit_bias;
  const cortiq_token* suppressed; /* never sampled */
  size_t n_suppressed;
} cortiq_sampling_options;

/* Receives each generated token's text (UTF-8-safe: a character split
 * over tokens comes whole; possibly empty); returning non-zero stops the
 * generation (finish reason cancelled). */
typedef int (*cortiq_token_callback)(const char* piece, size_t length, cortiq_token token,
                                     void* user_data);

typedef struct cortiq_generate_options {
  size_t struct_size;
  const cortiq_sampling_options* sampling; /* NULL: the defaults */
  int64_t max_tokens;                      /* < 0: until the context is full */
  int ignore_eos;                          /* end-of-generation tokens are never sampled */
  const char* const* stop; /* text matching one ends the generation, never emitted */
  size_t n_stop;
  int loop_stop;     /* end on a repeating tail (finish reason loop) */
  int confidence;    /* fill cortiq_result_confidence */
  int add_special;   /* text prompts: BOS/EOS as the model adds them (default 1) */
  int parse_special; /* text prompts: control tokens in the text (default 1) */
  cortiq_token_callback on_token;
  void* user_data;
} cortiq_generate_options;

/* As cortiq_load_options_init: pass sizeof the struct. */
CORTIQ_API void cortiq_sampling_options_init(cortiq_sampling_options* options, size_t struct_size);
CORTIQ_API void cortiq_generate_options_init(cortiq_generate_options* options, size_t struct_size);

/* Generates from a text prompt or from ids; *result (free it with
 * cortiq_result_free) is set on success only. */
CORTIQ_API cortiq_status cortiq_generate(cortiq_session* session, const char* prompt,
                                         const cortiq_generate_options* options,
                                         cortiq_result** result);
CORTIQ_API cortiq_status cortiq_generate_ids(cortiq_session* session, const cortiq_token* ids,
                                             size_t n_ids, const cortiq_generate_options* options,
                                             cortiq_result** result);

typedef enum cortiq_finish_reason {
  CORTIQ_FINISH_STOP = 0,       /* an end-of-generation token or a stop string */
  CORTIQ_FINISH_MAX_TOKENS = 1, /* max_tokens reached */
  CORTIQ_FINISH_LENGTH = 2,     /* the context is full */
  CORTIQ_FINISH_CANCELLED = 3,  /* cortiq_cancel() or the callback */
  CORTIQ_FINISH_LOOP = 4        /* loop_stop found a repeating tail */
} cortiq_finish_reason;

CORTIQ_API void cortiq_result_free(cortiq_result* result);
/* The generated text, NUL-terminated (stop strings cut out); "" on a bad handle. */
CORTIQ_API const char* cortiq_result_text(const cortiq_result* result);
/* The generated ids (an end-of-generation token included); *n_tokens set. */
CORTIQ_API const cortiq_token* cortiq_result_tokens(const cortiq_result* result, size_t* n_tokens);
CORTIQ_API cortiq_finish_reason cortiq_result_finish_reason(const cortiq_result* result);
/* "stop", "max_tokens", "length", "cancelled", "loop"; static storage. */
CORTIQ_API const char* cortiq_finish_reason_name(cortiq_finish_reason reason);
CORTIQ_API int64_t cortiq_result_prompt_tokens(const cortiq_result* result);
/* Prompt tokens reused from the session's cache. */
CORTIQ_API int64_t cortiq_result_cached_tokens(const cortiq_result* result);
CORTIQ_API int64_t cortiq_result_generated_tokens(const cortiq_result* result);
/* Tokens per second of the prompt and of generation (0 when none). */
CORTIQ_API double cortiq_result_prefill_tokens_per_second(const cortiq_result* result);
CORTIQ_API double cortiq_result_decode_tokens_per_second(const cortiq_result* result);
/* Per generated token, its probability at the model's calibration
 * temperature (with options.confidence; else *n is 0). */
CORTIQ_API const float* cortiq_result_confidence(const cortiq_result* result, size_t* n);

/* ---- Scoring --------------------------------------------------------- */

/* The logits of every position of ids fed after the session's history
 * ([n_ids][n_vocab], row-major, into logits); the ids join the history. */
CORTIQ_API cortiq_status cortiq_evaluate(cortiq_session* session, const cortiq_token* ids,
                                         size_t n_ids, float* logits, size_t capacity,
                                         size_t* n_floats);
/* Teacher forcing: the sum of -log p(ids[i] | before) over i >= from
 * (ids[0] has no prediction on an empty history) and how many were scored;
 * the ids join the history. */
CORTIQ_API cortiq_status cortiq_nll(cortiq_session* session, const cortiq_token* ids, size_t n_ids,
                                    size_t from, double* nll_sum, int64_t* count);
/* Perplexity with llama-perplexity's method (as `cortiq perplexity`):
 * chunks of `context` tokens (0: 512, the command's default, or the loaded
 * context when smaller; else at least 4 and at most the loaded context),
 * each from an empty cache, the second half of each scored; at most
 * max_chunks of them (< 0: every whole chunk; 0 is refused). The ids must
 * fill two chunks. The session's history is forgotten. */
CORTIQ_API cortiq_status cortiq_perplexity(cortiq_session* session, const cortiq_token* ids,
                                           size_t n_ids, int64_t context, int64_t max_chunks,
                                           double* perplexity, double* error);

typedef enum cortiq_pooling {
  CORTIQ_POOLING_DEFAULT = -1, /* what the file's pooling_type says, else mean */
  CORTIQ_POOLING_MEAN = 0,
  CORTIQ_POOLING_LAST = 1,
  CORTIQ_POOLING_CLS = 2 /* the first token */
} cortiq_pooling;

/* The ids' pooled final hidden states (as `cortiq embed`): n_embd floats,
 * scaled to unit length when normalize; pooling is a cortiq_pooling. The
 * session's history is forgotten first. */
CORTIQ_API cortiq_status cortiq_embed(cortiq_session* session, const cortiq_token* ids,
                                      size_t n_ids, int32_t pooling, int normalize,
                                      float* embedding, size_t capacity, size_t* n_floats);

#ifdef __cplusplus
}
#endif

#endif /* CORTIQ_H */
