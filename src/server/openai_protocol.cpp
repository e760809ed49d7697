#include "server/openai_protocol.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <variant>

#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "base/strings.hpp"
#include "base/version.hpp"
#include "chat/chat_template.hpp"
#include "cortiq/cortiq.hpp"
#include "grammar/json_schema.hpp"
#include "model/hparams.hpp"
#include "server/api_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace cortiq::server {

namespace {

constexpr int32_t kMaxChoices = 16;
constexpr size_t kMaxStopStrings = 16;
constexpr int32_t kMaxTopLogprobs = 20;
constexpr int kMaxNesting = 32;  // tools and tool calls handed to the template
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxJsonValues = size_t{1} << 20;

std::string type_name(const RequestJson& value) {
  return value.type_name();
}

// Reads the fields of a JSON object with their types and ranges checked;
// errors name the field ('temperature' must be a number in [0, 2]).
class Fields {
 public:
  Fields(const RequestJson& object, std::string where)
      : object_(object), where_(std::move(where)) {}

  // The field, or nullptr when absent or null.
  const RequestJson* find(const char* name) const {
    const auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<bool> boolean(const char* name) const {
    const RequestJson* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) throw wrong(name, "a boolean", *v);
    return v->get<bool>();
  }

  std::optional<double> number(const char* name, double lo, double hi) const {
    const RequestJson* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) throw wrong(name, strfmt("a number in [%g, %g]", lo, hi), *v);
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) {
      throw invalid_request(strfmt("%s'%s' must be in [%g, %g], got %s", prefix().c_str(), name, lo,
                                   hi, dump(*v).c_str()));
    }
    return x;
  }

  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const {
    const RequestJson* v = find(name);
    if (!v) return std::nullopt;
    const auto x = as_integer(*v);
    if (!x) throw wrong(name, "an integer", *v);
    if (*x < lo || *x > hi) {
      throw invalid_request(strfmt("%s'%s' must be in [%lld, %lld], got %lld", prefix().c_str(),
                                   name, static_cast<long long>(lo), static_cast<long long>(hi),
                                   static_cast<long long>(*x)));
    }
    return *x;
  }

  std::optional<std::string> string(const char* name) const {
    const RequestJson* v = find(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) throw wrong(name, "a string", *v);
    return v->get<std::string>();
  }

  ApiError wrong(const char* name, const std::string& expected, const RequestJson& got) const {
    return invalid_request(strfmt("%s'%s' must be %s, got %s", prefix().c_str(), name,
                                  expected.c_str(), type_name(got).c_str()));
  }

  // A whole-number JSON value (5 or 5.0), or nullopt.
  static std::optional<int64_t> as_integer(const RequestJson& v) {
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return std::nullopt;
      }
      return v.get<int64_t>();
    }
    if (v.is_number_float()) {
      const double x = v.get<double>();
      if (std::floor(x) == x && std::fabs(x) < 9.0e15) return static_cast<int64_t>(x);
    }
    return std::nullopt;
  }

 private:
  std::string prefix() const { return where_.empty() ? "" : where_ + ": "; }
  const RequestJson& object_;
  std::string where_;
};

// --- prompts -------------------------------------------------------------

std::vector<TokenId> checked_ids(const RequestJson& array, const ApiContext& api,
                                 const char* what) {
  const int64_t n_vocab = api.model.n_vocab();
  std::vector<TokenId> ids;
  ids.reserve(array.size());
  for (const auto& item : array) {
    const auto id = Fields::as_integer(item);
    if (!id) throw invalid_request(strfmt("%s must hold integer token ids", what));
    if (*id < 0 || *id >= n_vocab) {
      throw invalid_request(strfmt("%s: token id %lld is outside the vocabulary (0..%lld)", what,
                                   static_cast<long long>(*id),
                                   static_cast<long long>(n_vocab - 1)));
    }
    ids.push_back(static_cast<TokenId>(*id));
  }
  return ids;
}

