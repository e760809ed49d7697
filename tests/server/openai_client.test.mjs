// `cortiq serve` through the official openai npm client: the response
// shapes the client relies on, streaming, the extensions (ignore_eos,
// timings), cancellation and the API key.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import {
  startServer, rawRequest, postJson, tokenize, getMetrics, waitFor, N_EMBD, TEST_ARCH, cliPath,
} from './server_harness.mjs';

const MODEL = 'test-model';
// The suites that do not depend on the test model's family run with the Llama only.
const ONCE = TEST_ARCH !== 'llama' && 'runs with the Llama test model only';
const USER = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Tell me about the sea.' }];

function makeClient(baseURL, apiKey = 'x') {
  // No retries: a failure must show as it happened, not as a later success.
  return new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
}

function assertUsage(usage, { completion } = {}) {
  assert.ok(usage, 'usage is present');
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0, `prompt_tokens ${usage.prompt_tokens}`);
  assert.ok(Number.isInteger(usage.completion_tokens) && usage.completion_tokens >= 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, 'total = prompt + completion');
  if (completion !== undefined) assert.equal(usage.completion_tokens, completion, 'completion_tokens');
}

function assertErrorBody(json, status) {
  assert.ok(json && typeof json.error === 'object', `status ${status}: an {"error": {...}} body, got ${JSON.stringify(json)}`);
  assert.equal(typeof json.error.message, 'string');
  assert.equal(typeof json.error.type, 'string');
  assert.ok(['number', 'string'].includes(typeof json.error.code), `error.code ${json.error.code}`);
}

/** Reads a chat stream: the text, the chunks, and the time of each. */
async function collectChatStream(stream) {
  const chunks = [];
  let text = '';
  for await (const chunk of stream) {
    chunks.push(chunk);
    text += chunk.choices[0]?.delta?.content ?? '';
  }
  return { text, chunks };
}

