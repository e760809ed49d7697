#include "chat/tool_calls.hpp"

#include <algorithm>
#include <exception>
#include <optional>

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "base/json_writer.hpp"
#include "base/strings.hpp"
#include "chat/chat_template.hpp"
#include "grammar/gbnf_text.hpp"
#include "grammar/json_schema.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

std::string_view skip_space(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

bool eat(std::string_view& s, std::string_view prefix) {
  if (!starts_with(s, prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Where the JSON value at the start of `s` (after no blanks) would end:
// brackets balanced outside strings, or a scalar up to a delimiter; npos
// when the brackets never close. Whether it is JSON is the reader's to say.
size_t json_value_length(std::string_view s) {
  if (s.empty()) return std::string_view::npos;
  size_t end = 0;
  if (s[0] == '{' || s[0] == '[' || s[0] == '"') {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) {
            end = i + 1;
            break;
          }
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          end = i + 1;
          break;
        }
      }
    }
  } else {
    end = std::min(s.size(), s.find_first_of(",]}; \t\r\n"));
  }
  return end == 0 ? std::string_view::npos : end;
}

// Reads the JSON value at the start of `s` (blanks skipped) and moves past
// it; nullopt, with `s` unmoved past the blanks, when there is none.
std::optional<Json> take_json(std::string_view& s) {
  s = skip_space(s);
  const size_t n = json_value_length(s);
  if (n == std::string_view::npos) return std::nullopt;
  try {
    Json value = parse_json(s.substr(0, n));
    s.remove_prefix(n);
    return value;
  } catch (const Error&) {
    return std::nullopt;
  }
}

// Arguments as compact JSON text of an object: an object, or a string
// holding one (some models write them quoted).
std::optional<std::string> arguments_text(const Json& args) {
  if (args.type == Json::Type::object) return to_compact_json(args);
  if (args.type == Json::Type::string) {
    try {
      const Json inner = parse_json(args.string);
      if (inner.type == Json::Type::object) return to_compact_json(inner);
    } catch (const Error&) {
    }
  }
  return std::nullopt;
}

std::optional<ToolCall> call_from_value(std::string_view name, const Json& args) {
  const auto text = arguments_text(args);
  if (!text || name.empty()) return std::nullopt;
  return ToolCall{std::string(name), *text, ""};
}

// A call from its name and the text of its arguments, nothing else.
std::optional<ToolCall> call_from_args(std::string_view name, std::string_view args_text) {
  std::string_view rest = args_text;
  const std::optional<Json> args = take_json(rest);
  if (!args || !trim(rest).empty()) return std::nullopt;
  return call_from_value(name, *args);
}

// {"<name_key>": "f", "<args_key>": {...}, "<id_key>": "..."}: args_key is
// the first of `args_keys` present (a missing one: no arguments).
std::optional<ToolCall> call_from_object(const Json& v, std::string_view name_key,
                                         std::initializer_list<std::string_view> args_keys,
                                         std::string_view id_key = "id") {
  if (v.type != Json::Type::object) return std::nullopt;
  const Json* name = v.find(name_key);
  if (!name || name->type != Json::Type::string || name->string.empty()) return std::nullopt;
  ToolCall call{name->string, "{}", ""};
  for (const std::string_view key : args_keys) {
    if (const Json* args = v.find(key)) {
      const auto text = arguments_text(*args);
      if (!text) return std::nullopt;
      call.arguments = *text;
      break;
    }
  }
  if (const Json* id = v.find(id_key)) {
    if (id->type == Json::Type::string) call.id = id->string;
    if (id->type == Json::Type::integer) call.id = std::to_string(id->integer);
  }
  return call;
}

ParsedReply text_only(std::string_view reply) {
  return {std::string(trim(reply)), {}};
}

ParsedReply finish(std::string content, std::vector<ToolCall> calls) {
  return {std::string(trim(content)), std::move(calls)};
}