std::vector<TokenId> tokenize(const ApiContext& api, const std::string& text, bool add_special,
                              bool parse_special) {
  if (api.model.tokenizer().vocab().kind == TokenizerKind::none) {
    throw invalid_request("this model has no tokenizer: send token ids");
  }
  TokenizeOptions options;
  options.add_special = add_special;
  options.parse_special = parse_special;
  try {
    return api.model.tokenizer().encode(text, options);
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

bool is_id_array(const RequestJson& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& item : v) {
    if (!item.is_number()) return false;
  }
  return true;
}

// A field that is "text", [ids], ["text", ...] or [[ids], ...]: one token
// list per text (tokenized with the model's BOS/EOS) or id array, at most
// max_lists of them (counted before anything is tokenized).
std::vector<std::vector<TokenId>> token_lists(const RequestJson& value, const char* field,
                                              const ApiContext& api, bool parse_special,
                                              size_t max_lists) {
  const auto one = [&](const RequestJson& item) -> std::optional<std::vector<TokenId>> {
    if (item.is_string()) return tokenize(api, item.get<std::string>(), true, parse_special);
    if (is_id_array(item)) return checked_ids(item, api, field);
    return std::nullopt;
  };
  std::vector<std::vector<TokenId>> lists;
  if (auto ids = one(value)) {
    lists.push_back(std::move(*ids));
    return lists;
  }
  if (value.is_array() && !value.empty()) {
    if (value.size() > max_lists) {
      throw invalid_request(strfmt("%s: at most %zu texts or id lists", field, max_lists));
    }
    for (const auto& item : value) {
      auto ids = one(item);
      if (!ids) break;
      lists.push_back(std::move(*ids));
    }
    if (lists.size() == value.size()) return lists;
  }
  throw invalid_request(
      strfmt("%s must be a string, an array of token ids, or an array of those", field));
}

// prompt: "text", [ids], ["text", ...] or [[ids], ...].
std::vector<std::vector<TokenId>> completion_prompts(const RequestJson& body,
                                                     const ApiContext& api) {
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw invalid_request("'prompt' is required");
  const RequestJson& prompt = *it;
  std::vector<std::vector<TokenId>> prompts =
      token_lists(prompt, "'prompt'", api, true, static_cast<size_t>(kMaxChoices));
  for (const auto& ids : prompts) {
    if (ids.empty()) throw invalid_request("the prompt is empty");
  }
  return prompts;
}

// JSON -> template value, for tools and tool calls (depth-limited).
jinja::Value to_template_value(const RequestJson& v, int depth = 0) {
  if (depth > kMaxNesting) throw invalid_request("a message or tool is nested too deeply");
  switch (v.type()) {
    case RequestJson::value_t::null:
      return jinja::Value::none();
    case RequestJson::value_t::boolean:
      return jinja::Value(v.get<bool>());
    case RequestJson::value_t::number_integer:
      return jinja::Value(v.get<int64_t>());
    case RequestJson::value_t::number_unsigned:
      return jinja::Value(static_cast<int64_t>(v.get<uint64_t>()));
    case RequestJson::value_t::number_float:
      return jinja::Value(v.get<double>());
    case RequestJson::value_t::string:
      return jinja::Value(v.get<std::string>());
    case RequestJson::value_t::array: {
      jinja::List list;
      for (const auto& item : v) list.push_back(to_template_value(item, depth + 1));
      return jinja::Value(std::move(list));
    }
    case RequestJson::value_t::object: {
      jinja::Dict dict;
      for (const auto& [key, item] : v.items()) {
        dict.set(jinja::Value(key), to_template_value(item, depth + 1));
      }
      return jinja::Value(std::move(dict));
    }
    default:
      throw invalid_request("unsupported JSON value in a message");
  }
}

bool known_role(const std::string& role) {
  return role == "system" || role == "developer" || role == "user" || role == "assistant" ||
         role == "tool" || role == "function";
}

// content: a string, null (an assistant turn with tool calls) or text parts.
jinja::Value message_content(const RequestJson* content, size_t index) {
  if (!content) return jinja::Value::none();
  if (content->is_string()) return jinja::Value(content->get<std::string>());
  if (!content->is_array()) {
    throw invalid_request(
        strfmt("messages[%zu].content must be a string or an array of parts, "
               "got %s",
               index, type_name(*content).c_str()));
  }
  std::string text;
  for (const auto& part : *content) {
    if (!part.is_object()) {
      throw invalid_request(strfmt("messages[%zu].content parts must be objects", index));
    }
    const Fields fields(part, strfmt("messages[%zu].content", index));
    const auto type = fields.string("type");
    if (type != "text") {
      throw invalid_request(
          strfmt("messages[%zu]: content part type '%s' is not supported (the "
                 "model reads text)",
                 index, type.value_or("").c_str()));
    }
    const auto part_text = fields.string("text");
    if (!part_text) throw invalid_request(strfmt("messages[%zu]: a text part needs 'text'", index));
    if (!text.empty()) text += '\n';
    text += *part_text;
  }
  return jinja::Value(std::move(text));
}

// An assistant message's tool calls for the template: with
// `object_arguments`, each function's arguments (JSON text in OpenAI's API)
// as the object they hold.
jinja::Value template_tool_calls(const RequestJson& tool_calls, bool object_arguments) {
  if (!object_arguments) return to_template_value(tool_calls);
  RequestJson calls = tool_calls;
  for (auto& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) continue;
    auto& function = call["function"];
    if (!function.contains("arguments") || !function["arguments"].is_string()) continue;
    RequestJson arguments =
        RequestJson::parse(function["arguments"].get<std::string>(), nullptr, false);
    if (arguments.is_object()) function["arguments"] = std::move(arguments);
  }
  return to_template_value(calls);
}

jinja::Value chat_messages(const RequestJson& body, bool object_arguments) {
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array()) {
    throw invalid_request("'messages' must be an array of messages");
  }
  if (it->empty()) throw invalid_request("'messages' is empty");
  jinja::List messages;
  for (size_t i = 0; i < it->size(); ++i) {
    const RequestJson& m = (*it)[i];
    if (!m.is_object()) throw invalid_request(strfmt("messages[%zu] must be an object", i));
    const Fields fields(m, strfmt("messages[%zu]", i));
    const auto role = fields.string("role");
    if (!role) throw invalid_request(strfmt("messages[%zu] needs a 'role'", i));
    if (!known_role(*role)) {
      throw invalid_request(
          strfmt("messages[%zu]: unknown role '%s' (system, developer, user, "
                 "assistant or tool)",
                 i, role->c_str()));
    }
    const RequestJson* tool_calls = fields.find("tool_calls");
    if (tool_calls && !tool_calls->is_array())
      throw fields.wrong("tool_calls", "an array", *tool_calls);
    const RequestJson* content = fields.find("content");
    if (!content && !tool_calls && *role != "assistant") {
      throw invalid_request(strfmt("messages[%zu] needs 'content'", i));
    }
    jinja::Dict message;
    message.set(jinja::Value("role"), jinja::Value(*role));
    message.set(jinja::Value("content"), message_content(content, i));
    if (const auto name = fields.string("name")) {
      message.set(jinja::Value("name"), jinja::Value(*name));
    }
    if (const auto id = fields.string("tool_call_id")) {
      message.set(jinja::Value("tool_call_id"), jinja::Value(*id));
    }
    if (tool_calls) {
      message.set(jinja::Value("tool_calls"), template_tool_calls(*tool_calls, object_arguments));
    }
    messages.push_back(jinja::Value(std::move(message)));
  }
  return jinja::Value(std::move(messages));
}