describe(`openai client (${TEST_ARCH})`, () => {
  let server;
  let client;

  before(async () => {
    server = await startServer({ args: ['--parallel', '4', '-c', '2048', '--alias', MODEL] });
    client = makeClient(server.baseURL);
  });

  after(async () => {
    const status = await server?.stop();
    assert.deepEqual(status, { code: 0, signal: null }, `clean exit on SIGTERM; stderr tail:\n${server?.stderrText().slice(-4000)}`);
  });

  it('health and models', async () => {
    const health = await rawRequest(server.baseURL, { path: '/health' });
    assert.equal(health.status, 200);
    assert.deepEqual(health.json, { status: 'ok' });

    const models = await client.models.list();
    assert.ok(models.data.some((m) => m.id === MODEL && m.object === 'model'), JSON.stringify(models.data));
  });

  it('chat completion: message, finish_reason and usage', async () => {
    const free = await client.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 12, temperature: 0 });
    assert.equal(free.object, 'chat.completion');
    assert.equal(free.choices.length, 1);
    assert.equal(free.choices[0].index, 0);
    assert.equal(free.choices[0].message.role, 'assistant');
    assert.equal(typeof free.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(free.choices[0].finish_reason), free.choices[0].finish_reason);
    assertUsage(free.usage);
    assert.ok(free.usage.completion_tokens <= 12);

    // ignore_eos gives exactly max_tokens (max_completion_tokens is the new name).
    for (const limit of [{ max_tokens: 16 }, { max_completion_tokens: 16 }]) {
      const r = await client.chat.completions.create({ model: MODEL, messages: USER, temperature: 0, ignore_eos: true, ...limit });
      assert.equal(r.choices[0].finish_reason, 'length', JSON.stringify(limit));
      assertUsage(r.usage, { completion: 16 });
      assert.equal(r.usage.prompt_tokens, free.usage.prompt_tokens, 'same messages, same prompt');
      // The server's own timings (extension).
      assert.equal(r.timings?.predicted_n, 16, `timings ${JSON.stringify(r.timings)}`);
      for (const key of ['prompt_n', 'prompt_ms', 'predicted_ms', 'ttft_ms']) {
        assert.equal(typeof r.timings[key], 'number', `timings.${key}`);
      }
    }
  });

  it('a repeated prompt resumes from its cached prefix (KV blocks, or a snapshot of the recurrent state)', async () => {
    const messages = [{ role: 'user', content: 'Tell me a long story about a dragon who lived above a village in the mountains, and about the people who lived below.' }];
    const ask = () => client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0, ignore_eos: true });
    const cold = await ask();
    const warm = await ask();
    const n = warm.usage.prompt_tokens;
    assert.ok(n > 17, `a prompt of ${n} tokens`);
    // Whole 16-position blocks before the last prompt token.
    assert.equal(warm.usage.prompt_tokens_details?.cached_tokens, Math.floor((n - 1) / 16) * 16, JSON.stringify(warm.usage));
    assert.equal(warm.usage.completion_tokens, 8);
    assert.equal(warm.choices[0].message.content, cold.choices[0].message.content);
  });

  it('streaming gives the non-streaming text, greedy and seeded', async () => {
    for (const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 1234 }]) {
      const request = { model: MODEL, messages: USER, max_tokens: 20, ignore_eos: true, ...sampling };
      const whole = await client.chat.completions.create(request);
      const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
      const { text, chunks } = await collectChatStream(stream);
      const label = JSON.stringify(sampling);
      assert.equal(text, whole.choices[0].message.content, `${label}: streamed text = whole text`);

      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id), `${label}: chunk object and id`);
      const withChoice = chunks.filter((c) => c.choices.length > 0);
      assert.equal(withChoice.at(-1).choices[0].finish_reason, 'length', `${label}: the last choice chunk has the finish_reason`);
      assert.ok(withChoice.slice(0, -1).every((c) => c.choices[0].finish_reason == null), `${label}: only the last has one`);
      // include_usage: one final chunk with usage and no choices.
      const last = chunks.at(-1);
      assert.deepEqual(last.choices, [], `${label}: the usage chunk has empty choices`);
      assertUsage(last.usage, { completion: 20 });
      for (const key of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
        assert.equal(last.usage[key], whole.usage[key], `${label}: usage.${key} streamed and not`);
      }
    }
  });

  it('seeded sampling is reproducible, and n choices', async () => {
    const request = { model: MODEL, messages: USER, max_tokens: 12, ignore_eos: true, temperature: 1.0, seed: 77 };
    const a = await client.chat.completions.create(request);
    const b = await client.chat.completions.create(request);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);

    const two = await client.chat.completions.create({ ...request, n: 2 });
    assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
    assert.ok(two.choices.every((c) => typeof c.message.content === 'string' && c.finish_reason === 'length'));
    assertUsage(two.usage, { completion: 24 }); // completion tokens of all choices, as OpenAI counts them
  });

  it('stop strings cut the text before the stop', async () => {
    const request = { model: MODEL, messages: USER, max_tokens: 40, ignore_eos: true, temperature: 0 };
    const full = (await client.chat.completions.create(request)).choices[0].message.content;
    // A stop string of printable ASCII (the model's output is random bytes
    // in places), first seen after a few characters.
    const m = /[!-~]{2,3}/.exec(full.slice(4));
    assert.ok(m, `no printable ASCII in ${JSON.stringify(full)}`);
    const stop = m[0];
    const expected = full.slice(0, full.indexOf(stop));
    for (const form of [stop, [stop, 'never-seen-stop']]) {
      const r = await client.chat.completions.create({ ...request, stop: form });
      assert.equal(r.choices[0].message.content, expected, `stop ${JSON.stringify(form)} in ${JSON.stringify(full)}`);
      assert.equal(r.choices[0].finish_reason, 'stop');
      const stream = await client.chat.completions.create({ ...request, stop: form, stream: true });
      assert.equal((await collectChatStream(stream)).text, expected, 'streamed, the stop string is held back');
    }
  });

  it('chat logprobs', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: USER, max_tokens: 8, ignore_eos: true, temperature: 0, logprobs: true, top_logprobs: 3,
    });
    const content = r.choices[0].logprobs?.content;
    assert.ok(Array.isArray(content), `logprobs.content: ${JSON.stringify(r.choices[0].logprobs)}`);
    assert.equal(content.length, 8);
    for (const entry of content) {
      assert.equal(typeof entry.token, 'string');
      assert.ok(entry.logprob <= 0, `logprob ${entry.logprob}`);
      assert.equal(entry.top_logprobs.length, 3);
      const lps = entry.top_logprobs.map((t) => t.logprob);
      assert.deepEqual(lps, [...lps].sort((x, y) => y - x), 'top_logprobs best first');
      // Greedy: the chosen token is the most likely one.
      assert.ok(Math.abs(entry.logprob - lps[0]) < 1e-4, `greedy token logprob ${entry.logprob} vs best ${lps[0]}`);
    }
  });

  it('completions: string prompt, token-id prompt, logprobs, streaming', async () => {
    const base = { model: MODEL, max_tokens: 10, ignore_eos: true, temperature: 0 };
    const r = await client.completions.create({ ...base, prompt: 'Once upon a time' });
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.choices[0].text, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    assertUsage(r.usage, { completion: 10 });

    const ids = await tokenize(server.baseURL, 'Once upon a time');
    const byIds = await client.completions.create({ ...base, prompt: ids });
    assert.equal(typeof byIds.choices[0].text, 'string');
    assertUsage(byIds.usage, { completion: 10 });
    assert.equal(byIds.usage.prompt_tokens, ids.length, 'the ids are the prompt');

    const withLogprobs = await client.completions.create({ ...base, prompt: 'Once upon a time', logprobs: 2 });
    const lp = withLogprobs.choices[0].logprobs;
    assert.ok(lp, 'choices[0].logprobs');
    assert.equal(lp.tokens.length, 10);
    assert.equal(lp.token_logprobs.length, 10);
    assert.ok(lp.token_logprobs.every((x) => x <= 0));
    assert.equal(lp.top_logprobs.length, 10);
    // A dict token -> logprob; two tokens with the same text share a key.
    assert.ok(lp.top_logprobs.every((t) => Object.keys(t).length >= 1 && Object.keys(t).length <= 2));

    const stream = await client.completions.create({ ...base, prompt: 'Once upon a time', stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, r.choices[0].text, 'streamed = whole');
  });

  it('embeddings', async () => {
    // The client's default asks for base64 and decodes it; check both forms.
    for (const encoding of [{}, { encoding_format: 'float' }]) {
      const label = JSON.stringify(encoding);
      const one = await client.embeddings.create({ model: MODEL, input: 'the sea is blue', ...encoding });
      assert.equal(one.data.length, 1, label);
      const v = one.data[0].embedding;
      assert.equal(v.length, N_EMBD, `${label}: embedding length`);
      assert.ok(v.every(Number.isFinite), `${label}: finite`);
      assert.ok(v.some((x) => x !== 0), `${label}: not all zero`);
      assert.ok(one.usage.prompt_tokens > 0);
      assert.equal(one.usage.total_tokens, one.usage.prompt_tokens);

      const two = await client.embeddings.create({ model: MODEL, input: ['the sea is blue', 'a fox ran home'], ...encoding });
      assert.deepEqual(two.data.map((d) => d.index), [0, 1], label);
      assert.ok(two.data.every((d) => d.embedding.length === N_EMBD));
      assert.notDeepEqual(two.data[0].embedding, two.data[1].embedding, `${label}: different texts, different vectors`);
      assert.deepEqual(two.data[0].embedding, v, `${label}: the same text gives the same vector`);
    }
    const ids = await tokenize(server.baseURL, 'the sea is blue');
    const byIds = await client.embeddings.create({ model: MODEL, input: ids, encoding_format: 'float' });
    assert.equal(byIds.data[0].embedding.length, N_EMBD);
    assert.equal(byIds.usage.prompt_tokens, ids.length);
  });

  it('tokenize and detokenize round trip', async () => {
    const text = 'Hello world, the fox ran.';
    const tokens = await tokenize(server.baseURL, text);
    assert.ok(tokens.length > 0 && tokens.every(Number.isInteger));
    const r = await postJson(server.baseURL, '/detokenize', { tokens });
    assert.equal(r.status, 200);
    assert.equal(r.json.content.trim(), text);
  });

  it('server errors reach the client as APIError with the JSON body', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'wizard', content: 'hi' }], max_tokens: 4 }),
      (e) => {
        assert.ok(e instanceof OpenAI.APIError, String(e));
        assert.equal(e.status, 400);
        assert.equal(typeof e.error?.message, 'string', JSON.stringify(e.error));
        return true;
      });
  });

  it('an aborted stream frees its sequence and KV blocks', async () => {
    const cancelled = (m) => m.get('cortiq_requests_cancelled_total') ?? 0;
    const before = cancelled(await getMetrics(server.baseURL));
    const stream = await client.chat.completions.create({
      model: MODEL, messages: USER, max_tokens: 1500, ignore_eos: true, temperature: 0.8, seed: 5, stream: true,
    });
    let contentChunks = 0;
    let finished = false;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.finish_reason) finished = true;
      if (chunk.choices[0]?.delta?.content && ++contentChunks === 3) {
        stream.controller.abort();
        break;
      }
    }
    assert.equal(finished, false, 'aborted before the end');

    let last;
    const freed = await waitFor(async () => {
      last = await getMetrics(server.baseURL);
      return last.get('cortiq_running_sequences') === 0 && last.get('cortiq_kv_blocks_used') === 0 && cancelled(last) > before;
    }, { timeoutMs: 10_000 });
    assert.ok(freed, `after the abort: running ${last.get('cortiq_running_sequences')}, kv used ${last.get('cortiq_kv_blocks_used')}, ` +
      `cancelled ${cancelled(last)} (before ${before})`);

    // And the server goes on serving.
    const r = await client.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 4, ignore_eos: true });
    assertUsage(r.usage, { completion: 4 });
  });

  it('/metrics has every cortiq metric', async () => {
    const text = (await rawRequest(server.baseURL, { path: '/metrics' })).text;
    const names = ['cortiq_requests_total', 'cortiq_prompt_tokens_total', 'cortiq_generated_tokens_total',
      'cortiq_prefix_cache_hit_tokens_total', 'cortiq_prefill_tokens_per_second', 'cortiq_decode_tokens_per_second',
      'cortiq_queue_length', 'cortiq_running_sequences', 'cortiq_kv_blocks_used', 'cortiq_kv_blocks_cached',
      'cortiq_kv_blocks_free', 'cortiq_requests_cancelled_total', 'cortiq_state_snapshots'];
    for (const name of names) assert.match(text, new RegExp(`^${name}(\\{[^}]*\\})? `, 'm'), `${name} in /metrics`);
    const m = await getMetrics(server.baseURL);
    assert.ok(m.get('cortiq_requests_total{status="200"}') > 0, 'requests_total{status="200"}');
    assert.ok(m.get('cortiq_prompt_tokens_total') > 0);
    assert.ok(m.get('cortiq_generated_tokens_total') > 0);
    assert.ok(m.get('cortiq_kv_blocks_free') > 0);
    // The recurrent models keep snapshots of their state (the repeated prompt above resumed from one).
    const withState = ['lfm2', 'mamba2'].includes(TEST_ARCH);
    assert.equal(m.get('cortiq_state_snapshots') > 0, withState, `cortiq_state_snapshots ${m.get('cortiq_state_snapshots')}`);
  });
});