// Calls between an opening and a closing marker anywhere in the reply
// (hermes, functionary 3.1); `body` reads what is between them.
template <class ReadBody>
ParsedReply parse_tagged(std::string_view reply, std::string_view open, std::string_view close,
                         ReadBody body) {
  std::string content;
  std::vector<ToolCall> calls;
  size_t pos = 0;
  for (size_t start; (start = reply.find(open, pos)) != std::string_view::npos;) {
    content.append(reply.substr(pos, start - pos));
    const size_t inner = start + open.size();
    const size_t end = reply.find(close, inner);
    // A reply cut off after the call's JSON, before the closing tag, still counts.
    const std::string_view between =
        reply.substr(inner, end == std::string_view::npos ? std::string_view::npos : end - inner);
    std::optional<ToolCall> call = body(between);
    if (!call) return text_only(reply);
    calls.push_back(std::move(*call));
    pos = end == std::string_view::npos ? reply.size() : end + close.size();
  }
  content.append(reply.substr(std::min(pos, reply.size())));
  return finish(std::move(content), std::move(calls));
}

ParsedReply parse_hermes(std::string_view reply) {
  return parse_tagged(reply, "<tool_call>", "</tool_call>",
                      [](std::string_view inner) -> std::optional<ToolCall> {
                        std::string_view rest = inner;
                        const auto v = take_json(rest);
                        if (!v || !trim(rest).empty()) return std::nullopt;
                        return call_from_object(*v, "name", {"arguments", "parameters"});
                      });
}

ParsedReply parse_functionary_v3_1(std::string_view reply) {
  std::string content;
  std::vector<ToolCall> calls;
  size_t pos = 0;
  for (size_t start; (start = reply.find("<function=", pos)) != std::string_view::npos;) {
    content.append(reply.substr(pos, start - pos));
    const size_t name_end = reply.find('>', start);
    if (name_end == std::string_view::npos) return text_only(reply);
    const std::string_view name = reply.substr(start + 10, name_end - start - 10);
    std::string_view rest = reply.substr(name_end + 1);
    const size_t before = rest.size();
    const auto args = take_json(rest);
    if (!args) return text_only(reply);
    auto call = call_from_value(name, *args);
    if (!call) return text_only(reply);
    calls.push_back(std::move(*call));
    pos = name_end + 1 + (before - rest.size());
    std::string_view after = skip_space(reply.substr(pos));
    if (eat(after, "</function>")) pos = reply.size() - after.size();
  }
  content.append(reply.substr(pos));
  return finish(std::move(content), std::move(calls));
}

ParsedReply parse_llama3(std::string_view reply) {
  std::string_view rest = trim(reply);
  eat(rest, "<|python_tag|>");
  rest = skip_space(rest);
  if (!starts_with(rest, "{")) return text_only(reply);
  std::vector<ToolCall> calls;
  while (!rest.empty()) {
    const auto v = take_json(rest);
    if (!v) return text_only(reply);
    auto call = call_from_object(*v, "name", {"parameters", "arguments"});
    if (!call) return text_only(reply);
    calls.push_back(std::move(*call));
    rest = skip_space(rest);
    if (!rest.empty() && rest[0] == ';') rest = skip_space(rest.substr(1));
  }
  return {"", std::move(calls)};
}