std::vector<TokenId> chat_prompt(const RequestJson& body, const ApiContext& api, bool with_tools) {
  const auto& vocab = api.model.tokenizer().vocab();
  ChatInputs inputs;
  inputs.messages = chat_messages(body, api.object_arguments);
  if (const auto it = body.find("tools"); with_tools && it != body.end() && !it->is_null()) {
    inputs.tools = to_template_value(*it);
  }
  inputs.add_generation_prompt = true;
  inputs.bos_token = vocab.token_text(vocab.bos);
  inputs.eos_token = vocab.token_text(vocab.eos);
  std::string text;
  try {
    text = api.chat_template.render(inputs);
  } catch (const Error& e) {
    throw invalid_request(std::string("the chat template refused the messages: ") + e.what());
  }
  // Templates usually write the BOS text themselves; do not add a second.
  const std::string_view bos = vocab.token_text(vocab.bos);
  const bool add_bos = bos.empty() || text.rfind(bos, 0) != 0;
  auto ids = tokenize(api, text, add_bos, true);
  if (ids.empty()) throw invalid_request("the rendered prompt is empty");
  return ids;
}

// --- sampling ------------------------------------------------------------

std::vector<std::string> stop_strings(const Fields& fields) {
  const RequestJson* stop = fields.find("stop");
  std::vector<std::string> stops;
  if (!stop) return stops;
  if (stop->is_string()) {
    stops.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    if (stop->size() > kMaxStopStrings) {
      throw invalid_request(strfmt("'stop' takes at most %zu strings", kMaxStopStrings));
    }
    for (const auto& s : *stop) {
      if (!s.is_string()) throw invalid_request("'stop' must be a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    throw fields.wrong("stop", "a string or an array of strings", *stop);
  }
  std::erase_if(stops, [](const std::string& s) { return s.empty(); });
  return stops;
}

std::vector<std::pair<TokenId, float>> logit_bias(const Fields& fields, int64_t n_vocab) {
  std::vector<std::pair<TokenId, float>> bias;
  const RequestJson* map = fields.find("logit_bias");
  if (!map) return bias;
  if (!map->is_object()) throw fields.wrong("logit_bias", "an object of token id -> bias", *map);
  for (const auto& [key, value] : map->items()) {
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || errno != 0 || id < 0 || id >= n_vocab) {
      throw invalid_request(strfmt("'logit_bias': key '%s' is not a token id in 0..%lld",
                                   key.c_str(), static_cast<long long>(n_vocab - 1)));
    }
    if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100)) {
      throw invalid_request(
          strfmt("'logit_bias': the bias of token %lld must be a number in "
                 "[-100, 100]",
                 id));
    }
    bias.emplace_back(static_cast<TokenId>(id), value.get<float>());
  }
  return bias;
}

