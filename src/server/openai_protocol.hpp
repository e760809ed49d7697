// OpenAI's HTTP API in and out: request bodies (chat completions,
// completions, embeddings) are checked field by field and turned into the
// scheduler's jobs; results become OpenAI's response objects and streaming
// chunks. Every problem with a request is an ApiError naming the field.
//
// Sampling fields follow OpenAI (temperature, top_p, seed, stop, penalties
// over the generated tokens, logit_bias, logprobs, n) plus the common
// extensions top_k, min_p and ignore_eos; fields not given keep the engine's
// defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chat/tool_calls.hpp"
#include "server/jobs.hpp"
#include "server/request_stream.hpp"

namespace cortiq {
class Model;
class ChatTemplate;
}  // namespace cortiq

namespace cortiq::server {

// Requests parse into std::map objects (an ordered_json object would make
// a body with many keys quadratic to parse); responses keep their fields in
// the order written.
using RequestJson = nlohmann::json;
using Json = nlohmann::ordered_json;

// What the API layer needs to know about the served model.
struct ApiContext {
  const Model& model;
  const ChatTemplate& chat_template;
  std::string model_name;
  int64_t context = 0;  // positions per sequence
  // How the chat template's model writes tool calls (none: it shows none).
  ToolCallSyntax tool_syntax = ToolCallSyntax::none;
  // The template takes tool-call arguments as objects
  // (template_wants_object_arguments): they are given so.
  bool object_arguments = false;
};

enum class Endpoint { chat, completion };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::chat;
  std::vector<GenerationJob> jobs;  // prompt p, choice c is jobs[p * n + c]
  int32_t n = 1;                    // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int32_t top_logprobs = -1;   // < 0: no logprobs
  // Chat with tools (tool_choice not "none"): the calls in each reply are
  // parsed out of it in this syntax; none: replies are text.
  ToolCallSyntax tool_syntax = ToolCallSyntax::none;
};

struct EmbeddingRequest {
  std::vector<EmbeddingJob> jobs;
  bool base64 = false;  // encoding_format "base64": little-endian float32
};

// Parses a request body; throws ApiError for malformed JSON, a body that is
// not an object, nesting deeper than 64 or more than 2^20 values.
RequestJson parse_body(std::string_view body);

// body_text: the body as sent, from which a response_format's JSON schema is
// read with its members in the order written (without it, in the order of
// the parsed body: by name).
GenerationRequest parse_generation_request(Endpoint endpoint, const RequestJson& body,
                                           const ApiContext& api, std::string_view body_text = {});
EmbeddingRequest parse_embedding_request(const RequestJson& body, const ApiContext& api);

// POST /tokenize: {"content", "add_special"?, "parse_special"?, "with_pieces"?}.
struct TokenizeRequest {
  std::vector<TokenId> ids;
  bool with_pieces = false;  // answer {id, piece} objects instead of bare ids
};
TokenizeRequest parse_tokenize_request(const RequestJson& body, const ApiContext& api);
Json tokenize_response(const TokenizeRequest& request, const ApiContext& api);
// POST /detokenize: {"tokens": [ids of the tokenizer's vocabulary]}.
std::vector<TokenId> parse_detokenize_request(const RequestJson& body, const ApiContext& api);

// One finished choice, collected from the scheduler's events.
struct ChoiceResult {
  std::string text;
  std::vector<TokenId> tokens;  // as generated, with tools (the calls are read from them)
  ChoiceEnd end = ChoiceEnd::stop;
  std::vector<TokenLogprob> logprobs;
  ChoiceStats stats;
};

// Identity of a response, shared by its chunks.
struct ResponseId {
  std::string id;
  int64_t created = 0;  // Unix seconds
};

Json generation_response(const GenerationRequest& request, const ResponseId& rid,
                         const ApiContext& api, const std::vector<ChoiceResult>& choices);
// A streaming chunk with a choice's new text (and its tokens' logprobs;
// text_offset: the length of the choice's text streamed before); the first
// chunk of a chat choice also carries the assistant role.
Json text_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                int32_t choice, const std::string& text, const std::vector<TokenLogprob>& logprobs,
                size_t text_offset, bool first);
// The chunk that ends a choice (finish_reason, empty delta).
Json final_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                 int32_t choice, ChoiceEnd end);
// A reply with tools (GenerationRequest::tool_syntax) streams whole at its
// end: its text, if any, then one chunk per tool call, then the final chunk
// (finish_reason "tool_calls" when it made calls).
std::vector<Json> tool_reply_chunks(const GenerationRequest& request, const ResponseId& rid,
                                    const ApiContext& api, int32_t choice,
                                    const ChoiceResult& result, bool first);
// stream_options.include_usage: the last chunk, with usage and no choices.
Json usage_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                 const std::vector<ChoiceResult>& choices);

Json embedding_response(const EmbeddingRequest& request, const ApiContext& api,
                        const std::vector<std::vector<float>>& vectors, int64_t tokens);
Json models_response(const ApiContext& api, int64_t created);
Json error_body(const std::string& type, const std::string& code, const std::string& message);

// Serializes with invalid UTF-8 (a lone byte token) replaced by U+FFFD.
std::string dump(const Json& json);

std::string_view finish_reason(ChoiceEnd end);

}  // namespace cortiq::server