ParsedReply parse_mistral(std::string_view reply) {
  const size_t start = reply.find("[TOOL_CALLS]");
  if (start == std::string_view::npos) return text_only(reply);
  std::string content(reply.substr(0, start));
  std::vector<ToolCall> calls;
  std::string_view rest = reply.substr(start);
  while (eat(rest, "[TOOL_CALLS]")) {
    rest = skip_space(rest);
    if (starts_with(rest, "[")) {  // [{"name": ..., "arguments": ..., "id": ...}, ...]
      const auto list = take_json(rest);
      if (!list || list->type != Json::Type::array || list->array.empty()) return text_only(reply);
      for (const Json& item : list->array) {
        auto call = call_from_object(item, "name", {"arguments", "parameters"});
        if (!call) return text_only(reply);
        calls.push_back(std::move(*call));
      }
    } else {  // name[ARGS]{...}, or name[CALL_ID]id[ARGS]{...}
      const size_t args = rest.find("[ARGS]");
      if (args == std::string_view::npos) return text_only(reply);
      std::string_view name = rest.substr(0, args);
      std::string id;
      if (const size_t id_at = name.find("[CALL_ID]"); id_at != std::string_view::npos) {
        id = std::string(name.substr(id_at + 9));
        name = name.substr(0, id_at);
      }
      rest.remove_prefix(args + 6);
      const auto value = take_json(rest);
      if (!value) return text_only(reply);
      auto call = call_from_value(trim(name), *value);
      if (!call) return text_only(reply);
      call->id = id;
      calls.push_back(std::move(*call));
    }
    rest = skip_space(rest);
  }
  content.append(rest);
  return finish(std::move(content), std::move(calls));
}

// Harmony: messages "<|channel|>NAME[ to=functions.f][ <|constrain|>json]<|message|>BODY<|end|>",
// each after "<|start|>assistant" (the first after the prompt's); the
// recipient may also stand before <|channel|>.
ParsedReply parse_gpt_oss(std::string_view reply) {
  if (reply.find("<|message|>") == std::string_view::npos) return text_only(reply);
  std::string content;
  std::vector<ToolCall> calls;
  std::string_view rest = reply;
  while (!skip_space(rest).empty()) {
    rest = skip_space(rest);
    eat(rest, "<|start|>assistant");
    const size_t message = rest.find("<|message|>");
    if (message == std::string_view::npos) return text_only(reply);
    const std::string_view header = rest.substr(0, message);
    rest.remove_prefix(message + 11);
    size_t body_end = rest.size();
    size_t marker_length = 0;
    for (const std::string_view marker : {"<|end|>", "<|call|>", "<|return|>", "<|start|>"}) {
      const size_t at = rest.find(marker);
      if (at < body_end) {
        body_end = at;
        marker_length = marker == "<|start|>" ? 0 : marker.size();
      }
    }
    const std::string_view body = rest.substr(0, body_end);
    rest.remove_prefix(body_end + marker_length);
    const size_t channel_at = header.find("<|channel|>");
    std::string_view channel =
        channel_at == std::string_view::npos ? "" : header.substr(channel_at + 11);
    channel = channel.substr(0, channel.find_first_of(" <"));
    if (const size_t to = header.find("to=functions."); to != std::string_view::npos) {
      std::string_view name = header.substr(to + 13);
      name = name.substr(0, name.find_first_of(" <"));
      auto call = call_from_args(name, trim(body));
      if (!call) return text_only(reply);
      calls.push_back(std::move(*call));
    } else if (channel != "analysis") {
      content.append(body);  // the final answer (or a commentary preamble)
    }
  }
  return finish(std::move(content), std::move(calls));
}