SamplingParams sampling_params(const Fields& fields, const ApiContext& api) {
  SamplingParams p;
  // Penalties as OpenAI defines them: over every generated token.
  p.penalty_last_n = -1;
  if (auto v = fields.number("temperature", 0, 2)) p.temperature = static_cast<float>(*v);
  if (auto v = fields.number("top_p", 0, 1)) {
    if (*v == 0) {
      p.temperature = 0;  // only the most likely token is left
    } else {
      p.top_p = static_cast<float>(*v);
    }
  }
  if (auto v = fields.integer("top_k", 0, INT32_MAX)) p.top_k = static_cast<int32_t>(*v);
  if (auto v = fields.number("min_p", 0, 1)) p.min_p = static_cast<float>(*v);
  if (auto v = fields.number("presence_penalty", -2, 2))
    p.presence_penalty = static_cast<float>(*v);
  if (auto v = fields.number("frequency_penalty", -2, 2)) {
    p.frequency_penalty = static_cast<float>(*v);
  }
  if (auto v = fields.number("repetition_penalty", 0.01, 10)) {
    p.repeat_penalty = static_cast<float>(*v);
  }
  p.logit_bias = logit_bias(fields, api.model.n_vocab());
  if (auto v = fields.integer("seed", INT64_MIN, INT64_MAX)) {
    p.seed = static_cast<uint64_t>(*v);
  } else {
    std::random_device device;
    p.seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  try {
    p.validate(api.model.n_vocab());
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
  return p;
}

// The body as sent, read on demand into a tree that keeps members in the
// order written (a JSON schema's properties are written in that order),
// which the request's std::map objects do not.
class OrderedBody {
 public:
  explicit OrderedBody(std::string_view text) : text_(text) {}

  // The value at `path` (object keys, array indices) of the body, or
  // `parsed` (members by name) when the body text is not at hand.
  cortiq::Json value(const RequestJson& parsed,
                     std::initializer_list<std::variant<const char*, size_t>> path) {
    if (const cortiq::Json* node = root()) {
      for (const auto& step : path) {
        if (!node) break;
        if (std::holds_alternative<const char*>(step)) {
          node = node->find(std::get<const char*>(step));
        } else {
          const size_t i = std::get<size_t>(step);
          node = node->type == cortiq::Json::Type::array && i < node->array.size() ? &node->array[i]
                                                                                   : nullptr;
        }
      }
      if (node) return *node;
    }
    return parse_json(parsed.dump());
  }

 private:
  const cortiq::Json* root() {
    if (!read_ && !text_.empty()) {
      read_ = true;
      try {
        tree_ = parse_json(text_);
      } catch (const Error&) {
        // Read by nlohmann but not by this reader: the parsed tree's order.
      }
    }
    return tree_ ? &*tree_ : nullptr;
  }

  std::string_view text_;
  bool read_ = false;
  std::optional<cortiq::Json> tree_;
};

std::shared_ptr<const grammar::CompiledGrammar> compiled(const std::string& gbnf,
                                                         const char* field) {
  try {
    return compile_grammar(gbnf);
  } catch (const Error& e) {
    throw invalid_request(strfmt("'%s': %s", field, e.what()), "invalid_grammar");
  }
}

// Any JSON object: response_format json_object, and json_schema without a schema.
const std::string& any_object_gbnf() {
  static const std::string gbnf = grammar::json_schema_to_gbnf(R"({"type": "object"})");
  return gbnf;
}

// What the reply is constrained to: response_format json_object (any JSON
// object) or json_schema (JSON the schema accepts), or the "grammar"
// extension (GBNF, as llama-server takes it); null for free text.
std::shared_ptr<const grammar::CompiledGrammar> reply_grammar(const Fields& fields,
                                                              const ApiContext& api,
                                                              OrderedBody& body) {
  std::string gbnf;
  const char* field = "grammar";
  if (const RequestJson* format = fields.find("response_format")) {
    if (!format->is_object()) throw fields.wrong("response_format", "an object", *format);
    const Fields f(*format, "response_format");
    const auto type = f.string("type");
    if (!type) throw invalid_request("'response_format' needs a 'type'");
    if (*type == "json_object") {
      gbnf = any_object_gbnf();
      field = "response_format";
    } else if (*type == "json_schema") {
      const RequestJson* spec = f.find("json_schema");
      if (!spec || !spec->is_object()) {
        throw invalid_request("'response_format': type json_schema needs a 'json_schema' object");
      }
      const RequestJson* schema = Fields(*spec, "response_format.json_schema").find("schema");
      field = "response_format.json_schema.schema";
      try {
        gbnf = schema ? grammar::json_schema_to_gbnf(
                            body.value(*schema, {"response_format", "json_schema", "schema"}))
                      : any_object_gbnf();
      } catch (const Error& e) {
        throw invalid_request(strfmt("'%s': %s", field, e.what()), "invalid_json_schema");
      }
    } else if (*type != "text") {
      throw invalid_request(
          "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  if (const auto text = fields.string("grammar")) {
    if (!gbnf.empty())
      throw invalid_request("'grammar' and a JSON 'response_format' exclude each other");
    gbnf = *text;
    field = "grammar";
  }
  if (gbnf.empty()) return nullptr;
  if (api.model.tokenizer().vocab().kind == TokenizerKind::none) {
    throw invalid_request(strfmt("'%s' needs a tokenizer; this model has none", field));
  }
  return compiled(gbnf, field);
}

// tools, tool_choice and parallel_tool_calls of a chat request.
struct ToolSettings {
  std::vector<ToolSpec> tools;
  bool render = false;  // the template sees the tools (tool_choice is not "none")
  bool parse = false;   // calls are parsed out of the replies
  std::shared_ptr<const grammar::CompiledGrammar> required;  // "required" or a named function
};

ToolSettings tool_settings(const Fields& fields, OrderedBody& ordered, const ApiContext& api) {
  ToolSettings out;
  const RequestJson* tools = fields.find("tools");
  if (tools && !tools->is_array()) throw fields.wrong("tools", "an array", *tools);
  if (tools) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const RequestJson& tool = (*tools)[i];
      const std::string where = strfmt("tools[%zu]", i);
      if (!tool.is_object()) throw invalid_request(strfmt("'%s' must be an object", where.c_str()));
      const Fields t(tool, where);
      if (const auto type = t.string("type"); type && *type != "function") {
        throw invalid_request(
            strfmt("%s: only tools of type \"function\" are supported", where.c_str()));
      }
      const RequestJson* function = t.find("function");
      if (!function || !function->is_object()) {
        throw invalid_request(strfmt("%s needs a 'function' object", where.c_str()));
      }
      const Fields f(*function, where + ".function");
      const auto name = f.string("name");
      if (!name || name->empty())
        throw invalid_request(strfmt("%s.function needs a 'name'", where.c_str()));
      ToolSpec spec{*name, R"({"type": "object"})"};
      if (const RequestJson* parameters = f.find("parameters")) {
        if (!parameters->is_object())
          throw f.wrong("parameters", "a JSON schema object", *parameters);
        spec.parameters =
            to_compact_json(ordered.value(*parameters, {"tools", i, "function", "parameters"}));
      }
      out.tools.push_back(std::move(spec));
    }
  }
  std::string mode = "auto";
  std::string named;
  if (const RequestJson* choice = fields.find("tool_choice")) {
    if (choice->is_string()) {
      mode = choice->get<std::string>();
      if (mode != "none" && mode != "auto" && mode != "required") {
        throw invalid_request(
            "'tool_choice' must be \"none\", \"auto\", \"required\" or a function");
      }
    } else if (choice->is_object()) {
      const Fields c(*choice, "tool_choice");
      const RequestJson* function = c.find("function");
      const auto name = function && function->is_object()
                            ? Fields(*function, "tool_choice.function").string("name")
                            : std::nullopt;
      if (!name)
        throw invalid_request(
            "'tool_choice' names a function as {\"type\": \"function\", \"function\": {\"name\": "
            "...}}");
      mode = "named";
      named = *name;
    } else {
      throw fields.wrong("tool_choice", "a string or an object", *choice);
    }
  }
  const bool parallel = fields.boolean("parallel_tool_calls").value_or(true);
  if (out.tools.empty()) {
    if (mode == "required" || mode == "named")
      throw invalid_request("'tool_choice' asks for a tool call but no 'tools' are given");
    return out;
  }
  out.render = mode != "none";
  out.parse = out.render && api.tool_syntax != ToolCallSyntax::none;
  if (mode == "required" || mode == "named") {
    std::vector<ToolSpec> callable = out.tools;
    if (mode == "named") {
      std::erase_if(callable, [&named](const ToolSpec& t) { return t.name != named; });
      if (callable.empty())
        throw invalid_request("'tool_choice' names \"" + named +
                              "\", which is not among the 'tools'");
    }
    if (api.tool_syntax == ToolCallSyntax::none) {
      throw invalid_request(
          "'tool_choice' asks for a tool call, but this model's chat template shows no tool-call "
          "syntax");
    }
    std::string gbnf;
    try {
      gbnf = tool_calls_gbnf(api.tool_syntax, callable, parallel);
    } catch (const Error& e) {
      throw invalid_request(strfmt("'tools': %s", e.what()), "invalid_json_schema");
    }
    out.required = compiled(gbnf, "tools");
  }
  return out;
}

void check_unsupported(const Fields& fields, Endpoint endpoint) {
  if (endpoint == Endpoint::completion) {
    if (fields.boolean("echo").value_or(false)) throw invalid_request("'echo' is not supported");
    if (fields.find("suffix")) throw invalid_request("'suffix' is not supported");
  }
}

}  // namespace

RequestJson parse_body(std::string_view body) {
  // The parser would stop at a NUL and accept what came before it.
  if (body.find('\0') != std::string_view::npos) {
    throw invalid_request("the body is not valid JSON (it contains a NUL byte)", "invalid_json");
  }
  // Bounds on what a body may build: the parser is iterative, but a DOM of
  // millions of values costs memory, and no request needs deep nesting.
  size_t values = 0;
  const auto limits = [&values](int depth, RequestJson::parse_event_t event, RequestJson&) {
    if (depth > kMaxJsonDepth) {
      throw invalid_request(strfmt("the body nests deeper than %d levels", kMaxJsonDepth));
    }
    if (event == RequestJson::parse_event_t::value && ++values > kMaxJsonValues) {
      throw invalid_request(strfmt("the body holds more than %zu values", kMaxJsonValues));
    }
    return true;
  };
  RequestJson json =
      RequestJson::parse(body.begin(), body.end(), limits, /*allow_exceptions=*/false);
  if (json.is_discarded()) throw invalid_request("the body is not valid JSON", "invalid_json");
  if (!json.is_object()) throw invalid_request("the body must be a JSON object");
  return json;
}

GenerationRequest parse_generation_request(Endpoint endpoint, const RequestJson& body,
                                           const ApiContext& api, std::string_view body_text) {
  const Fields fields(body, "");
  GenerationRequest request;
  request.endpoint = endpoint;
  if (const RequestJson* model = fields.find("model"); model && !model->is_string()) {
    throw fields.wrong("model", "a string", *model);
  }
  check_unsupported(fields, endpoint);
  request.stream = fields.boolean("stream").value_or(false);
  if (const RequestJson* options = fields.find("stream_options")) {
    if (!options->is_object()) throw fields.wrong("stream_options", "an object", *options);
    request.include_usage =
        Fields(*options, "stream_options").boolean("include_usage").value_or(false);
  }
  request.n = static_cast<int32_t>(fields.integer("n", 1, kMaxChoices).value_or(1));
  if (endpoint == Endpoint::chat) {
    const bool logprobs = fields.boolean("logprobs").value_or(false);
    const auto top = fields.integer("top_logprobs", 0, kMaxTopLogprobs);
    if (top && !logprobs) throw invalid_request("'top_logprobs' needs 'logprobs': true");
    if (logprobs) request.top_logprobs = static_cast<int32_t>(top.value_or(0));
  } else if (const auto top = fields.integer("logprobs", 0, kMaxTopLogprobs)) {
    request.top_logprobs = static_cast<int32_t>(*top);
  }
  auto max_tokens = fields.integer("max_completion_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = fields.integer("max_tokens", 1, INT32_MAX);
  if (endpoint == Endpoint::completion && !max_tokens) max_tokens = 16;  // OpenAI's default

  const bool ignore_eos = fields.boolean("ignore_eos").value_or(false);
  const std::vector<std::string> stops = stop_strings(fields);
  if (!stops.empty() && api.model.tokenizer().vocab().kind == TokenizerKind::none) {
    throw invalid_request("'stop' needs a tokenizer; this model has none");
  }
  const SamplingParams sampling = sampling_params(fields, api);
  OrderedBody ordered(body_text);
  auto grammar = reply_grammar(fields, api, ordered);
  std::vector<std::vector<TokenId>> prompts;
  if (endpoint == Endpoint::chat) {
    const ToolSettings tools = tool_settings(fields, ordered, api);
    if (tools.required) {
      if (grammar)
        throw invalid_request(
            "a required tool call and 'response_format' or 'grammar' exclude each other");
      grammar = tools.required;
    }
    if (tools.parse) request.tool_syntax = api.tool_syntax;
    prompts.push_back(chat_prompt(body, api, tools.render));
  } else {
    if (fields.find("tools") || fields.find("tool_choice")) {
      throw invalid_request("'tools' are for chat completions (POST /v1/chat/completions)");
    }
    prompts = completion_prompts(body, api);
  }
  if (prompts.size() * static_cast<size_t>(request.n) > static_cast<size_t>(kMaxChoices)) {
    throw invalid_request(strfmt("at most %d choices (prompts x n) per request", kMaxChoices));
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto length = static_cast<int64_t>(prompts[p].size());
    const int64_t room = api.context - length;
    if (room < 1) {
      throw context_overflow(
          strfmt("the prompt has %lld tokens but the context holds %lld, "
                 "leaving no room for a reply",
                 static_cast<long long>(length), static_cast<long long>(api.context)));
    }
    for (int32_t c = 0; c < request.n; ++c) {
      GenerationJob job;
      job.choice = static_cast<int32_t>(p) * request.n + c;
      job.prompt = prompts[p];
      job.sampling = sampling;
      job.sampling.seed += static_cast<uint64_t>(c);  // each choice its own stream
      job.max_tokens = std::min(room, max_tokens.value_or(room));
      job.ignore_eos = ignore_eos;
      job.stop = stops;
      job.top_logprobs = request.top_logprobs;
      job.grammar = grammar;
      request.jobs.push_back(std::move(job));
    }
  }
  return request;
}

EmbeddingRequest parse_embedding_request(const RequestJson& body, const ApiContext& api) {
  const Fields fields(body, "");
  EmbeddingRequest request;
  if (const RequestJson* model = fields.find("model"); model && !model->is_string()) {
    throw fields.wrong("model", "a string", *model);
  }
  if (const auto format = fields.string("encoding_format")) {
    if (*format != "float" && *format != "base64") {
      throw invalid_request("'encoding_format' must be \"float\" or \"base64\"");
    }
    request.base64 = *format == "base64";
  }
  const auto n_embd = api.model.hparams().n_embd;
  if (const auto dims = fields.integer("dimensions", 1, INT32_MAX); dims && *dims != n_embd) {
    throw invalid_request(
        strfmt("this model's embeddings have %lld dimensions", static_cast<long long>(n_embd)));
  }
  const RequestJson* input = fields.find("input");
  if (!input) throw invalid_request("'input' is required");
  constexpr size_t kMaxInputs = 256;
  std::vector<std::vector<TokenId>> inputs = token_lists(*input, "'input'", api, false, kMaxInputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].empty()) throw invalid_request(strfmt("input %zu is empty", i));
    if (static_cast<int64_t>(inputs[i].size()) > api.context) {
      throw context_overflow(strfmt("input %zu has %zu tokens but the context holds %lld", i,
                                    inputs[i].size(), static_cast<long long>(api.context)));
    }
    request.jobs.push_back({static_cast<int32_t>(i), std::move(inputs[i])});
  }
  return request;
}

