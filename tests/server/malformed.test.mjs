// `cortiq serve` against malformed requests: each must get a 4xx answer
// with an OpenAI-style JSON error body, never a 5xx or a dropped
// connection, and the server must go on serving. The cases are generated
// from a seeded PRNG, so every run sends the same bytes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, rawRequest, postJson, prng, wordText, N_CTX } from './server_harness.mjs';

const MODEL = 'test-model';
const VOCAB = 612; // gen-model's built-in vocabulary: ids 0..611

// One valid body per POST endpoint; the cases break them.
const VALID = {
  '/v1/chat/completions': { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 },
  '/v1/completions': { model: MODEL, prompt: 'hi', max_tokens: 4 },
  '/v1/embeddings': { model: MODEL, input: 'hi' },
  '/tokenize': { content: 'hi' },
  '/detokenize': { tokens: [1, 2, 3] },
};
const ENDPOINTS = Object.keys(VALID);

// Values of the wrong type or out of range for the sampling fields that the
// chat and completion endpoints share.
const SAMPLING_CASES = {
  max_tokens: [-1, -100, 1e30, '5', true, [], {}],
  max_completion_tokens: [-1, 1e30, '5', {}],
  temperature: ['hot', [], {}, true],
  top_p: ['x', {}, []],
  top_k: ['x', [], {}],
  min_p: ['x', {}],
  seed: ['x', {}, []],
  stop: [{}, 5, [5], [{}], [[]], [null]],
  presence_penalty: ['x', []],
  frequency_penalty: ['x', {}],
  logit_bias: [[], 'x', 5, { abc: 1 }, { '1': 'x' }, { '1': {} }, { '': 1 }, { '1.5': 1 }],
  n: [0, -1, '2', {}, 1e30],
  stream: ['yes', 1, {}],
  stream_options: ['x', 5, { include_usage: 'yes' }],
  ignore_eos: ['true', 1, {}],
  model: [5, {}, []],
};

// Token ids that are not in the vocabulary, or not ids at all (an array
// of strings is a valid prompt or input: a batch).
const BAD_IDS = [[-1], [VOCAB], [100000], [2 ** 31], [2 ** 53], [1e30], [1.5], [null], [{}], [[[1]]], [1, 'a'], ['a', 1]];

// Bodies that JSON.parse accepts but that are not objects.
const NOT_OBJECTS = ['null', 'true', 'false', '1', '-1', '"text"', '[]', '[1,2]', '[{}]'];

// Syntax errors: none of these is JSON.
const NOT_JSON = ['{', '}', '{"a":}', "{'a':1}", '{"a":1,}', '{a:1}', '{"a" 1}', 'nul', '{"a":tru}', '{"a":"\\x"}',
  '{"a":"no end}', '{"a":1}}', '{"a":1} x', '\u0000', 'NaN', '{"a":NaN}', '{"a":Infinity}', '{"a":-Infinity}',
  '{"a":01}', '{"a":-}', '{"a":1e}', '{"a":.5}', '{"a":"tab\there"}', '{"a":"\\u12"}', '{"a":[1,2}', '{"a":{"b":1]}',
  '{,}', '{"a":1 "b":2}', '\t \n', ' '];

// Texts longer than the context (N_CTX tokens; each word is 1+ tokens).
const OVERFLOW_TEXT = wordText(N_CTX + 200, 7);
const OVERFLOW_IDS = Array.from({ length: N_CTX + 200 }, (_, i) => 10 + (i % 500));