ParsedReply parse_deepseek(std::string_view reply) {
  constexpr std::string_view kBegin = "<｜tool▁calls▁begin｜>", kEnd = "<｜tool▁calls▁end｜>";
  constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>", kCallEnd = "<｜tool▁call▁end｜>";
  constexpr std::string_view kSep = "<｜tool▁sep｜>";
  const size_t start = reply.find(kBegin);
  if (start == std::string_view::npos) return text_only(reply);
  std::string content(reply.substr(0, start));
  std::vector<ToolCall> calls;
  std::string_view rest = reply.substr(start + kBegin.size());
  for (rest = skip_space(rest); eat(rest, kCallBegin); rest = skip_space(rest)) {
    const size_t end = rest.find(kCallEnd);
    std::string_view inner = rest.substr(0, end);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + kCallEnd.size());
    const size_t sep = inner.find(kSep);
    if (sep == std::string_view::npos) return text_only(reply);
    std::string_view first = inner.substr(0, sep), second = inner.substr(sep + kSep.size());
    std::optional<ToolCall> call;
    if (const size_t fence = second.find("```json"); fence != std::string_view::npos) {
      // R1: function<｜tool▁sep｜>name\n```json\n{...}\n```
      std::string_view args = second.substr(fence + 7);
      args = args.substr(0, args.rfind("```"));
      call = call_from_args(trim(second.substr(0, fence)), trim(args));
    } else {  // V3.1: name<｜tool▁sep｜>{...}
      call = call_from_args(trim(first), trim(second));
    }
    if (!call) return text_only(reply);
    calls.push_back(std::move(*call));
  }
  eat(rest, kEnd);
  content.append(rest);
  return finish(std::move(content), std::move(calls));
}

// After the prompt's ">>>": "all\ntext" or "name\n{...}", more after ">>>".
ParsedReply parse_functionary_v3_2(std::string_view reply) {
  std::string content;
  std::vector<ToolCall> calls;
  size_t pos = 0;
  while (pos <= reply.size()) {
    size_t next = reply.find(">>>", pos);
    if (next == std::string_view::npos) next = reply.size();
    const std::string_view segment = reply.substr(pos, next - pos);
    pos = next + 3;
    const size_t newline = segment.find('\n');
    const std::string_view recipient = trim(segment.substr(0, newline));
    const std::string_view body =
        newline == std::string_view::npos ? std::string_view() : segment.substr(newline + 1);
    if (recipient == "all") {
      content.append(body);
      continue;
    }
    auto call = call_from_args(recipient, trim(body));
    if (!call) {
      std::string_view text = reply;
      eat(text, "all\n");
      return text_only(text);
    }
    calls.push_back(std::move(*call));
  }
  return finish(std::move(content), std::move(calls));
}

// A JSON list of {"tool_name", "parameters"} objects; "directly-answer" is
// Command-R's way of saying no tool is needed.
bool read_action_list(std::string_view& rest, std::vector<ToolCall>& calls) {
  const auto list = take_json(rest);
  if (!list || list->type != Json::Type::array) return false;
  for (const Json& item : list->array) {
    auto call = call_from_object(item, "tool_name", {"parameters"}, "tool_call_id");
    if (!call) return false;
    if (call->name != "directly-answer") calls.push_back(std::move(*call));
  }
  return true;
}

ParsedReply parse_command_r(std::string_view reply) {
  const size_t action = reply.find("Action:");
  if (action == std::string_view::npos) return text_only(reply);
  std::vector<ToolCall> calls;
  std::string_view rest = skip_space(reply.substr(action + 7));
  const bool fenced = eat(rest, "```json") || eat(rest, "```");
  if (!read_action_list(rest, calls)) return text_only(reply);
  rest = skip_space(rest);
  if (fenced) eat(rest, "```");
  return finish(std::string(reply.substr(0, action)) + std::string(rest), std::move(calls));
}

ParsedReply parse_command_r7b(std::string_view reply) {
  std::string_view text = reply;
  // The plan is not part of the answer.
  if (const size_t end = text.find("<|END_THINKING|>"); end != std::string_view::npos) {
    text.remove_prefix(end + 16);
  }
  std::vector<ToolCall> calls;
  std::string content;
  if (const size_t at = text.find("<|START_ACTION|>"); at != std::string_view::npos) {
    content.append(text.substr(0, at));
    std::string_view rest = text.substr(at + 16);
    if (!read_action_list(rest, calls)) return text_only(reply);
    rest = skip_space(rest);
    eat(rest, "<|END_ACTION|>");
    text = rest;
  }
  if (const size_t at = text.find("<|START_RESPONSE|>"); at != std::string_view::npos) {
    std::string_view response = text.substr(at + 18);
    content.append(response.substr(0, response.find("<|END_RESPONSE|>")));
  } else {
    content.append(text);
  }
  return finish(std::move(content), std::move(calls));
}

