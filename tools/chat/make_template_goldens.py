#!/usr/bin/env python3
"""Renders chat templates with real Jinja2, configured the way Hugging Face
transformers configures it, and writes the results as goldens for
tests/test_chat_template.cpp.

    python3 tools/chat/make_template_goldens.py [--templates DIR] [--out DIR]

Writes OUT/conversation.json (the messages), OUT/conversation-tools.json
(messages with a tool call and result, plus the tool list),
OUT/conversation-parts.json (content as typed parts), OUT/manifest.json (which
template and extra variables each golden used) and OUT/NAME.txt (the exact
rendered prompt). The C++ test needs no Python: the outputs are committed.
"""

import argparse
import datetime
import json
import os

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

# A fixed clock so strftime_now() is reproducible; the C++ test uses the
# same instant (2025-01-15 12:00:00 UTC).
FIXED_NOW = datetime.datetime(2025, 1, 15, 12, 0, 0)

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello! What is 2+2?"},
    {"role": "assistant", "content": "2+2 equals 4."},
    {"role": "user", "content": "Thanks. And 3*3? Answer in \"one\" word, s'il vous plaît."},
]

# A tool-calling exchange in the OpenAI shape transformers expects
# (arguments as a mapping).
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}]

TOOL_CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call00001", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
    {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"temp_c\": 18}"},
    {"role": "assistant", "content": "It is 18 °C in Paris."},
    {"role": "user", "content": "Thanks!"},
]

# Content given as a list of typed parts, as OpenAI-style clients send it.
PARTS_CONVERSATION = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
]

# Families whose templates join text parts; their goldens are NAME-parts.txt.
PARTS_FAMILIES = ["qwen3.5", "mistral-small-3.2", "kimi-k2", "glm-4.6", "minimax-m2", "ministral-3"]

# Families whose templates render tools; their goldens are NAME-tools.txt.
TOOL_FAMILIES = [
    "qwen2.5", "qwen3-thinking", "llama-3.1", "llama-3.2", "llama-3.3", "mistral-nemo",
    "mistral-small-3.2", "hermes-3", "command-r-plus", "command-r7b", "gpt-oss-120b",
    "smollm3", "granite-3.3", "granite-4.0", "kimi-k2", "glm-4.6", "minimax-m2",
    "qwen3-coder", "deepseek-v3.1", "functionary-3.2", "lfm2", "nemotron-nano-v2",
    "qwen3.5", "gemma-4", "seed-oss",
]