/** Returns {name, path, body: string|Buffer, headers?} cases, every one invalid. */
function invalidCases() {
  const cases = [];
  const add = (name, path, body, headers) => cases.push({ name, path, body, headers });
  const json = (value) => JSON.stringify(value);
  const random = prng(20240601);

  for (const path of ENDPOINTS) {
    const valid = json(VALID[path]);
    add('empty body', path, '');
    for (const text of NOT_OBJECTS) add(`not an object: ${text}`, path, text);
    for (const text of NOT_JSON) add(`not JSON: ${JSON.stringify(text)}`, path, text);
    // A valid request with something after it, or a syntax error inside it.
    for (const tail of ['x', ',', '{}', ']', '\u0000', '\u0000garbage{']) add(`valid + ${JSON.stringify(tail)}`, path, valid + tail);
    add('a value replaced by NaN', path, valid.replace(/:("hi"|\[1,2,3\])/, ':NaN'));
    // Every truncation: a proper prefix of an object is never JSON.
    for (let n = 1; n < valid.length; n++) add(`truncated to ${n} bytes`, path, valid.slice(0, n));
    // Random bytes (those that happen to be a JSON object are skipped).
    for (let i = 0; i < 24; i++) {
      const bytes = Buffer.from(Array.from({ length: 1 + Math.floor(random() * 300) }, () => Math.floor(random() * 256)));
      let isObject = false;
      try { const v = JSON.parse(bytes.toString('utf8')); isObject = v !== null && typeof v === 'object' && !Array.isArray(v); } catch { /* not JSON */ }
      if (!isObject) add(`random bytes #${i} (${bytes.length})`, path, bytes);
    }
    // Deep nesting: a recursive parser without a depth limit overflows its stack.
    add('100,000 [ unclosed', path, '['.repeat(100_000));
    add('100,000 [ closed', path, '['.repeat(100_000) + ']'.repeat(100_000));
    add('50,000 nested objects', path, '{"a":'.repeat(50_000) + '1' + '}'.repeat(50_000));
    add('100,000 { unclosed', path, '{"a":'.repeat(100_000));
    const field = Object.keys(VALID[path]).at(-1);
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    add(`100,000 [ as ${field}`, path, json({ ...VALID[path], [field]: 'DEEP' }).replace('"DEEP"', deep));
    // (A valid body under another content type is served, not refused:
    // `curl -d` sends application/x-www-form-urlencoded, and llama.cpp's
    // server accepts it too.)
    // A body that is not UTF-8 at all (UTF-16).
    add('UTF-16 body', path, Buffer.from(`\ufeff${valid}`, 'utf16le'));
  }

  const chat = VALID['/v1/chat/completions'];
  const completions = VALID['/v1/completions'];
  for (const [path, base] of [['/v1/chat/completions', chat], ['/v1/completions', completions]]) {
    for (const [field, values] of Object.entries(SAMPLING_CASES)) {
      if (field === 'max_completion_tokens' && path === '/v1/completions') continue; // a chat field only
      for (const value of values) add(`${field}: ${json(value)}`, path, json({ ...base, [field]: value }));
    }
    // Huge numbers written out (beyond double, beyond int64).
    for (const literal of ['1e400', '123456789012345678901234567890', '-1e400', '1'.repeat(5000)]) {
      add(`max_tokens: ${literal.slice(0, 40)}`, path, json(base).replace(/"max_tokens":4/, `"max_tokens":${literal}`));
    }
  }

  const messages = [
    undefined, null, 'hi', 5, {}, [5], ['hi'], [null], [[]], [{}],
    [{ content: 'hi' }], [{ role: 'wizard', content: 'hi' }], [{ role: 5, content: 'hi' }], [{ role: null, content: 'hi' }],
    [{ role: 'user', content: 5 }], [{ role: 'user', content: {} }], [{ role: 'user', content: true }],
    [{ role: 'user', content: [5] }], [{ role: 'user', content: [{ type: 'text', text: 5 }] }],
    [{ role: 'user', content: 'hi' }, 7], [{ role: ['user'], content: 'hi' }],
  ];
  for (const value of messages) add(`messages: ${json(value)}`, '/v1/chat/completions', json({ ...chat, messages: value }));
  for (const value of ['x', {}, -1]) add(`logprobs: ${json(value)}`, '/v1/chat/completions', json({ ...chat, logprobs: value }));
  for (const value of ['x', -1, {}]) add(`top_logprobs: ${json(value)}`, '/v1/chat/completions', json({ ...chat, logprobs: true, top_logprobs: value }));
  add('context overflow', '/v1/chat/completions', json({ ...chat, messages: [{ role: 'user', content: OVERFLOW_TEXT }] }));

  const prompts = [undefined, null, 5, {}, true, [[[1]]], [['a']], [{}], ...BAD_IDS];
  for (const value of prompts) add(`prompt: ${json(value)}`, '/v1/completions', json({ ...completions, prompt: value }));
  for (const value of ['x', -1, {}, [1]]) add(`logprobs: ${json(value)}`, '/v1/completions', json({ ...completions, logprobs: value }));
  add('context overflow (text)', '/v1/completions', json({ ...completions, prompt: OVERFLOW_TEXT }));
  add('context overflow (ids)', '/v1/completions', json({ ...completions, prompt: OVERFLOW_IDS }));

  const embeddings = VALID['/v1/embeddings'];
  for (const value of [undefined, null, 5, {}, true, [], [[[1]]], [{}], [null], ...BAD_IDS]) {
    add(`input: ${json(value)}`, '/v1/embeddings', json({ ...embeddings, input: value }));
  }
  add('model: 5', '/v1/embeddings', json({ ...embeddings, model: 5 }));
  add('context overflow', '/v1/embeddings', json({ ...embeddings, input: OVERFLOW_TEXT }));

  for (const value of [undefined, null, 5, {}, [], ['hi']]) add(`content: ${json(value)}`, '/tokenize', json({ content: value }));
  for (const value of [undefined, null, 'abc', 5, {}, ['a'], ...BAD_IDS]) add(`tokens: ${json(value)}`, '/detokenize', json({ tokens: value }));
  return cases;
}