describe('api key', { skip: ONCE }, () => {
  let server;

  before(async () => {
    server = await startServer({ args: ['--api-key', 'secret', '--alias', MODEL] });
  });

  after(async () => {
    const status = await server?.stop();
    assert.deepEqual(status, { code: 0, signal: null }, `clean exit on SIGTERM; stderr tail:\n${server?.stderrText().slice(-4000)}`);
  });

  it('401 without or with a wrong key, on every endpoint but /health', async () => {
    const requests = [
      { method: 'GET', path: '/v1/models' },
      { method: 'GET', path: '/metrics' },
      { method: 'POST', path: '/v1/chat/completions', body: { model: MODEL, messages: USER, max_tokens: 2 } },
      { method: 'POST', path: '/v1/completions', body: { model: MODEL, prompt: 'hi', max_tokens: 2 } },
      { method: 'POST', path: '/v1/embeddings', body: { model: MODEL, input: 'hi' } },
      { method: 'POST', path: '/tokenize', body: { content: 'hi' } },
      { method: 'POST', path: '/detokenize', body: { tokens: [1, 2] } },
    ];
    for (const { method, path, body } of requests) {
      for (const auth of [undefined, 'Bearer wrong', 'secret', 'Basic secret']) {
        const headers = { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) };
        const r = await rawRequest(server.baseURL, { method, path, headers, body: body && JSON.stringify(body) });
        assert.equal(r.status, 401, `${method} ${path} with authorization ${auth}: ${r.text ?? r.error}`);
        assertErrorBody(r.json, r.status);
      }
      const ok = await rawRequest(server.baseURL, {
        method, path, headers: { 'content-type': 'application/json', authorization: 'Bearer secret' }, body: body && JSON.stringify(body),
      });
      assert.equal(ok.status, 200, `${method} ${path} with the key: ${ok.text ?? ok.error}`);
    }
    const health = await rawRequest(server.baseURL, { path: '/health' });
    assert.equal(health.status, 200);
    assert.deepEqual(health.json, { status: 'ok' });
  });

  it('through the client', async () => {
    await assert.rejects(makeClient(server.baseURL, 'wrong').models.list(), (e) => e.status === 401);
    const models = await makeClient(server.baseURL, 'secret').models.list();
    assert.ok(models.data.some((m) => m.id === MODEL));
    const r = await makeClient(server.baseURL, 'secret').chat.completions.create({ model: MODEL, messages: USER, max_tokens: 3, ignore_eos: true });
    assertUsage(r.usage, { completion: 3 });
  });
});

