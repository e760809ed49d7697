// The failure model over HTTP: a server started with CORTIQ_FAULT fails one
// forward pass (a prefill chunk, a decode step, its working memory, a KV
// block) or one write to a client. Each failure must reach the client (a
// 500 with an OpenAI-style error object, or an SSE error event), never as a
// cancellation; /metrics must show every KV block back and the failure
// counted; and the same request again must get a fresh server's answer,
// logprobs included, bit for bit.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, postStream, getMetrics, waitFor } from './server_harness.mjs';

// Two parallel slots, prompts longer than a step so that prefill takes
// several passes.
const ARGS = ['--parallel', '2', '--chunk', '8'];
const REQUEST = {
  model: 'test-model',
  prompt: 'The quick brown fox jumps over the lazy dog while the cat watches from the warm window sill',
  max_tokens: 12,
  temperature: 0,
  logprobs: 2,
  ignore_eos: true,
};

// A response's text and logprobs, from a plain or a streamed answer.
function answerOf(json) {
  const choice = json.choices[0];
  return { text: choice.text, logprobs: choice.logprobs?.token_logprobs };
}
function streamedAnswer(events) {
  let text = '';
  const logprobs = [];
  for (const event of events) {
    const choice = event.choices?.[0];
    if (!choice) continue;
    text += choice.text ?? '';
    logprobs.push(...(choice.logprobs?.token_logprobs ?? []));
  }
  return { text, logprobs };
}

async function settledMetrics(baseURL) {
  const ok = await waitFor(async () => {
    const m = await getMetrics(baseURL);
    return m.get('cortiq_kv_blocks_used') === 0 && m.get('cortiq_running_sequences') === 0 ? m : null;
  });
  assert.ok(ok, 'KV blocks or sequences still held after the request ended');
  return ok;
}

describe('injected faults', () => {
  let expected;
  before(async () => {
    const server = await startServer({ args: ARGS });
    try {
      const r = await postJson(server.baseURL, '/v1/completions', REQUEST);
      assert.equal(r.status, 200, r.text);
      expected = answerOf(r.json);
      assert.equal(expected.logprobs.length, REQUEST.max_tokens);
    } finally {
      await server.stop();
    }
  });

  for (const [spec, message] of [['prefill:2', 'injected fault: prefill'], ['decode:3', 'injected fault: decode'],
    ['alloc:40', 'out of memory'], ['kv_block:2', 'injected fault: kv_block']]) {
    it(`${spec}: a 500 error object, blocks back, then a fresh answer`, async () => {
      const server = await startServer({ args: ARGS, env: { CORTIQ_FAULT: spec } });
      try {
        const r = await postJson(server.baseURL, '/v1/completions', REQUEST);
        assert.equal(r.status, 500, r.text);
        assert.equal(r.json?.error?.type, 'server_error', r.text);
        assert.match(r.json.error.message, new RegExp(message), r.text);
        const m = await settledMetrics(server.baseURL);
        assert.equal(m.get('cortiq_requests_failed_total'), 1);
        assert.equal(m.get('cortiq_requests_cancelled_total'), 0);
        const again = await postJson(server.baseURL, '/v1/completions', REQUEST);
        assert.equal(again.status, 200, again.text);
        assert.deepEqual(answerOf(again.json), expected);
      } finally {
        await server.stop();
      }
    });

    it(`${spec}, streamed: an SSE error event, blocks back, then a fresh answer`, async () => {
      const server = await startServer({ args: ARGS, env: { CORTIQ_FAULT: spec } });
      try {
        const r = await postStream(server.baseURL, '/v1/completions', { ...REQUEST, stream: true });
        assert.equal(r.status, 200);
        const errors = r.events.filter((e) => e.error);
        assert.equal(errors.length, 1, JSON.stringify(r.events));
        assert.match(errors[0].error.message, new RegExp(message));
        assert.ok(!r.events.some((e) => e.choices?.[0]?.finish_reason), 'a failed choice has no finish_reason');
        assert.ok(r.done, 'the stream ends with [DONE]');
        await settledMetrics(server.baseURL);
        const again = await postStream(server.baseURL, '/v1/completions', { ...REQUEST, stream: true });
        assert.deepEqual(streamedAnswer(again.events), expected);
      } finally {
        await server.stop();
      }
    });
  }

  // A write that fails looks like a client that left: the request is
  // cancelled (that is what happened), its blocks come back, the server
  // goes on.
  it('client_write:3: the request stops, blocks back, then a fresh answer', async () => {
    const server = await startServer({ args: ARGS, env: { CORTIQ_FAULT: 'client_write:3' } });
    try {
      let cut = false;
      try {
        const r = await postStream(server.baseURL, '/v1/completions', { ...REQUEST, stream: true });
        cut = !r.done;
      } catch {
        cut = true; // fetch reports the connection closing mid-body
      }
      assert.ok(cut, 'the stream was not cut short');
      const m = await settledMetrics(server.baseURL);
      assert.equal(m.get('cortiq_requests_failed_total'), 0);
      const again = await postJson(server.baseURL, '/v1/completions', REQUEST);
      assert.equal(again.status, 200, again.text);
      assert.deepEqual(answerOf(again.json), expected);
    } finally {
      await server.stop();
    }
  });

  it('an unreadable CORTIQ_FAULT stops the server before it listens', async () => {
    await assert.rejects(startServer({ args: ARGS, env: { CORTIQ_FAULT: 'decode:soon' } }),
      /CORTIQ_FAULT: 'decode:soon'/);
  });
});