/** What is wrong with an answer to an invalid request, or null if nothing. */
function problemWith(answer) {
  if (answer.error && answer.status === undefined) return `no answer: ${answer.error.message}`;
  if (answer.error) return `status ${answer.status}, then ${answer.error.message}`;
  if (answer.status < 400 || answer.status >= 500) return `status ${answer.status}`;
  const error = answer.json?.error;
  if (typeof error !== 'object' || error === null) return `status ${answer.status}, body is not {"error": {...}}`;
  if (typeof error.message !== 'string' || !error.message) return `status ${answer.status}, error.message ${JSON.stringify(error.message)}`;
  if (typeof error.type !== 'string') return `status ${answer.status}, error.type ${JSON.stringify(error.type)}`;
  if (!['number', 'string'].includes(typeof error.code)) return `status ${answer.status}, error.code ${JSON.stringify(error.code)}`;
  if (!/^application\/json\b/.test(answer.headers['content-type'] ?? '')) return `status ${answer.status}, content-type ${answer.headers['content-type']}`;
  return null;
}

function show(body) {
  const text = Buffer.isBuffer(body) ? `<${body.length} bytes> ${body.subarray(0, 60).toString('hex')}` : JSON.stringify(body);
  return text.length > 160 ? `${text.slice(0, 160)}... (${body.length} bytes)` : text;
}

async function assertStillServing(baseURL) {
  const health = await rawRequest(baseURL, { path: '/health' });
  assert.equal(health.status, 200, `/health: ${health.text ?? health.error}`);
  assert.deepEqual(health.json, { status: 'ok' });
  const r = await postJson(baseURL, '/v1/chat/completions', { ...VALID['/v1/chat/completions'], ignore_eos: true });
  assert.equal(r.status, 200, `a valid request: ${r.text ?? r.error}`);
  assert.equal(r.json.usage.completion_tokens, 4);
}