// A BERT model (a text encoder, pooled on its first token as its file says):
// /v1/embeddings gives `cortiq embed --normalize`'s vector, and the
// completion endpoints answer 400 saying why.
describe('encoder model', { skip: ONCE }, () => {
  let server;
  let dir;
  let model;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'cortiq-bert-'));
    model = path.join(dir, 'bert.gguf');
    execFileSync(cliPath(), ['gen-model', '--arch', 'bert', '--embd', '64', '--layers', '2', '--heads', '4',
      '--kv-heads', '4', '--ff', '128', '--seed', '3', '-o', model], { stdio: ['ignore', 'ignore', 'pipe'] });
    server = await startServer({ model, args: ['--alias', MODEL] });
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('embeds as cortiq embed does and refuses completions', async () => {
    const client = makeClient(server.baseURL);
    const text = 'the sea is blue';
    const r = await client.embeddings.create({ model: MODEL, input: text, encoding_format: 'float' });
    const cli = JSON.parse(execFileSync(cliPath(), ['embed', '-m', model, '-p', text, '--normalize', '--json'],
      { stdio: ['ignore', 'pipe', 'ignore'] }).toString());
    assert.equal(r.data[0].embedding.length, 64);
    assert.equal(r.usage.prompt_tokens, cli.tokens);
    r.data[0].embedding.forEach((x, i) => assert.ok(Math.abs(x - cli.embedding[i]) <= 1e-6, `dimension ${i}`));
    for (const path_ of ['/v1/completions', '/v1/chat/completions']) {
      const body = path_ === '/v1/completions' ? { model: MODEL, prompt: 'hi', max_tokens: 2 }
        : { model: MODEL, messages: USER, max_tokens: 2 };
      const e = await postJson(server.baseURL, path_, body);
      assert.equal(e.status, 400, path_);
      assertErrorBody(e.json, e.status);
      assert.match(e.json.error.message, /text encoder/);
    }
  });
});