// --- grammars --------------------------------------------------------------

// {"type": "object", "properties": {<fixed: consts>, name_key: {"const": name},
//  args_key: <parameters>}, "required": [all of them], "additionalProperties": false}
Json call_schema(const Json& parameters, std::string_view name, std::string_view name_key,
                 std::string_view args_key,
                 const std::vector<std::pair<std::string, std::string>>& fixed) {
  std::string properties, required;
  const auto add = [&](std::string_view key, const std::string& schema) {
    properties += (properties.empty() ? "" : ",") + JsonWriter::quote(key) + ":" + schema;
    required += (required.empty() ? "" : ",") + JsonWriter::quote(key);
  };
  for (const auto& [key, value] : fixed) add(key, "{\"const\":" + JsonWriter::quote(value) + "}");
  add(name_key, "{\"const\":" + JsonWriter::quote(name) + "}");
  add(args_key, to_compact_json(parameters));
  return parse_json(
      strfmt(R"({"type":"object","properties":{%s},"required":[%s],"additionalProperties":false})",
             properties.c_str(), required.c_str()));
}

// "#..." references of a schema embedded at `at` in a larger one, made to
// point where the schema now is.
void rebase_refs(Json& v, const std::string& at) {
  if (v.type == Json::Type::object) {
    for (auto& [key, value] : v.object) {
      if (key == "$ref" && value.type == Json::Type::string && starts_with(value.string, "#")) {
        value.string = "#" + at + value.string.substr(1);
      } else {
        rebase_refs(value, at);
      }
    }
  } else if (v.type == Json::Type::array) {
    for (Json& item : v.array) rebase_refs(item, at);
  }
}

struct JsonCallShape {
  std::string_view name_key, args_key;
  std::vector<std::pair<std::string, std::string>> fixed;
};

std::optional<JsonCallShape> json_call_shape(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::hermes:
    case ToolCallSyntax::mistral:
      return JsonCallShape{"name", "arguments", {}};
    case ToolCallSyntax::llama3:
      return JsonCallShape{"name", "parameters", {}};
    case ToolCallSyntax::command_r:
      return JsonCallShape{"tool_name", "parameters", {}};
    case ToolCallSyntax::command_r7b:
      return JsonCallShape{"tool_name", "parameters", {{"tool_call_id", "0"}}};
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string_view tool_call_syntax_name(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::none:
      return "none";
    case ToolCallSyntax::hermes:
      return "hermes";
    case ToolCallSyntax::llama3:
      return "llama3";
    case ToolCallSyntax::mistral:
      return "mistral";
    case ToolCallSyntax::mistral_args:
      return "mistral_args";
    case ToolCallSyntax::gpt_oss:
      return "gpt_oss";
    case ToolCallSyntax::deepseek:
      return "deepseek";
    case ToolCallSyntax::functionary_v3_1:
      return "functionary_v3_1";
    case ToolCallSyntax::functionary_v3_2:
      return "functionary_v3_2";
    case ToolCallSyntax::command_r:
      return "command_r";
    case ToolCallSyntax::command_r7b:
      return "command_r7b";
  }
  return "none";
}

ToolCallSyntax detect_tool_call_syntax(std::string_view t) {
  const auto has = [t](std::string_view marker) {
    return t.find(marker) != std::string_view::npos;
  };
  if (has("<|START_ACTION|>")) return ToolCallSyntax::command_r7b;
  if (has("Action:") && has("tool_name")) return ToolCallSyntax::command_r;
  if (has("<|channel|>") && has("<|call|>")) return ToolCallSyntax::gpt_oss;
  if (has("tool▁calls▁begin")) return ToolCallSyntax::deepseek;
  if (has("[TOOL_CALLS]"))
    return has("[ARGS]") ? ToolCallSyntax::mistral_args : ToolCallSyntax::mistral;
  if (has(">>>all")) return ToolCallSyntax::functionary_v3_2;
  if (has("<tool_call>")) return ToolCallSyntax::hermes;
  if (has("<function=")) return ToolCallSyntax::functionary_v3_1;
  if (has("<|start_header_id|>") && has("\"parameters\"")) return ToolCallSyntax::llama3;
  return ToolCallSyntax::none;
}