describe('malformed requests', () => {
  let server;

  before(async () => {
    server = await startServer({ args: ['--parallel', '2', '-c', String(N_CTX), '--alias', MODEL] });
  });

  after(async () => {
    const status = await server?.stop();
    assert.deepEqual(status, { code: 0, signal: null }, `clean exit on SIGTERM; stderr tail:\n${server?.stderrText().slice(-4000)}`);
  });

  it('every invalid body gets a 4xx JSON error', async () => {
    const cases = invalidCases();
    assert.ok(cases.length >= 500, `${cases.length} cases`);
    const failures = [];
    const statuses = new Map();
    for (const [i, c] of cases.entries()) {
      // Every other body is sent chunked: the server must parse both framings.
      const chunked = i % 2 === 1;
      if (chunked) c.name += ' (chunked)';
      const answer = await rawRequest(server.baseURL, {
        method: 'POST', path: c.path, body: c.body, chunked, headers: { 'content-type': 'application/json', ...c.headers },
      });
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      const problem = problemWith(answer);
      if (problem) {
        failures.push(`POST ${c.path} ${c.name}: ${problem}\n    body ${show(c.body)}\n    answer ${String(answer.text ?? '').slice(0, 300)}`);
      }
      if (answer.error) {
        // A dropped connection may be a crash: give the exit a moment to show.
        await Promise.race([server.exited, new Promise((r) => setTimeout(r, 1000))]);
      }
      if (server.child.exitCode !== null || server.child.signalCode !== null) {
        // Everything after a crash would fail the same way: report the cause.
        failures.push(`the server died (exit code ${server.child.exitCode}, signal ${server.child.signalCode}) on the request above; ` +
          `stderr tail:\n${server.stderrText().slice(-3000)}`);
        break;
      }
    }
    console.log(`${cases.length} invalid requests; statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    assert.ok(failures.length === 0, `${failures.length} of ${cases.length} answers were wrong:\n${failures.slice(0, 40).join('\n')}`);
    await assertStillServing(server.baseURL);
  });

  it('unknown routes are 404, wrong methods 405', async () => {
    const checks = [
      ['GET', '/v1/nothing', 404], ['POST', '/v1/nothing', 404], ['GET', '/index.html', 404], ['GET', '/v2/models', 404],
      ['POST', '/', 405], // GET / is the chat page
      ['GET', '/v1/chat/completions', 405], ['PUT', '/v1/completions', 405], ['DELETE', '/v1/embeddings', 405],
      ['GET', '/tokenize', 405], ['POST', '/health', 405], ['POST', '/v1/models', 405], ['POST', '/metrics', 405],
    ];
    const failures = [];
    for (const [method, path, expected] of checks) {
      const answer = await rawRequest(server.baseURL, { method, path, headers: { 'content-type': 'application/json' }, body: method === 'GET' ? undefined : '{}' });
      const problem = answer.status !== expected ? `status ${answer.status}` : problemWith(answer);
      if (problem) failures.push(`${method} ${path}: expected ${expected}, ${problem}: ${String(answer.text ?? '').slice(0, 200)}`);
    }
    assert.deepEqual(failures, []);
    await assertStillServing(server.baseURL);
  });

  it('a body over the size limit gets 413', async () => {
    // 20 MB of prompt text in an otherwise valid request, with a
    // Content-Length and chunked (where only the bytes read tell the size).
    const body = `{"model":"${MODEL}","max_tokens":1,"messages":[{"role":"user","content":"${'a'.repeat(20 << 20)}"}]}`;
    const failures = [];
    for (const chunked of [false, true]) {
      const answer = await rawRequest(server.baseURL, {
        method: 'POST', path: '/v1/chat/completions', headers: { 'content-type': 'application/json' }, body, chunked,
      });
      const detail = `20 MB body${chunked ? ', chunked' : ''}: status ${answer.status}, write error ${answer.error?.message}, ` +
        `body ${String(answer.text ?? '').slice(0, 200)}`;
      console.log(detail);
      if (answer.status !== 413 || problemWith({ ...answer, error: undefined })) failures.push(detail);
    }
    assert.deepEqual(failures, []);
    await assertStillServing(server.baseURL);
  });
});
