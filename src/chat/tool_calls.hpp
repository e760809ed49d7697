// Tool calls in a model's reply. Each model family writes them its own way
// (the chat template shows which); this reads the syntax off the template,
// parses a reply into its text and its calls, and writes the grammar of a
// reply that is nothing but calls (a tool call the request requires).
//
//   hermes            <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Qwen 2.5/3,
//   Hermes) llama3            {"name": "f", "parameters": {...}}, after <|python_tag|> or not
//   (Llama 3.1-3.3) mistral           [TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "..."}]
//   (Nemo) mistral_args      [TOOL_CALLS]f[ARGS]{...} (Small 3.2, Devstral) gpt_oss
//   <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}<|call|> deepseek
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{...}\n```
//                     <｜tool▁call▁end｜><｜tool▁calls▁end｜>   (R1; V3.1: f<｜tool▁sep｜>{...})
//   functionary_v3_1  <function=f>{...}</function>
//   functionary_v3_2  f\n{...}>>>g\n{...}   (after the prompt's ">>>"; "all\n..." is text)
//   command_r         Action: ```json\n[{"tool_name": "f", "parameters": {...}}]\n```
//   command_r7b       <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters":
//   {...}}]<|END_ACTION|>
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cortiq {

enum class ToolCallSyntax : uint8_t {
  none,  // the template shows no tool calls: replies are text
  hermes,
  llama3,
  mistral,
  mistral_args,
  gpt_oss,
  deepseek,
  functionary_v3_1,
  functionary_v3_2,
  command_r,
  command_r7b,
};

std::string_view tool_call_syntax_name(ToolCallSyntax syntax);

// The syntax the template's model writes calls in, from the markers its
// source writes for an assistant message's tool_calls.
ToolCallSyntax detect_tool_call_syntax(std::string_view template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  // compact JSON text of an object
  std::string id;         // as the reply wrote it (Mistral, Command-R), or empty
  bool operator==(const ToolCall&) const = default;
};

struct ParsedReply {
  std::string content;  // the reply's text outside the calls, trimmed
  std::vector<ToolCall> calls;
};

// A reply (with the text of special tokens kept) split into its text and
// its calls. A call that does not parse (cut off, arguments that are not a
// JSON object) leaves the whole reply as text: never a made-up call.
ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply);

class ChatTemplate;

// Whether the template writes an assistant message's tool-call arguments
// as JSON itself (`arguments | tojson`, as Qwen's and Hermes' do): then it
// must be given them as an object, not as the JSON text OpenAI's API
// sends, or the prompt shows them as one quoted string. Found by rendering
// a probe conversation both ways.
bool template_wants_object_arguments(const ChatTemplate& chat_template);

// A function the model may call: its name and the JSON Schema of its
// arguments ("{}" when the tool gives none).
struct ToolSpec {
  std::string name;
  std::string parameters;
};

// GBNF for a reply that is one call (several with `parallel`, where the
// syntax can write them) to one of `tools`, with arguments the tool's
// schema accepts. Throws cortiq::Error for the syntax none, or a schema
// that cannot be expressed (naming the tool).
std::string tool_calls_gbnf(ToolCallSyntax syntax, std::span<const ToolSpec> tools, bool parallel);

}  // namespace cortiq