TokenizeRequest parse_tokenize_request(const RequestJson& body, const ApiContext& api) {
  const Fields fields(body, "");
  const auto content = fields.string("content");
  if (!content) throw invalid_request("'content' must be a string");
  TokenizeRequest request;
  request.ids = tokenize(api, *content, fields.boolean("add_special").value_or(false),
                         fields.boolean("parse_special").value_or(false));
  request.with_pieces = fields.boolean("with_pieces").value_or(false);
  return request;
}

std::vector<TokenId> parse_detokenize_request(const RequestJson& body, const ApiContext& api) {
  const auto tokens = body.find("tokens");
  if (tokens == body.end() || !tokens->is_array()) {
    throw invalid_request("'tokens' must be an array of token ids");
  }
  // Strict integers within the tokenizer's list (what decode can print).
  const auto n_vocab = static_cast<int64_t>(api.model.tokenizer().vocab().size());
  std::vector<TokenId> ids;
  for (const auto& item : *tokens) {
    if (!item.is_number_integer() || item.get<int64_t>() < 0 || item.get<int64_t>() >= n_vocab) {
      throw invalid_request(
          strfmt("'tokens' must hold token ids in 0..%lld", static_cast<long long>(n_vocab - 1)));
    }
    ids.push_back(static_cast<TokenId>(item.get<int64_t>()));
  }
  return ids;
}

