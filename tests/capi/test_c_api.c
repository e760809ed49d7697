/* The C API (include/cortiq/cortiq.h) from a C program, as its users call
 * it: every function, its error paths with bad arguments, and cancellation
 * from another thread and from a signal handler.
 *
 *   test_c_api MODEL.gguf CASE
 *
 * CASE is one of the names in kCases (ctest runs each as CApi.CASE); the
 * model is a random-weight llama written by `cortiq gen-model`. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cortiq/cortiq.h"

static int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

/* A status that must be `want`, and on failure the engine's message. */
#define CHECK_STATUS(call, want)                                                        \
  do {                                                                                  \
    cortiq_status got_ = (call);                                                        \
    if (got_ != (want)) {                                                               \
      fprintf(stderr, "%s:%d: %s gave %s (%s), want %s\n", __FILE__, __LINE__, #call,   \
              cortiq_status_name(got_), cortiq_last_error(), cortiq_status_name(want)); \
      ++g_failures;                                                                     \
    }                                                                                   \
  } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, CORTIQ_OK)

/* Fails the case unless the last error's message contains `part`. */
#define CHECK_ERROR_SAYS(part)                                                              \
  do {                                                                                      \
    if (strstr(cortiq_last_error(), (part)) == NULL) {                                      \
      fprintf(stderr, "%s:%d: last error \"%s\" does not say \"%s\"\n", __FILE__, __LINE__, \
              cortiq_last_error(), (part));                                                 \
      ++g_failures;                                                                         \
    }                                                                                       \
  } while (0)

static const char* g_model_path;

static cortiq_model* load_model(int64_t chunk_size) {
  cortiq_load_options options;
  cortiq_load_options_init(&options, sizeof options);
  options.threads = 2;
  options.chunk_size = chunk_size;
  cortiq_model* model = NULL;
  if (cortiq_model_load(g_model_path, &options, &model) != CORTIQ_OK) {
    fprintf(stderr, "cannot load %s: %s\n", g_model_path, cortiq_last_error());
    exit(1);
  }
  return model;
}

static cortiq_session* new_session(cortiq_model* model) {
  cortiq_session* session = NULL;
  CHECK_OK(cortiq_session_create(model, &session));
  return session;
}

static size_t tokenize(cortiq_model* model, const char* text, cortiq_token* ids, size_t capacity) {
  size_t n = 0;
  CHECK_OK(cortiq_tokenize(model, text, strlen(text), 1, 1, ids, capacity, &n));
  return n;
}

/* Greedy options for max_tokens tokens that never end early. */
static cortiq_sampling_options g_greedy;
static cortiq_generate_options greedy_options(int64_t max_tokens) {
  cortiq_sampling_options_init(&g_greedy, sizeof g_greedy);
  g_greedy.temperature = 0;
  cortiq_generate_options options;
  cortiq_generate_options_init(&options, sizeof options);
  options.sampling = &g_greedy;
  options.max_tokens = max_tokens;
  options.ignore_eos = 1;
  return options;
}

/* ---- cases ------------------------------------------------------------ */

static void case_version(void) {
  CHECK(strlen(cortiq_version()) > 0);
  CHECK(strstr(cortiq_version(), "commit") != NULL);
  CHECK(cortiq_api_version() == CORTIQ_API_VERSION);
  CHECK(strcmp(cortiq_status_name(CORTIQ_ERROR_BUFFER_TOO_SMALL), "buffer too small") == 0);
  CHECK(strcmp(cortiq_status_name((cortiq_status)99), "unknown status") == 0);
  CHECK(strcmp(cortiq_finish_reason_name(CORTIQ_FINISH_CANCELLED), "cancelled") == 0);
  CHECK(strcmp(cortiq_last_error(), "") == 0);
}

static double g_last_fraction = -1;
static int g_progress_calls = 0;
static int g_progress_backwards = 0;
static void on_progress(double fraction, void* user_data) {
  if (fraction < g_last_fraction) g_progress_backwards = 1;
  g_last_fraction = fraction;
  ++g_progress_calls;
  *(int*)user_data = 1;
}