# (golden name, template file, extra template variables[, "no_system"])
FAMILIES = [
    ("qwen2.5", "Qwen-Qwen2.5-7B-Instruct.jinja", {}),
    ("qwen3-thinking", "Qwen-Qwen3-0.6B.jinja", {"enable_thinking": True}),
    ("qwen3-no-thinking", "Qwen-Qwen3-0.6B.jinja", {"enable_thinking": False}),
    ("qwq", "Qwen-QwQ-32B.jinja", {}),
    ("llama-3.1", "meta-llama-Llama-3.1-8B-Instruct.jinja", {}),
    ("llama-3.2", "meta-llama-Llama-3.2-3B-Instruct.jinja", {}),
    ("llama-3.3", "meta-llama-Llama-3.3-70B-Instruct.jinja", {}),
    ("mistral-nemo", "mistralai-Mistral-Nemo-Instruct-2407.jinja", {}),
    ("mistral-small-3.2", "Mistral-Small-3.2-24B-Instruct-2506.jinja", {}),
    # Gemma 2 refuses a system message; its golden drops it.
    ("gemma-2", "google-gemma-2-2b-it.jinja", {}, "no_system"),
    ("phi-3.5", "microsoft-Phi-3.5-mini-instruct.jinja", {}),
    ("deepseek-r1-distill-llama", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", {}),
    ("deepseek-r1-distill-qwen", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", {}),
    ("deepseek-v3.1", "deepseek-ai-DeepSeek-V3.1.jinja", {}),
    ("deepseek-v3.1-thinking", "deepseek-ai-DeepSeek-V3.1.jinja", {"thinking": True}),
    ("command-r-plus", "CohereForAI-c4ai-command-r-plus-tool_use.jinja", {}),
    ("command-r7b", "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", {}),
    ("gpt-oss-120b", "openai-gpt-oss-120b.jinja", {}),
    ("smollm3", "HuggingFaceTB-SmolLM3-3B.jinja", {}),
    ("smollm3-no-think", "HuggingFaceTB-SmolLM3-3B.jinja", {"enable_thinking": False}),
    ("granite-3.3", "ibm-granite-granite-3.3-2B-Instruct.jinja", {}),
    ("granite-4.0", "ibm-granite-granite-4.0.jinja", {}),
    ("hermes-3", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", {}),
    ("kimi-k2", "moonshotai-Kimi-K2.jinja", {}),
    ("glm-4.6", "GLM-4.6.jinja", {}),
    ("minimax-m2", "MiniMax-M2.jinja", {}),
    ("nemotron-nano-v2", "NVIDIA-Nemotron-Nano-v2.jinja", {}),
    ("lfm2", "LFM2-8B-A1B.jinja", {}),
    ("qwen3-coder", "Qwen3-Coder.jinja", {}),
    ("functionary-3.2", "meetkai-functionary-medium-v3.2.jinja", {}),
    ("apertus", "Apertus-8B-Instruct.jinja", {}),
    ("qwen3.5", "Qwen3.5-4B.jinja", {}),
    ("ministral-3", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", {}),
    ("gemma-4", "google-gemma-4-31B-it.jinja", {}),
    ("seed-oss", "ByteDance-Seed-OSS.jinja", {}),
]


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks assistant
    text with it; for rendering it is a plain block."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # What transformers installs in place of Jinja's HTML-escaping tojson.
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--templates", default=os.path.join(repo, "..", "shared", "data", "chat-templates"))
    ap.add_argument("--out", default=os.path.join(repo, "tests", "golden", "chat"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = make_environment()
    manifest = []
    jobs = [(name, file, extra, options, "basic") for name, file, extra, *options in FAMILIES]
    jobs += [(name + "-tools", file, extra, options, "tools")
             for name, file, extra, *options in FAMILIES if name in TOOL_FAMILIES]
    jobs += [(name + "-parts", file, extra, options, "parts")
             for name, file, extra, *options in FAMILIES if name in PARTS_FAMILIES]
    conversations = {"basic": CONVERSATION, "tools": TOOL_CONVERSATION, "parts": PARTS_CONVERSATION}
    for name, file, extra, options, conversation in jobs:
        no_system = "no_system" in options
        base = conversations[conversation]
        messages = [m for m in base if not (no_system and m["role"] == "system")]
        if conversation == "tools":
            extra = dict(extra, tools=TOOLS)
        path = os.path.join(args.templates, file)
        if not os.path.exists(path):
            print(f"skip {name}: {file} missing")
            continue
        with open(path, encoding="utf-8") as f:
            source = f.read()
        try:
            text = env.from_string(source).render(
                messages=messages, add_generation_prompt=True,
                bos_token="<s>", eos_token="</s>", **extra)
        except Exception as e:  # a template that refuses this conversation
            print(f"skip {name}: {type(e).__name__}: {e}")
            continue
        with open(os.path.join(args.out, name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        extra.pop("tools", None)
        manifest.append({"name": name, "template": file, "extra": extra, "no_system": no_system,
                         "conversation": conversation})
        print(f"wrote {name} ({len(text)} chars)")
    with open(os.path.join(args.out, "conversation.json"), "w", encoding="utf-8") as f:
        json.dump(CONVERSATION, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "conversation-tools.json"), "w", encoding="utf-8") as f:
        json.dump({"messages": TOOL_CONVERSATION, "tools": TOOLS}, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "conversation-parts.json"), "w", encoding="utf-8") as f:
        json.dump({"messages": PARTS_CONVERSATION}, f, ensure_ascii=False, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