// --- responses -----------------------------------------------------------

namespace {

Json bytes_of(const std::string& text) {
  Json bytes = Json::array();
  for (const unsigned char c : text) bytes.push_back(c);
  return bytes;
}

// A token's text; ids past the tokenizer's list (a model whose output has
// more rows than its vocabulary) have none.
std::string piece(const ApiContext& api, TokenId id) {
  const auto& tokenizer = api.model.tokenizer();
  if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab().size()) return {};
  return tokenizer.token_to_piece(id, /*render_special=*/true);
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs: [...]}]}.
Json chat_logprobs(const ApiContext& api, const std::vector<TokenLogprob>& tokens) {
  Json content = Json::array();
  for (const auto& t : tokens) {
    const std::string text = piece(api, t.id);
    Json top = Json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string alt = piece(api, id);
      top.push_back({{"token", alt}, {"logprob", lp}, {"bytes", bytes_of(alt)}});
    }
    content.push_back({{"token", text},
                       {"logprob", t.logprob},
                       {"bytes", bytes_of(text)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

// Completions: {tokens, token_logprobs, top_logprobs: [{text: lp}], text_offset}.
Json completion_logprobs(const ApiContext& api, const std::vector<TokenLogprob>& tokens,
                         size_t text_offset) {
  Json out = {{"tokens", Json::array()},
              {"token_logprobs", Json::array()},
              {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
  for (const auto& t : tokens) {
    const std::string text = piece(api, t.id);
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(t.logprob);
    Json top = Json::object();
    for (const auto& [id, lp] : t.top) top[piece(api, id)] = lp;
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(text_offset);
    text_offset += text.size();
  }
  return out;
}

// text_offset: where the tokens' text starts in the choice's text
// (completions' logprobs give each token's offset).
Json logprobs_json(const GenerationRequest& request, const ApiContext& api,
                   const std::vector<TokenLogprob>& tokens, size_t text_offset = 0) {
  if (request.top_logprobs < 0) return nullptr;
  return request.endpoint == Endpoint::chat ? chat_logprobs(api, tokens)
                                            : completion_logprobs(api, tokens, text_offset);
}

Json usage_json(const GenerationRequest& request, const std::vector<ChoiceResult>& choices) {
  int64_t prompt = 0;
  int64_t cached = 0;
  int64_t completion = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    // Each prompt counts once, however many choices continue it.
    if (i % static_cast<size_t>(request.n) == 0) {
      prompt += choices[i].stats.prompt_tokens;
      cached += choices[i].stats.cached_tokens;
    }
    completion += choices[i].stats.generated_tokens;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

// Server-side timings of the first choice (llama.cpp's field names).
Json timings_json(const std::vector<ChoiceResult>& choices) {
  if (choices.empty()) return nullptr;
  const auto& s = choices.front().stats;
  const int64_t prompt_n = s.prompt_tokens - s.cached_tokens;
  const int64_t predicted_n = s.generated_tokens;
  return {{"cache_n", s.cached_tokens},
          {"prompt_n", prompt_n},
          {"prompt_ms", s.prompt_ms},
          {"predicted_n", predicted_n},
          {"predicted_ms", s.decode_ms},
          {"queue_ms", s.queue_ms},
          {"ttft_ms", s.ttft_ms},
          {"predicted_per_second",
           s.decode_ms > 0 && predicted_n > 1 ? (predicted_n - 1) * 1000.0 / s.decode_ms : 0.0},
          {"draft_n", s.drafted_tokens},
          {"draft_n_accepted", s.accepted_tokens},
          {"draft_rounds", s.draft_rounds},
          {"draft_acceptance_rate",
           s.drafted_tokens > 0 ? static_cast<double>(s.accepted_tokens) / s.drafted_tokens : 0.0},
          {"draft_accepted_per_round",
           s.draft_rounds > 0 ? static_cast<double>(s.accepted_tokens) / s.draft_rounds : 0.0}};
}

Json envelope(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
              bool chunk) {
  const char* object = request.endpoint == Endpoint::chat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return {{"id", rid.id},
          {"object", object},
          {"created", rid.created},
          {"model", api.model_name},
          {"system_fingerprint", std::string("cortiq-") + kVersion}};
}

}  // namespace

std::string_view finish_reason(ChoiceEnd end) {
  switch (end) {
    case ChoiceEnd::stop:
      return "stop";
    case ChoiceEnd::length:
      return "length";
    case ChoiceEnd::cancelled:
      return "cancelled";
  }
  return "stop";
}

namespace {

// Mistral's templates insist on call ids of exactly 9 letters and digits.
bool writes_mistral_ids(ToolCallSyntax syntax) {
  return syntax == ToolCallSyntax::mistral || syntax == ToolCallSyntax::mistral_args;
}

// A fresh id for a tool call: "call_" and 24 letters and digits, or 9 for
// Mistral's templates.
std::string tool_call_id(ToolCallSyntax syntax) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  constexpr std::string_view kChars =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const bool mistral = writes_mistral_ids(syntax);
  std::string id = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kChars[rng() % kChars.size()];
  return id;
}

// A chat reply with tools: its text and its calls, each with an id.
ParsedReply tool_reply(const GenerationRequest& request, const ApiContext& api,
                       const ChoiceResult& c) {
  // Read from the tokens with the text of special ones kept: some
  // syntaxes are made of them (<|channel|>, [TOOL_CALLS], ...).
  ParsedReply parsed =
      parse_tool_calls(request.tool_syntax, api.model.tokenizer().decode(c.tokens, true));
  if (parsed.calls.empty()) parsed.content = c.text;  // as generated, stop strings cut
  for (ToolCall& call : parsed.calls) {
    // The reply's own id only where it is Mistral's (unique, 9 characters).
    const bool keep = call.id.size() == 9 && writes_mistral_ids(request.tool_syntax);
    if (!keep) call.id = tool_call_id(request.tool_syntax);
  }
  return parsed;
}

Json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

std::string_view reply_finish_reason(const ParsedReply& reply, ChoiceEnd end) {
  return reply.calls.empty() || end == ChoiceEnd::cancelled ? finish_reason(end) : "tool_calls";
}

// A reply's content: null when it is calls and nothing else, as OpenAI's.
Json reply_content(const ParsedReply& reply) {
  return reply.content.empty() && !reply.calls.empty() ? Json(nullptr) : Json(reply.content);
}

// A chat streaming chunk of one choice.
Json chat_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                int32_t choice, Json delta, Json finish) {
  Json out = envelope(request, rid, api, true);
  Json c = {{"index", choice}};
  c["delta"] = std::move(delta);
  c["logprobs"] = nullptr;
  c["finish_reason"] = std::move(finish);
  out["choices"] = Json::array({std::move(c)});
  return out;
}

}  // namespace

std::vector<Json> tool_reply_chunks(const GenerationRequest& request, const ResponseId& rid,
                                    const ApiContext& api, int32_t choice,
                                    const ChoiceResult& result, bool first) {
  const ParsedReply reply = tool_reply(request, api, result);
  std::vector<Json> chunks;
  if (first || !reply.content.empty()) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    delta["content"] = reply_content(reply);
    chunks.push_back(chat_chunk(request, rid, api, choice, std::move(delta), nullptr));
  }
  for (size_t k = 0; k < reply.calls.size(); ++k) {
    Json call = tool_call_json(reply.calls[k]);
    call["index"] = k;
    Json delta = {{"tool_calls", Json::array({std::move(call)})}};
    chunks.push_back(chat_chunk(request, rid, api, choice, std::move(delta), nullptr));
  }
  chunks.push_back(chat_chunk(request, rid, api, choice, Json::object(),
                              reply_finish_reason(reply, result.end)));
  return chunks;
}

Json generation_response(const GenerationRequest& request, const ResponseId& rid,
                         const ApiContext& api, const std::vector<ChoiceResult>& choices) {
  Json out = envelope(request, rid, api, false);
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const auto& c = choices[i];
    Json choice = {{"index", i}};
    std::string_view finish = finish_reason(c.end);
    if (request.endpoint == Endpoint::chat && request.tool_syntax != ToolCallSyntax::none) {
      const ParsedReply reply = tool_reply(request, api, c);
      Json message = {{"role", "assistant"}};
      message["content"] = reply_content(reply);
      if (!reply.calls.empty()) {
        Json calls = Json::array();
        for (const ToolCall& call : reply.calls) calls.push_back(tool_call_json(call));
        message["tool_calls"] = std::move(calls);
      }
      choice["message"] = std::move(message);
      finish = reply_finish_reason(reply, c.end);
    } else if (request.endpoint == Endpoint::chat) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_json(request, api, c.logprobs);
    choice["finish_reason"] = finish;
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(request, choices);
  out["timings"] = timings_json(choices);
  return out;
}

Json text_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                int32_t choice, const std::string& text, const std::vector<TokenLogprob>& logprobs,
                size_t text_offset, bool first) {
  Json out = envelope(request, rid, api, true);
  Json c = {{"index", choice}};
  if (request.endpoint == Endpoint::chat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    delta["content"] = text;
    c["delta"] = std::move(delta);
  } else {
    c["text"] = text;
  }
  c["logprobs"] = logprobs_json(request, api, logprobs, text_offset);
  c["finish_reason"] = nullptr;
  out["choices"] = Json::array({std::move(c)});
  return out;
}

Json final_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                 int32_t choice, ChoiceEnd end) {
  if (request.endpoint == Endpoint::chat) {
    return chat_chunk(request, rid, api, choice, Json::object(), finish_reason(end));
  }
  Json out = envelope(request, rid, api, true);
  Json c = {{"index", choice}};
  c["text"] = "";
  c["logprobs"] = nullptr;
  c["finish_reason"] = finish_reason(end);
  out["choices"] = Json::array({std::move(c)});
  return out;
}

Json usage_chunk(const GenerationRequest& request, const ResponseId& rid, const ApiContext& api,
                 const std::vector<ChoiceResult>& choices) {
  Json out = envelope(request, rid, api, true);
  out["choices"] = Json::array();
  out["usage"] = usage_json(request, choices);
  out["timings"] = timings_json(choices);
  return out;
}

namespace {

std::string base64_floats(const std::vector<float>& values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian hosts only
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t b0 = bytes[i];
    const uint32_t b1 = i + 1 < bytes.size() ? bytes[i + 1] : 0;
    const uint32_t b2 = i + 2 < bytes.size() ? bytes[i + 2] : 0;
    const uint32_t triple = (b0 << 16) | (b1 << 8) | b2;
    out += kAlphabet[(triple >> 18) & 63];
    out += kAlphabet[(triple >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(triple >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[triple & 63] : '=';
  }
  return out;
}

}  // namespace

Json embedding_response(const EmbeddingRequest& request, const ApiContext& api,
                        const std::vector<std::vector<float>>& vectors, int64_t tokens) {
  Json data = Json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    Json item = {{"object", "embedding"}, {"index", i}};
    if (request.base64) {
      item["embedding"] = base64_floats(vectors[i]);
    } else {
      item["embedding"] = vectors[i];
    }
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", api.model_name},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

Json tokenize_response(const TokenizeRequest& request, const ApiContext& api) {
  Json tokens = Json::array();
  for (const TokenId id : request.ids) {
    if (request.with_pieces) {
      tokens.push_back({{"id", id}, {"piece", piece(api, id)}});
    } else {
      tokens.push_back(id);
    }
  }
  return {{"tokens", std::move(tokens)}};
}

Json models_response(const ApiContext& api, int64_t created) {
  Json model = {{"id", api.model_name},
                {"object", "model"},
                {"created", created},
                {"owned_by", "cortiq"},
                {"meta",
                 {{"n_ctx", api.context},
                  {"n_vocab", api.model.n_vocab()},
                  {"n_embd", api.model.hparams().n_embd}}}};
  return {{"object", "list"}, {"data", Json::array({std::move(model)})}};
}

Json error_body(const std::string& type, const std::string& code, const std::string& message) {
  return {{"error", {{"message", message}, {"type", type}, {"code", code}, {"param", nullptr}}}};
}

std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace cortiq::server