static void case_load(void) {
  cortiq_model* model = NULL;
  cortiq_load_options options;
  cortiq_load_options_init(&options, sizeof options);
  CHECK(options.struct_size == sizeof options);
  CHECK(options.chunk_size == 512 && options.kv_type == CORTIQ_KV_F16);
  CHECK(options.device == NULL && options.gpu_layers == -1);

  CHECK_STATUS(cortiq_model_load(NULL, &options, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("path is null");
  CHECK_STATUS(cortiq_model_load(g_model_path, &options, NULL), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_model_load("/nonexistent/model.gguf", NULL, &model), CORTIQ_ERROR_ENGINE);
  CHECK_ERROR_SAYS("/nonexistent/model.gguf");
  CHECK(model == NULL);

  cortiq_load_options bad = options;
  bad.struct_size = 3;
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("struct_size");
  bad = options;
  bad.threads = -1;
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("threads");
  bad = options;
  bad.kv_type = 7;
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  bad = options;
  bad.chunk_size = 0;
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  bad = options;
  bad.device = "tpu";
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("\"cpu\", \"vulkan\" or \"auto\"");
  bad = options;
  bad.gpu_layers = -2;
  CHECK_STATUS(cortiq_model_load(g_model_path, &bad, &model), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("gpu_layers");
  CHECK(model == NULL);

  /* An older caller's shorter struct: init writes only its fields, and the
   * library reads only those (the rest keep their defaults). */
  cortiq_load_options old;
  memset(&old, 0, sizeof old); /* chunk_size 0 would be refused if read */
  const size_t old_size = offsetof(cortiq_load_options, kv_type);
  cortiq_load_options_init(&old, old_size);
  CHECK(old.struct_size == old_size && old.chunk_size == 0 && old.kv_type == 0);
  old.threads = 1;
  old.context = 300;
  CHECK_OK(cortiq_model_load(g_model_path, &old, &model));
  CHECK(cortiq_model_context(model) == 300);
  cortiq_model_free(model);
  model = NULL;
  cortiq_load_options_init(NULL, sizeof old); /* ignored */

  int called = 0;
  options.progress = on_progress;
  options.user_data = &called;
  options.threads = 1;
  options.kv_type = CORTIQ_KV_F32;
  CHECK_OK(cortiq_model_load(g_model_path, &options, &model));
  CHECK(model != NULL);
  CHECK(called && g_progress_calls >= 1 && !g_progress_backwards);
  CHECK(g_last_fraction == 1.0);
  cortiq_model_free(model);
  cortiq_model_free(NULL); /* ignored */
}

static void case_model_info(void) {
  cortiq_model* model = load_model(512);
  CHECK(cortiq_model_n_vocab(model) > 100);
  CHECK(cortiq_model_context(model) == 2048);
  CHECK(cortiq_model_n_embd(model) == 64);
  CHECK(strcmp(cortiq_model_architecture(model), "llama") == 0);
  CHECK(strcmp(cortiq_model_device(model), "cpu") == 0);
  CHECK(cortiq_model_bos(model) >= 0 && cortiq_model_bos(model) < cortiq_model_n_vocab(model));
  CHECK(cortiq_model_eos(model) >= 0 && cortiq_model_eos(model) < cortiq_model_n_vocab(model));
  /* Bad handles give the documented values, not a crash. */
  CHECK(cortiq_model_n_vocab(NULL) == -1);
  CHECK(cortiq_model_context(NULL) == -1);
  CHECK(cortiq_model_n_embd(NULL) == -1);
  CHECK(strcmp(cortiq_model_architecture(NULL), "") == 0);
  CHECK(strcmp(cortiq_model_device(NULL), "") == 0);
  CHECK(cortiq_model_bos(NULL) == -1 && cortiq_model_eos(NULL) == -1);
  cortiq_session* session = new_session(model);
  /* A handle of another kind is refused by its tag. */
  CHECK(cortiq_model_n_vocab((const cortiq_model*)session) == -1);
  cortiq_session_free(session);
  cortiq_model_free(model);
}

static void case_text(void) {
  cortiq_model* model = load_model(512);
  const char* text = "Hello world, this is a test.";
  size_t needed = 0;
  /* Capacity 0 first: the count needed. */
  CHECK_STATUS(cortiq_tokenize(model, text, strlen(text), 1, 1, NULL, 0, &needed),
               CORTIQ_ERROR_BUFFER_TOO_SMALL);
  CHECK(needed > 2);
  cortiq_token ids[256];
  size_t n = 0;
  CHECK_OK(cortiq_tokenize(model, text, strlen(text), 1, 1, ids, 256, &n));
  CHECK(n == needed);
  CHECK(ids[0] == cortiq_model_bos(model));
  size_t n_plain = 0;
  cortiq_token plain[256];
  CHECK_OK(cortiq_tokenize(model, text, strlen(text), 0, 1, plain, 256, &n_plain));
  CHECK(n_plain == n - 1 && memcmp(plain, ids + 1, n_plain * sizeof *plain) == 0);

  char out[256];
  size_t length = 0;
  CHECK_STATUS(cortiq_detokenize(model, plain, n_plain, out, 3, &length),
               CORTIQ_ERROR_BUFFER_TOO_SMALL);
  CHECK(length == strlen(text));
  memset(out, 'x', sizeof out);
  CHECK_OK(cortiq_detokenize(model, plain, n_plain, out, sizeof out, &length));
  CHECK(length == strlen(text) && strcmp(out, text) == 0);
  /* Exactly the length fits; there is then no room for the NUL. */
  memset(out, 'x', sizeof out);
  CHECK_OK(cortiq_detokenize(model, plain, n_plain, out, length, &length));
  CHECK(memcmp(out, text, length) == 0 && out[length] == 'x');

  /* Bad arguments. */
  cortiq_token bad_ids[2] = {1, (cortiq_token)cortiq_model_n_vocab(model)};
  CHECK_STATUS(cortiq_detokenize(model, bad_ids, 2, out, sizeof out, &length),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("outside the vocabulary");
  bad_ids[1] = -5;
  CHECK_STATUS(cortiq_detokenize(model, bad_ids, 2, out, sizeof out, &length),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_tokenize(model, NULL, 5, 1, 1, ids, 256, &n), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_tokenize(NULL, text, strlen(text), 1, 1, ids, 256, &n),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("not a model handle");
  CHECK_STATUS(cortiq_tokenize(model, text, strlen(text), 1, 1, ids, 256, NULL),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_OK(cortiq_tokenize(model, "", 0, 0, 1, ids, 256, &n));
  CHECK(n == 0);

  /* The chat template (ChatML for a file without one). */
  cortiq_chat_message messages[2] = {{"system", "Be brief."}, {"user", "Hi there"}};
  CHECK_STATUS(cortiq_apply_chat_template(model, messages, 2, 1, NULL, 0, &needed),
               CORTIQ_ERROR_BUFFER_TOO_SMALL);
  char* prompt = malloc(needed + 1);
  CHECK_OK(cortiq_apply_chat_template(model, messages, 2, 1, prompt, needed + 1, &length));
  CHECK(length == needed && strlen(prompt) == length);
  CHECK(strstr(prompt, "<|im_start|>system\nBe brief.<|im_end|>") != NULL);
  CHECK(strstr(prompt, "<|im_start|>user\nHi there<|im_end|>") != NULL);
  CHECK(strcmp(prompt + length - strlen("<|im_start|>assistant\n"), "<|im_start|>assistant\n") ==
        0);
  free(prompt);
  cortiq_chat_message broken = {"user", NULL};
  CHECK_STATUS(cortiq_apply_chat_template(model, &broken, 1, 1, out, sizeof out, &length),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  cortiq_model_free(model);
}

typedef struct {
  char text[8192];
  size_t length;
  int calls;
  int stop_after; /* > 0: return non-zero on that call */
} Pieces;

static int collect_piece(const char* piece, size_t length, cortiq_token token, void* user_data) {
  Pieces* p = user_data;
  (void)token;
  if (p->length + length < sizeof p->text) {
    memcpy(p->text + p->length, piece, length);
    p->length += length;
    p->text[p->length] = '\0';
  }
  ++p->calls;
  return p->stop_after > 0 && p->calls >= p->stop_after;
}

static void case_generate(void) {
  cortiq_model* model = load_model(512);
  cortiq_session* session = new_session(model);
  const char* prompt = "Once upon a time";
  cortiq_generate_options options = greedy_options(24);
  Pieces pieces = {0};
  options.on_token = collect_piece;
  options.user_data = &pieces;

  cortiq_result* first = NULL;
  CHECK_OK(cortiq_generate(session, prompt, &options, &first));
  CHECK(cortiq_result_finish_reason(first) == CORTIQ_FINISH_MAX_TOKENS);
  CHECK(cortiq_result_generated_tokens(first) == 24);
  size_t n_first = 0;
  const cortiq_token* first_ids = cortiq_result_tokens(first, &n_first);
  CHECK(n_first == 24 && first_ids != NULL);
  /* The streamed pieces are the result's text, one call per token. */
  CHECK(pieces.calls == 24);
  CHECK(strcmp(pieces.text, cortiq_result_text(first)) == 0);
  CHECK(cortiq_result_prompt_tokens(first) > 1);
  CHECK(cortiq_result_cached_tokens(first) == 0);
  CHECK(cortiq_result_decode_tokens_per_second(first) > 0);
  CHECK(cortiq_result_prefill_tokens_per_second(first) > 0);
  size_t n_confidence = 7;
  CHECK(cortiq_result_confidence(first, &n_confidence) == NULL && n_confidence == 0);

  /* The same prompt on the same session: its prefix is reused, the tokens
   * are the same; from ids, as generate tokenizes it, the same again. */
  cortiq_result* again = NULL;
  options.on_token = NULL;
  options.confidence = 1;
  CHECK_OK(cortiq_generate(session, prompt, &options, &again));
  size_t n_again = 0;
  const cortiq_token* again_ids = cortiq_result_tokens(again, &n_again);
  CHECK(n_again == n_first && memcmp(again_ids, first_ids, n_first * sizeof *first_ids) == 0);
  CHECK(cortiq_result_cached_tokens(again) > 0);
  const float* confidence = cortiq_result_confidence(again, &n_confidence);
  CHECK(confidence != NULL && n_confidence == 24);
  for (size_t i = 0; confidence && i < n_confidence; ++i) {
    CHECK(confidence[i] > 0 && confidence[i] <= 1);
  }
  cortiq_token ids[64];
  const size_t n_ids = tokenize(model, prompt, ids, 64);
  cortiq_result* from_ids = NULL;
  CHECK_OK(cortiq_generate_ids(session, ids, n_ids, &options, &from_ids));
  size_t n_from_ids = 0;
  const cortiq_token* from_ids_ids = cortiq_result_tokens(from_ids, &n_from_ids);
  CHECK(n_from_ids == n_first && memcmp(from_ids_ids, first_ids, n_first * sizeof *first_ids) == 0);
  cortiq_result_free(again);
  cortiq_result_free(from_ids);

  /* The callback stops the generation: finish reason cancelled. */
  memset(&pieces, 0, sizeof pieces);
  pieces.stop_after = 5;
  options.on_token = collect_piece;
  cortiq_result* stopped = NULL;
  CHECK_OK(cortiq_generate(session, prompt, &options, &stopped));
  CHECK(cortiq_result_finish_reason(stopped) == CORTIQ_FINISH_CANCELLED);
  CHECK(cortiq_result_generated_tokens(stopped) == 5);
  cortiq_result_free(stopped);
  options.on_token = NULL;

  /* A stop string cuts the text before it and ends the generation. */
  const char* text = cortiq_result_text(first);
  CHECK(strlen(text) > 12); /* 24 tokens of the test model's vocabulary */
  if (strlen(text) > 12) {
    char stop[5];
    memcpy(stop, text + 8, 4);
    stop[4] = '\0';
    const char* stops[1] = {stop};
    options.stop = stops;
    options.n_stop = 1;
    cortiq_result* cut = NULL;
    CHECK_OK(cortiq_generate(session, prompt, &options, &cut));
    CHECK(cortiq_result_finish_reason(cut) == CORTIQ_FINISH_STOP);
    const char* cut_text = cortiq_result_text(cut);
    CHECK(strstr(cut_text, stop) == NULL);
    CHECK(strncmp(cut_text, text, strlen(cut_text)) == 0 && strlen(cut_text) <= 8);
    cortiq_result_free(cut);
    options.stop = NULL;
    options.n_stop = 0;
  }

  /* Sampling: one seed gives one sequence; penalties and biases apply. */
  cortiq_sampling_options sampling;
  cortiq_sampling_options_init(&sampling, sizeof sampling);
  CHECK(sampling.temperature > 0.7f && sampling.top_k == 40);
  sampling.seed = 42;
  options.sampling = &sampling;
  options.confidence = 0;
  cortiq_result* a = NULL;
  cortiq_result* b = NULL;
  CHECK_OK(cortiq_generate(session, prompt, &options, &a));
  CHECK_OK(cortiq_session_reset(session));
  CHECK_OK(cortiq_generate(session, prompt, &options, &b));
  CHECK(strcmp(cortiq_result_text(a), cortiq_result_text(b)) == 0);
  size_t n_a = 0;
  const cortiq_token* a_ids = cortiq_result_tokens(a, &n_a);
  cortiq_logit_bias ban = {a_ids[0], -INFINITY};
  sampling.logit_bias = &ban;
  sampling.n_logit_bias = 1;
  cortiq_result* banned = NULL;
  CHECK_OK(cortiq_generate(session, prompt, &options, &banned));
  size_t n_banned = 0;
  const cortiq_token* banned_ids = cortiq_result_tokens(banned, &n_banned);
  for (size_t i = 0; i < n_banned; ++i) CHECK(banned_ids[i] != ban.token);
  cortiq_result_free(a);
  cortiq_result_free(b);
  cortiq_result_free(banned);

  /* Invalid options are refused before any work. */
  cortiq_result* none = NULL;
  sampling.n_logit_bias = 0;
  sampling.top_p = 0;
  CHECK_STATUS(cortiq_generate(session, prompt, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("top_p");
  sampling.top_p = 1;
  sampling.logit_bias = NULL;
  sampling.n_logit_bias = 2;
  CHECK_STATUS(cortiq_generate(session, prompt, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  sampling.n_logit_bias = 0;
  sampling.struct_size = 0;
  CHECK_STATUS(cortiq_generate(session, prompt, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("struct_size");
  options.sampling = NULL; /* the defaults */
  const char* empty_stop[1] = {""};
  options.stop = empty_stop;
  options.n_stop = 1;
  CHECK_STATUS(cortiq_generate(session, prompt, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  options.stop = NULL;
  options.n_stop = 0;
  CHECK_STATUS(cortiq_generate(session, NULL, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_generate(session, prompt, &options, NULL), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_generate(NULL, prompt, &options, &none), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_generate((cortiq_session*)model, prompt, &options, &none),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("not a session handle");
  cortiq_token outside = (cortiq_token)cortiq_model_n_vocab(model);
  CHECK_STATUS(cortiq_generate_ids(session, &outside, 1, &options, &none),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_generate_ids(session, ids, 0, &options, &none),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK(none == NULL);
  /* A prompt longer than the context is the engine's refusal. */
  cortiq_token* long_prompt = calloc(3000, sizeof *long_prompt);
  for (int i = 0; i < 3000; ++i) long_prompt[i] = 100 + i % 50;
  CHECK_STATUS(cortiq_generate_ids(session, long_prompt, 3000, &options, &none),
               CORTIQ_ERROR_ENGINE);
  free(long_prompt);
  /* After all these refusals the session still gives the first tokens. */
  options = greedy_options(24);
  CHECK_OK(cortiq_generate(session, prompt, &options, &again));
  CHECK(strcmp(cortiq_result_text(again), cortiq_result_text(first)) == 0);
  cortiq_result_free(again);

  /* Result accessors on bad handles. */
  CHECK(strcmp(cortiq_result_text(NULL), "") == 0);
  size_t n_null = 9;
  CHECK(cortiq_result_tokens(NULL, &n_null) == NULL && n_null == 0);
  CHECK(cortiq_result_generated_tokens(NULL) == 0);
  CHECK(strcmp(cortiq_result_text((const cortiq_result*)session), "") == 0);
  cortiq_result_free(first);
  cortiq_result_free(NULL);
  cortiq_session_free(session);
  cortiq_session_free(NULL);
  CHECK_STATUS(cortiq_session_create(NULL, &session), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_session_create(model, NULL), CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_session_reset(NULL), CORTIQ_ERROR_INVALID_ARGUMENT);
  cortiq_model_free(model);
}

/* Cancels a session over and over until told to stop: whenever the call
 * under test reaches a chunk or a step after the first cancel, it ends. */
typedef struct {
  cortiq_session* session;
  atomic_int start; /* set by the call under test: cancel from now on */
  atomic_int done;
  long cancels;
} Canceller;

static void* cancel_until_done(void* arg) {
  Canceller* c = arg;
  while (!atomic_load(&c->start)) {
  }
  while (!atomic_load(&c->done)) {
    cortiq_cancel(c->session);
    ++c->cancels;
  }
  return NULL;
}

static int start_cancelling(const char* piece, size_t length, cortiq_token token, void* user_data) {
  (void)piece;
  (void)length;
  (void)token;
  atomic_store(&((Canceller*)user_data)->start, 1);
  return 0;
}

static void case_cancel_prefill(void) {
  /* Chunks of 16 rows: a 1,500-token prompt takes 94 forward passes. */
  cortiq_model* model = load_model(16);
  cortiq_session* session = new_session(model);
  cortiq_token* prompt = calloc(1500, sizeof *prompt);
  for (int i = 0; i < 1500; ++i) prompt[i] = 3 + (i * 7919) % 500;
  cortiq_generate_options options = greedy_options(8);

  Canceller c = {.session = session};
  atomic_store(&c.start, 1);
  pthread_t thread;
  pthread_create(&thread, NULL, cancel_until_done, &c);
  cortiq_result* result = NULL;
  CHECK_OK(cortiq_generate_ids(session, prompt, 1500, &options, &result));
  atomic_store(&c.done, 1);
  pthread_join(thread, NULL);
  CHECK(c.cancels > 0);
  CHECK(cortiq_result_finish_reason(result) == CORTIQ_FINISH_CANCELLED);
  CHECK(cortiq_result_generated_tokens(result) == 0);
  cortiq_result_free(result);

  /* The session stays usable and gives a fresh session's tokens. */
  cortiq_result* after = NULL;
  CHECK_OK(cortiq_generate_ids(session, prompt, 200, &options, &after));
  cortiq_session* fresh = new_session(model);
  cortiq_result* reference = NULL;
  CHECK_OK(cortiq_generate_ids(fresh, prompt, 200, &options, &reference));
  CHECK(cortiq_result_finish_reason(after) == CORTIQ_FINISH_MAX_TOKENS);
  CHECK(strcmp(cortiq_result_text(after), cortiq_result_text(reference)) == 0);
  cortiq_result_free(after);
  cortiq_result_free(reference);

  /* Scoring: a cancelled evaluate is CORTIQ_ERROR_CANCELLED, not an engine error. */
  c = (Canceller){.session = session};
  atomic_store(&c.start, 1);
  pthread_create(&thread, NULL, cancel_until_done, &c);
  size_t n_floats = 0;
  const size_t capacity = 1500 * (size_t)cortiq_model_n_vocab(model);
  float* logits = malloc(capacity * sizeof *logits);
  CHECK_OK(cortiq_session_reset(session));
  CHECK_STATUS(cortiq_evaluate(session, prompt, 1500, logits, capacity, &n_floats),
               CORTIQ_ERROR_CANCELLED);
  CHECK_ERROR_SAYS("cancelled");
  atomic_store(&c.done, 1);
  pthread_join(thread, NULL);
  free(logits);

  /* Embeddings (94 chunks) and perplexity (chunks of 64, each several
   * passes of 16, with resets between them) end the same way. */
  const int64_t n_embd = cortiq_model_n_embd(model);
  float* embedding = malloc((size_t)n_embd * sizeof *embedding);
  c = (Canceller){.session = session};
  atomic_store(&c.start, 1);
  pthread_create(&thread, NULL, cancel_until_done, &c);
  CHECK_STATUS(cortiq_embed(session, prompt, 1500, CORTIQ_POOLING_MEAN, 0, embedding,
                            (size_t)n_embd, &n_floats),
               CORTIQ_ERROR_CANCELLED);
  atomic_store(&c.done, 1);
  pthread_join(thread, NULL);
  /* A cancelled embed leaves no history behind, as a finished one. */
  CHECK_OK(cortiq_generate_ids(session, prompt, 20, &options, &after));
  CHECK(cortiq_result_cached_tokens(after) == 0);
  cortiq_result_free(after);
  c = (Canceller){.session = session};
  atomic_store(&c.start, 1);
  pthread_create(&thread, NULL, cancel_until_done, &c);
  double perplexity = 0;
  CHECK_STATUS(cortiq_perplexity(session, prompt, 1500, 64, -1, &perplexity, NULL),
               CORTIQ_ERROR_CANCELLED);
  atomic_store(&c.done, 1);
  pthread_join(thread, NULL);
  free(embedding);

  /* A cancel before a call does not reach it (idempotent, and the call
   * that starts afterwards is not affected). */
  cortiq_cancel(session);
  cortiq_cancel(session);
  cortiq_cancel(NULL);
  CHECK_OK(cortiq_generate_ids(session, prompt, 200, &options, &after));
  CHECK(cortiq_result_finish_reason(after) == CORTIQ_FINISH_MAX_TOKENS);
  cortiq_result_free(after);
  cortiq_session_free(fresh);
  cortiq_session_free(session);
  cortiq_model_free(model);
  free(prompt);
}

static void case_cancel_decode(void) {
  cortiq_model* model = load_model(512);
  cortiq_session* session = new_session(model);
  cortiq_generate_options options = greedy_options(1000);
  Canceller c = {.session = session};
  options.on_token = start_cancelling;
  options.user_data = &c;
  pthread_t thread;
  pthread_create(&thread, NULL, cancel_until_done, &c);
  cortiq_result* result = NULL;
  CHECK_OK(cortiq_generate(session, "Once upon a time", &options, &result));
  atomic_store(&c.start, 1); /* in case no token came */
  atomic_store(&c.done, 1);
  pthread_join(thread, NULL);
  CHECK(cortiq_result_finish_reason(result) == CORTIQ_FINISH_CANCELLED);
  const int64_t generated = cortiq_result_generated_tokens(result);
  CHECK(generated >= 1 && generated < 1000);
  cortiq_result_free(result);
  cortiq_session_free(session);
  cortiq_model_free(model);
}

/* cortiq_cancel from a signal handler, as a program's SIGINT handler would. */
static cortiq_session* volatile g_signalled_session;
static void on_signal(int signal) {
  (void)signal;
  cortiq_cancel(g_signalled_session);
}

static int raise_on_third(const char* piece, size_t length, cortiq_token token, void* user_data) {
  (void)piece;
  (void)length;
  (void)token;
  if (++*(int*)user_data == 3) raise(SIGUSR1);
  return 0;
}

static void case_cancel_signal(void) {
  cortiq_model* model = load_model(512);
  cortiq_session* session = new_session(model);
  g_signalled_session = session;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  int calls = 0;
  cortiq_generate_options options = greedy_options(100);
  options.on_token = raise_on_third;
  options.user_data = &calls;
  cortiq_result* result = NULL;
  CHECK_OK(cortiq_generate(session, "Once upon a time", &options, &result));
  CHECK(cortiq_result_finish_reason(result) == CORTIQ_FINISH_CANCELLED);
  CHECK(cortiq_result_generated_tokens(result) == 3);
  cortiq_result_free(result);
  cortiq_session_free(session);
  cortiq_model_free(model);
}

/* log(sum(exp(row))) in double. */
static double log_sum_exp(const float* row, int64_t n) {
  double most = row[0];
  for (int64_t i = 1; i < n; ++i) most = row[i] > most ? row[i] : most;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += exp(row[i] - most);
  return most + log(sum);
}

static void case_scoring(void) {
  cortiq_model* model = load_model(512);
  cortiq_session* session = new_session(model);
  const int64_t n_vocab = cortiq_model_n_vocab(model);
  cortiq_token ids[40];
  const size_t n = tokenize(model, "The quick brown fox jumps over the lazy dog again", ids, 40);
  CHECK(n >= 8);

  /* A short buffer is refused before anything is forwarded. */
  size_t needed = 0;
  CHECK_STATUS(cortiq_evaluate(session, ids, n, NULL, 0, &needed), CORTIQ_ERROR_BUFFER_TOO_SMALL);
  CHECK(needed == n * (size_t)n_vocab);
  float* logits = malloc(needed * sizeof *logits);
  size_t got = 0;
  CHECK_OK(cortiq_evaluate(session, ids, n, logits, needed, &got));
  CHECK(got == needed);
  /* The same ids on a fresh session: the same bits. */
  cortiq_session* fresh = new_session(model);
  float* again = malloc(needed * sizeof *again);
  CHECK_OK(cortiq_evaluate(fresh, ids, n, again, needed, &got));
  CHECK(memcmp(logits, again, needed * sizeof *logits) == 0);
  /* Evaluated in two calls (the history carries over): the same bits. */
  CHECK_OK(cortiq_session_reset(fresh));
  CHECK_OK(cortiq_evaluate(fresh, ids, 3, again, needed, &got));
  CHECK(got == 3 * (size_t)n_vocab);
  CHECK_OK(cortiq_evaluate(fresh, ids + 3, n - 3, again + got, needed - got, &got));
  CHECK(memcmp(logits, again, needed * sizeof *logits) == 0);

  /* Greedy's first token is the last row's argmax. */
  cortiq_generate_options options = greedy_options(1);
  cortiq_result* result = NULL;
  CHECK_OK(cortiq_session_reset(fresh));
  CHECK_OK(cortiq_generate_ids(fresh, ids, n, &options, &result));
  const float* last = logits + (n - 1) * (size_t)n_vocab;
  int64_t best = 0;
  for (int64_t i = 1; i < n_vocab; ++i) best = last[i] > last[best] ? i : best;
  size_t n_tokens = 0;
  CHECK(cortiq_result_tokens(result, &n_tokens)[0] == best);
  cortiq_result_free(result);

  /* NLL: -log softmax of each next id, from the logits above. */
  double expected = 0;
  for (size_t i = 1; i < n; ++i) {
    const float* row = logits + (i - 1) * (size_t)n_vocab;
    expected += log_sum_exp(row, n_vocab) - row[ids[i]];
  }
  double sum = 0;
  int64_t count = 0;
  CHECK_OK(cortiq_session_reset(fresh));
  CHECK_OK(cortiq_nll(fresh, ids, n, 0, &sum, &count));
  CHECK(count == (int64_t)n - 1);
  CHECK(fabs(sum - expected) <= 1e-5 * fabs(expected));
  CHECK_STATUS(cortiq_nll(fresh, ids, n, 0, NULL, &count), CORTIQ_ERROR_INVALID_ARGUMENT);
  /* From the fourth id on: only those terms. */
  double from_fourth = 0;
  for (size_t i = 3; i < n; ++i) {
    const float* row = logits + (i - 1) * (size_t)n_vocab;
    from_fourth += log_sum_exp(row, n_vocab) - row[ids[i]];
  }
  CHECK_OK(cortiq_session_reset(fresh));
  CHECK_OK(cortiq_nll(fresh, ids, n, 3, &sum, &count));
  CHECK(count == (int64_t)n - 3);
  CHECK(fabs(sum - from_fourth) <= 1e-5 * fabs(from_fourth));
  /* After a history of the first three ids, the rest from 0: the same
   * terms (the first is predicted by the history's last row). */
  CHECK_OK(cortiq_session_reset(fresh));
  CHECK_OK(cortiq_evaluate(fresh, ids, 3, again, needed, &got));
  CHECK_OK(cortiq_nll(fresh, ids + 3, n - 3, 0, &sum, &count));
  CHECK(count == (int64_t)n - 3);
  CHECK(fabs(sum - from_fourth) <= 1e-5 * fabs(from_fourth));
  /* from past the ids: nothing scored, the ids still join the history. */
  CHECK_OK(cortiq_nll(fresh, ids, 2, 5, &sum, &count));
  CHECK(count == 0 && sum == 0);

  /* Perplexity over chunks of 64 (llama-perplexity's method). */
  cortiq_token* text = calloc(400, sizeof *text);
  for (int i = 0; i < 400; ++i) text[i] = 3 + (i * 31) % 200;
  double perplexity = 0;
  double error = -1;
  CHECK_OK(cortiq_perplexity(session, text, 400, 64, -1, &perplexity, &error));
  CHECK(perplexity > 1 && isfinite(perplexity) && error >= 0);
  double two_chunks = 0;
  CHECK_OK(cortiq_perplexity(session, text, 400, 64, 2, &two_chunks, NULL));
  CHECK(two_chunks > 1 && two_chunks != perplexity);
  /* Arguments it cannot use are the caller's mistake, in the API's words. */
  CHECK_STATUS(cortiq_perplexity(session, text, 100, 64, -1, &perplexity, &error),
               CORTIQ_ERROR_INVALID_ARGUMENT); /* fewer than two chunks */
  CHECK_ERROR_SAYS("two chunks");
  CHECK_STATUS(cortiq_perplexity(session, text, 400, -3, -1, &perplexity, &error),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(cortiq_perplexity(session, text, 400, 2, -1, &perplexity, &error),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("at least 4");
  CHECK_STATUS(cortiq_perplexity(session, text, 400, 64, 0, &perplexity, &error),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("max_chunks");
  const int64_t loaded = cortiq_model_context(model);
  CHECK_STATUS(cortiq_perplexity(session, text, 400, loaded + 1, -1, &perplexity, &error),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  CHECK_ERROR_SAYS("cortiq_model_options.context");
  CHECK(strstr(cortiq_last_error(), "-c ") == NULL); /* not the command's flag */
  free(text);
  /* Context 0 is the command's 512. */
  text = calloc(1100, sizeof *text);
  for (int i = 0; i < 1100; ++i) text[i] = 3 + (i * 31) % 200;
  double at_512 = 0;
  CHECK_OK(cortiq_perplexity(session, text, 1100, 0, -1, &perplexity, NULL));
  CHECK_OK(cortiq_perplexity(session, text, 1100, 512, -1, &at_512, NULL));
  CHECK(perplexity == at_512 && perplexity > 1);
  free(text);

  /* Embeddings: unit length when normalized, refused for a short buffer. */
  const int64_t n_embd = cortiq_model_n_embd(model);
  float* embedding = malloc((size_t)n_embd * sizeof *embedding);
  CHECK_STATUS(cortiq_embed(session, ids, n, CORTIQ_POOLING_MEAN, 1, embedding, 3, &got),
               CORTIQ_ERROR_BUFFER_TOO_SMALL);
  CHECK(got == (size_t)n_embd);
  CHECK_OK(cortiq_embed(session, ids, n, CORTIQ_POOLING_MEAN, 1, embedding, (size_t)n_embd, &got));
  double norm = 0;
  for (int64_t i = 0; i < n_embd; ++i) norm += (double)embedding[i] * embedding[i];
  CHECK(fabs(norm - 1) < 1e-5);
  /* The file names no pooling: the default is the mean; the last token's
   * row is another vector. */
  float* mean = malloc((size_t)n_embd * sizeof *mean);
  float* one = malloc((size_t)n_embd * sizeof *one);
  CHECK_OK(cortiq_embed(session, ids, n, CORTIQ_POOLING_MEAN, 0, mean, (size_t)n_embd, &got));
  CHECK_OK(cortiq_embed(session, ids, n, CORTIQ_POOLING_DEFAULT, 0, one, (size_t)n_embd, &got));
  CHECK(memcmp(mean, one, (size_t)n_embd * sizeof *one) == 0);
  CHECK_OK(cortiq_embed(session, ids, n, CORTIQ_POOLING_LAST, 0, one, (size_t)n_embd, &got));
  CHECK(memcmp(mean, one, (size_t)n_embd * sizeof *one) != 0);
  free(mean);
  CHECK_STATUS(cortiq_embed(session, ids, n, 9, 0, one, (size_t)n_embd, &got),
               CORTIQ_ERROR_INVALID_ARGUMENT);
  free(one);
  free(embedding);
  free(logits);
  free(again);
  cortiq_session_free(fresh);
  cortiq_session_free(session);
  cortiq_model_free(model);
}

/* Two sessions of one model on two threads give what each gives alone. */
typedef struct {
  cortiq_model* model;
  char text[4096];
} Worker;

static void* generate_on_thread(void* arg) {
  Worker* w = arg;
  cortiq_session* session = NULL;
  if (cortiq_session_create(w->model, &session) != CORTIQ_OK) return NULL;
  cortiq_generate_options options = greedy_options(32);
  cortiq_result* result = NULL;
  if (cortiq_generate(session, "In a land far away", &options, &result) == CORTIQ_OK) {
    snprintf(w->text, sizeof w->text, "%s", cortiq_result_text(result));
    cortiq_result_free(result);
  }
  cortiq_session_free(session);
  return NULL;
}

/* A thread's last error before and after a failure of its own. */
typedef struct {
  cortiq_model* model;
  char before[256];
  char after[256];
} ErrorOnThread;

static void* fail_on_thread(void* arg) {
  ErrorOnThread* e = arg;
  snprintf(e->before, sizeof e->before, "%s", cortiq_last_error());
  cortiq_token id = -5;
  char text[16];
  size_t n = 0;
  if (cortiq_detokenize(e->model, &id, 1, text, sizeof text, &n) == CORTIQ_OK) return NULL;
  snprintf(e->after, sizeof e->after, "%s", cortiq_last_error());
  return NULL;
}

static void case_threads(void) {
  cortiq_model* model = load_model(512);
  Worker alone = {.model = model};
  generate_on_thread(&alone);
  CHECK(strlen(alone.text) > 0);
  Worker workers[2] = {{.model = model}, {.model = model}};
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) pthread_create(&threads[i], NULL, generate_on_thread, &workers[i]);
  for (int i = 0; i < 2; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 2; ++i) CHECK(strcmp(workers[i].text, alone.text) == 0);
  /* Errors are per thread: a failure here is not another thread's, and
   * another thread's failure does not replace this one's message. */
  CHECK_STATUS(cortiq_session_reset(NULL), CORTIQ_ERROR_INVALID_ARGUMENT);
  char mine[256];
  snprintf(mine, sizeof mine, "%s", cortiq_last_error());
  CHECK(strlen(mine) > 0);
  ErrorOnThread other = {.model = model};
  pthread_t thread;
  pthread_create(&thread, NULL, fail_on_thread, &other);
  pthread_join(thread, NULL);
  CHECK(other.before[0] == '\0');
  CHECK(strlen(other.after) > 0 && strcmp(other.after, mine) != 0);
  CHECK(strcmp(cortiq_last_error(), mine) == 0);
  cortiq_model_free(model);
}

/* Run with CORTIQ_FAULT set (the engine's fault injection, which fails the
 * Nth arrival at a site once): the failure is a status with its message,
 * never a crash or "cancelled", and the session then gives a fresh
 * session's tokens. */
static void case_fault(void) {
  const char* spec = getenv("CORTIQ_FAULT");
  if (spec == NULL) {
    fprintf(stderr, "set CORTIQ_FAULT (e.g. decode:3 or alloc:1)\n");
    ++g_failures;
    return;
  }
  const int out_of_memory = strncmp(spec, "alloc", 5) == 0;
  cortiq_model* model = load_model(512);
  cortiq_session* session = new_session(model);
  cortiq_generate_options options = greedy_options(8);
  cortiq_result* result = NULL;
  CHECK_STATUS(cortiq_generate(session, "Once upon a time", &options, &result),
               out_of_memory ? CORTIQ_ERROR_OUT_OF_MEMORY : CORTIQ_ERROR_ENGINE);
  CHECK(result == NULL);
  CHECK_ERROR_SAYS(out_of_memory ? "out of memory" : "injected");
  CHECK_OK(cortiq_generate(session, "Once upon a time", &options, &result));
  cortiq_session* fresh = new_session(model);
  cortiq_result* reference = NULL;
  CHECK_OK(cortiq_generate(fresh, "Once upon a time", &options, &reference));
  CHECK(strcmp(cortiq_result_text(result), cortiq_result_text(reference)) == 0);
  CHECK(cortiq_result_cached_tokens(result) == 0);
  cortiq_result_free(result);
  cortiq_result_free(reference);
  cortiq_session_free(fresh);
  cortiq_session_free(session);
  cortiq_model_free(model);
}

static const struct {
  const char* name;
  void (*run)(void);
} kCases[] = {
    {"Version", case_version},
    {"Load", case_load},
    {"ModelInfo", case_model_info},
    {"Text", case_text},
    {"Generate", case_generate},
    {"CancelMidPrefill", case_cancel_prefill},
    {"CancelMidDecode", case_cancel_decode},
    {"CancelFromASignalHandler", case_cancel_signal},
    {"Scoring", case_scoring},
    {"Threads", case_threads},
    {"Fault", case_fault},
};

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf CASE\n", argv[0]);
    return 2;
  }
  g_model_path = argv[1];
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    if (strcmp(argv[2], kCases[i].name) != 0) continue;
    kCases[i].run();
    if (g_failures > 0) {
      fprintf(stderr, "CApi.%s: %d check(s) failed\n", argv[2], g_failures);
      return 1;
    }
    printf("CApi.%s: passed\n", argv[2]);
    return 0;
  }
  fprintf(stderr, "unknown case %s\n", argv[2]);
  return 2;
}