bool template_wants_object_arguments(const ChatTemplate& chat_template) {
  const auto render = [&chat_template](std::string_view arguments) -> std::optional<std::string> {
    ChatInputs inputs;
    inputs.messages = messages_from_json(strfmt(
        R"([{"role": "user", "content": "Go."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "probe1234", "type": "function",
             "function": {"name": "probe_tool", "arguments": %.*s}}]},
            {"role": "tool", "tool_call_id": "probe1234", "name": "probe_tool", "content": "done"}])",
        static_cast<int>(arguments.size()), arguments.data()));
    inputs.tools = messages_from_json(
        R"([{"type": "function", "function": {"name": "probe_tool", "parameters": {"type": "object"}}}])");
    inputs.now = 0;
    try {
      return chat_template.render(inputs);
    } catch (const std::exception&) {  // the template refused the probe
      return std::nullopt;
    }
  };
  // Given the text, a template that encodes it writes its quotes escaped.
  const auto as_text = render(R"("{\"probe_key\": 1}")");
  const auto as_object = render(R"({"probe_key": 1})");
  return as_object && as_object->find("probe_key") != std::string::npos &&
         (!as_text || as_text->find(R"(\"probe_key\")") != std::string::npos);
}

ParsedReply parse_tool_calls(ToolCallSyntax syntax, std::string_view reply) {
  switch (syntax) {
    case ToolCallSyntax::none:
      return text_only(reply);
    case ToolCallSyntax::hermes:
      return parse_hermes(reply);
    case ToolCallSyntax::llama3:
      return parse_llama3(reply);
    case ToolCallSyntax::mistral:
    case ToolCallSyntax::mistral_args:
      return parse_mistral(reply);
    case ToolCallSyntax::gpt_oss:
      return parse_gpt_oss(reply);
    case ToolCallSyntax::deepseek:
      return parse_deepseek(reply);
    case ToolCallSyntax::functionary_v3_1:
      return parse_functionary_v3_1(reply);
    case ToolCallSyntax::functionary_v3_2:
      return parse_functionary_v3_2(reply);
    case ToolCallSyntax::command_r:
      return parse_command_r(reply);
    case ToolCallSyntax::command_r7b:
      return parse_command_r7b(reply);
  }
  return text_only(reply);
}

