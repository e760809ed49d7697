#include "chat/chat_template.hpp"

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "chat/jinja_json.hpp"

namespace cortiq {

namespace {

constexpr std::string_view kChatML =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// strftime_now pinned to one instant (UTC), for reproducible prompts; the
// interpreter's builtin reports the current local time.
jinja::Value fixed_strftime(std::time_t now) {
  return jinja::Value(jinja::Function([now](jinja::CallArgs& a) {
    if (a.positional.empty()) throw Error("strftime_now() needs a format");
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[256];
    size_t n = std::strftime(buf, sizeof buf, a.positional[0].str().c_str(), &tm);
    return jinja::Value(std::string(buf, n));
  }));
}

}  // namespace

ChatTemplate::ChatTemplate(std::string_view source) : template_(source) {}

std::string ChatTemplate::render(const ChatInputs& in) const {
  jinja::Dict vars;
  vars.set("messages", in.messages);
  if (!in.tools.is_undefined()) vars.set("tools", in.tools);
  vars.set("add_generation_prompt", jinja::Value(in.add_generation_prompt));
  vars.set("bos_token", jinja::Value(in.bos_token));
  vars.set("eos_token", jinja::Value(in.eos_token));
  if (in.now) vars.set("strftime_now", fixed_strftime(*in.now));
  for (const auto& [k, v] : in.extra) vars.set(jinja::Value(k), v);
  return template_.render(vars);
}

std::string_view chatml_template() {
  return kChatML;
}

jinja::Value messages_from_json(std::string_view json) {
  return jinja::value_from_json(parse_json(json));
}

}  // namespace cortiq
