// Tool calls through the openai client: a model whose chat template writes
// calls in the Hermes form (<tool_call>{...}</tool_call>, written for this
// test), random weights, and tool_choice forcing a call: the call comes back
// as message.tool_calls (and as streamed delta.tool_calls), its arguments
// pass the tool's schema (ajv), the tool's result goes back through the
// template, and the model answers. Also tool_choice none and the 400s.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import { startServer, postJson, cliPath, MODEL_ARGS } from './server_harness.mjs';

const TEMPLATE = `{%- if tools %}<|im_start|>system
You may call these tools, each as <tool_call>{"name": ..., "arguments": {...}}</tool_call>:
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" and message.tool_calls %}<|im_start|>assistant
{%- for call in message.tool_calls %}
<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`;

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['celsius', 'fahrenheit'] } },
        required: ['city', 'unit'],
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add',
      parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } }, required: ['a', 'b'] },
    },
  },
];
const ajv = new Ajv2020({ strict: false });
const VALIDATE = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));
const ASK = [{ role: 'user', content: 'What is the weather in Paris?' }];

function assertValidCall(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  const validate = VALIDATE[call.function.name];
  assert.ok(validate, `a known tool: ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${ajv.errorsText(validate.errors)}`);
}

describe('tool calls (Hermes syntax)', () => {
  let dir;
  let server;
  let client;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'cortiq-tools-test-'));
    writeFileSync(path.join(dir, 'hermes.jinja'), TEMPLATE);
    const model = path.join(dir, 'hermes.gguf');
    execFileSync(cliPath(), ['gen-model', ...MODEL_ARGS, '--chat-template', path.join(dir, 'hermes.jinja'), '-o', model],
      { stdio: ['ignore', 'ignore', 'pipe'] });
    server = await startServer({ model, args: ['--parallel', '4', '-c', '2048'] });
    client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120_000 });
  });
  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the server says which syntax it reads', () => {
    assert.match(server.stderrText(), /tool calls: the chat template writes them in the hermes syntax/);
  });

  it('tool_choice "required": a valid call, then the result goes back and the model answers', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const r = await client.chat.completions.create({
        messages: ASK, tools: TOOLS, tool_choice: 'required', parallel_tool_calls: false, seed, temperature: 1, max_tokens: 400,
      });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assertValidCall(call);
      const answer = await client.chat.completions.create({
        messages: [...ASK, choice.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}' }],
        tools: TOOLS, seed, max_tokens: 20,
      });
      assert.equal(typeof answer.choices[0].message.content, 'string');
      assert.equal(answer.choices[0].message.tool_calls, undefined);
      assert.ok(['stop', 'length'].includes(answer.choices[0].finish_reason));
      // The conversation grew by the call and its result.
      assert.ok(answer.usage.prompt_tokens > r.usage.prompt_tokens + 10, `${answer.usage.prompt_tokens} vs ${r.usage.prompt_tokens}`);
      // tool_choice "none": the template is not shown the tools, and nothing is parsed.
      const none = await client.chat.completions.create({ messages: ASK, tools: TOOLS, tool_choice: 'none', seed, max_tokens: 5 });
      assert.ok(none.usage.prompt_tokens < r.usage.prompt_tokens, `${none.usage.prompt_tokens} vs ${r.usage.prompt_tokens}`);
      assert.equal(typeof none.choices[0].message.content, 'string');
    }
  });

  it('a named function, streamed: delta.tool_calls chunks, then finish_reason tool_calls', async () => {
    for (const seed of [6, 7, 8]) {
      const stream = await client.chat.completions.create({
        messages: ASK, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'add' } },
        parallel_tool_calls: false, seed, temperature: 1, max_tokens: 400, stream: true,
      });
      const calls = [];
      let finish = null;
      let role = null;
      for await (const chunk of stream) {
        const c = chunk.choices[0];
        if (!c) continue;
        role = c.delta?.role ?? role;
        for (const part of c.delta?.tool_calls ?? []) calls[part.index] = part;
        finish = c.finish_reason ?? finish;
      }
      assert.equal(role, 'assistant');
      assert.equal(finish, 'tool_calls');
      assert.equal(calls.length, 1);
      assert.equal(calls[0].function.name, 'add');
      assertValidCall(calls[0]);
      // The round trip, streamed too.
      const answer = await client.chat.completions.create({
        messages: [...ASK, { role: 'assistant', content: null, tool_calls: [{ id: calls[0].id, type: 'function', function: calls[0].function }] },
          { role: 'tool', tool_call_id: calls[0].id, content: '5' }],
        tools: TOOLS, seed, max_tokens: 20, stream: true,
      });
      let text = '';
      for await (const chunk of answer) text += chunk.choices[0]?.delta?.content ?? '';
      assert.equal(typeof text, 'string');
    }
  });

  it('parallel calls when allowed', async () => {
    let most = 0;
    for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
      const r = await client.chat.completions.create({
        messages: ASK, tools: TOOLS, tool_choice: 'required', seed, temperature: 1, max_tokens: 800,
      });
      const choice = r.choices[0];
      if (choice.finish_reason === 'length') continue;
      assert.equal(choice.finish_reason, 'tool_calls');
      for (const call of choice.message.tool_calls) assertValidCall(call);
      most = Math.max(most, choice.message.tool_calls.length);
      assert.equal(new Set(choice.message.tool_calls.map((c) => c.id)).size, choice.message.tool_calls.length, 'distinct ids');
    }
    assert.ok(most >= 1);
  });

  it('answers 400 for what cannot be done', async () => {
    const cases = [
      [{ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }, /"nope", which is not among the 'tools'/],
      [{ tool_choice: 'required' }, /no 'tools' are given/],
      [{ tools: TOOLS, tool_choice: 'sometimes' }, /'tool_choice' must be/],
      [{ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { not: {} } } } } }],
        tool_choice: 'required' }, /tool "f": JSON schema at \/properties\/arguments\/properties\/x: "not"/],
      [{ tools: [{ type: 'function', function: {} }] }, /tools\[0\]\.function needs a 'name'/],
      [{ tools: TOOLS, tool_choice: 'required', response_format: { type: 'json_object' } }, /exclude each other/],
    ];
    for (const [fields, message] of cases) {
      const r = await postJson(server.baseURL, '/v1/chat/completions', { messages: ASK, ...fields });
      assert.equal(r.status, 400, `${JSON.stringify(fields)}: ${r.text}`);
      assert.match(r.json.error.message, message);
    }
    const completion = await postJson(server.baseURL, '/v1/completions', { prompt: 'x', tools: TOOLS });
    assert.equal(completion.status, 400);
    assert.match(completion.json.error.message, /chat completions/);
  });
});

describe('tool calls on a template without a tool syntax (ChatML)', () => {
  let server;
  before(async () => {
    server = await startServer({ args: ['-c', '2048'] });
  });
  after(async () => {
    await server?.stop();
  });

  it('auto gives text; required is a 400 that says why', async () => {
    const auto = await postJson(server.baseURL, '/v1/chat/completions', { messages: ASK, tools: TOOLS, seed: 1, max_tokens: 10 });
    assert.equal(auto.status, 200, auto.text);
    assert.equal(typeof auto.json.choices[0].message.content, 'string');
    const required = await postJson(server.baseURL, '/v1/chat/completions', { messages: ASK, tools: TOOLS, tool_choice: 'required' });
    assert.equal(required.status, 400);
    assert.match(required.json.error.message, /shows no tool-call syntax/);
  });
});