std::string tool_calls_gbnf(ToolCallSyntax syntax, std::span<const ToolSpec> tools, bool parallel) {
  if (syntax == ToolCallSyntax::none) {
    throw Error(
        "this model's chat template shows no tool-call syntax, so a tool call cannot be required");
  }
  if (tools.empty()) throw Error("a tool call is required but no tools are given");
  std::vector<Json> parameters;
  for (const ToolSpec& tool : tools) {
    try {
      parameters.push_back(parse_json(tool.parameters));
    } catch (const Error& e) {
      throw Error(
          strfmt("tool \"%s\": its parameters are not JSON: %s", tool.name.c_str(), e.what()));
    }
  }
  const std::optional<JsonCallShape> shape = json_call_shape(syntax);
  // One rule per tool: its whole call object (JSON syntaxes) or its arguments.
  std::vector<Json> schemas;
  for (size_t i = 0; i < tools.size(); ++i) {
    if (shape) {
      Json params = parameters[i];
      rebase_refs(params, "/properties/" + std::string(shape->args_key));
      schemas.push_back(
          call_schema(params, tools[i].name, shape->name_key, shape->args_key, shape->fixed));
    } else {
      schemas.push_back(parameters[i]);
    }
  }
  std::vector<grammar::NamedSchema> named;
  for (size_t i = 0; i < tools.size(); ++i) {
    named.push_back(
        {strfmt("tool_%zu", i), schemas[i], strfmt("tool \"%s\"", tools[i].name.c_str())});
  }
  std::string gbnf = grammar::json_schemas_to_gbnf(named);
  // call: one call to any tool, in the syntax.
  std::vector<std::string> alternatives;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string rule = strfmt("tool_%zu", i);
    const std::string& name = tools[i].name;
    switch (syntax) {
      case ToolCallSyntax::hermes:
        alternatives.push_back(grammar::gbnf_literal("<tool_call>\n") + " " + rule + " " +
                               grammar::gbnf_literal("\n</tool_call>"));
        break;
      case ToolCallSyntax::mistral_args:
        alternatives.push_back(grammar::gbnf_literal("[TOOL_CALLS]" + name + "[ARGS]") + " " +
                               rule);
        break;
      case ToolCallSyntax::gpt_oss:
        alternatives.push_back(grammar::gbnf_literal("<|channel|>commentary to=functions." + name +
                                                     " <|constrain|>json<|message|>") +
                               " " + rule + " " + grammar::gbnf_literal("<|call|>"));
        break;
      case ToolCallSyntax::deepseek:
        alternatives.push_back(grammar::gbnf_literal("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" +
                                                     name + "\n```json\n") +
                               " " + rule + " " +
                               grammar::gbnf_literal("\n```<｜tool▁call▁end｜>"));
        break;
      case ToolCallSyntax::functionary_v3_1:
        alternatives.push_back(grammar::gbnf_literal("<function=" + name + ">") + " " + rule + " " +
                               grammar::gbnf_literal("</function>"));
        break;
      case ToolCallSyntax::functionary_v3_2:
        alternatives.push_back(grammar::gbnf_literal(name + "\n") + " " + rule);
        break;
      default:  // JSON objects
        alternatives.push_back(rule);
    }
  }
  gbnf += "tool_call ::= " + [&] {
    std::string out;
    for (const std::string& a : alternatives) out += (out.empty() ? "" : " | ") + a;
    return out;
  }() + "\n";
  std::string root;
  switch (syntax) {
    case ToolCallSyntax::hermes:
      root = parallel ? R"(tool_call ( "\n" tool_call )*)" : "tool_call";
      break;
    case ToolCallSyntax::mistral:
      root = parallel ? R"("[TOOL_CALLS][" tool_call ( ", " tool_call )* "]")"
                      : R"("[TOOL_CALLS][" tool_call "]")";
      break;
    case ToolCallSyntax::mistral_args:
      root = parallel ? "tool_call+" : "tool_call";
      break;
    case ToolCallSyntax::deepseek:
      root = std::string(R"("<｜tool▁calls▁begin｜>" )") + (parallel ? "tool_call+" : "tool_call") +
             R"( "<｜tool▁calls▁end｜>")";
      break;
    case ToolCallSyntax::functionary_v3_2:
      root = parallel ? R"(tool_call ( ">>>" tool_call )*)" : "tool_call";
      break;
    case ToolCallSyntax::command_r:
      root = std::string(R"("Action: ```json\n[" )") +
             (parallel ? R"(tool_call ( ", " tool_call )*)" : "tool_call") + R"( "]\n```")";
      break;
    case ToolCallSyntax::command_r7b:
      root = std::string(R"("<|START_ACTION|>[" )") +
             (parallel ? R"(tool_call ( ", " tool_call )*)" : "tool_call") +
             R"( "]<|END_ACTION|>")";
      break;
    default:  // llama3, gpt_oss, functionary 3.1: one call per reply
      root = "tool_call";
  }
  return gbnf + "root ::= " + root + "\n";
}

}  // namespace cortiq
