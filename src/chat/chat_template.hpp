// Chat templates: turns a conversation into the prompt text a model was
// trained on, by running the model's `tokenizer.chat_template` (Jinja) the
// way Hugging Face transformers does (trim_blocks, lstrip_blocks, its
// `tojson`, raise_exception, strftime_now).
//
//   ChatTemplate tmpl(gguf_chat_template);           // parses once
//   ChatInputs in;
//   in.messages = messages_from_json(R"([{"role":"user","content":"Hi"}])");
//   in.bos_token = "<s>";
//   std::string prompt = tmpl.render(in);
//
// A model without a template gets ChatML (chatml_template()); the caller
// should say so with LOG_WARN.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_value.hpp"

namespace cortiq {

struct ChatInputs {
  // A list of dicts: {role, content} where content is text or a list of
  // parts ({type: "text", text}), plus tool_calls / tool_call_id / name as
  // the OpenAI API sends them.
  jinja::Value messages = jinja::Value(jinja::List{});
  // Tool definitions (a list), or undefined when the request has none.
  jinja::Value tools;
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // Extra template variables, e.g. {"enable_thinking", false}.
  std::vector<std::pair<std::string, jinja::Value>> extra;
  // The instant strftime_now() reports (formatted as UTC), for reproducible
  // prompts; the current local time when unset.
  std::optional<std::time_t> now;
};

class ChatTemplate {
 public:
  // Throws cortiq::Error("template line N: ...") on a syntax error.
  explicit ChatTemplate(std::string_view source);

  // Throws cortiq::Error naming the template line on a render failure,
  // including the template's own raise_exception().
  std::string render(const ChatInputs& inputs) const;

 private:
  jinja::Template template_;
};

// The ChatML template (<|im_start|>role\ncontent<|im_end|>), the fallback
// for models that ship no template.
std::string_view chatml_template();

// Parses a JSON array of messages (or any JSON document) into a value the
// template can read. Throws cortiq::Error on malformed JSON.
jinja::Value messages_from_json(std::string_view json);

}  // namespace cortiq
