// `cortiq serve` under load: continuous batching of 32 streams with seeded
// sampling that must not depend on the batch, the prefix cache, and the
// waiting queue's limit.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, getMetrics, waitFor, tokenize, wordText, postJson } from './server_harness.mjs';

const MODEL = 'test-model';

function makeClient(baseURL) {
  return new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'x', maxRetries: 0, timeout: 300_000 });
}

async function stopCleanly(server) {
  const status = await server?.stop();
  assert.deepEqual(status, { code: 0, signal: null }, `clean exit on SIGTERM; stderr tail:\n${server?.stderrText().slice(-4000)}`);
}

/**
 * Runs one streaming chat request and times it on the client: when it was
 * sent, its first and last content chunk. Returns the text, usage, the
 * finish_reason and the server's timings if a chunk carried them.
 */
async function timedChatStream(client, request) {
  const sent = performance.now();
  const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let firstContent = null;
  let lastContent = null;
  let usage = null;
  let finishReason = null;
  let timings = null;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (choice?.delta?.content) {
      text += choice.delta.content;
      lastContent = performance.now();
      firstContent ??= lastContent;
    }
    if (choice?.finish_reason) finishReason = choice.finish_reason;
    if (chunk.usage) usage = chunk.usage;
    if (chunk.timings) timings = chunk.timings;
  }
  return { text, usage, finishReason, timings, sent, firstContent, lastContent, ttftMs: firstContent - sent };
}

/** The most streams that were between their first and last content chunk at once. */
function maxOverlap(results) {
  const edges = results.flatMap((r) => [[r.firstContent, 1], [r.lastContent, -1]]);
  edges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let now = 0;
  let most = 0;
  for (const [, delta] of edges) most = Math.max(most, (now += delta));
  return most;
}

async function waitUntilIdle(baseURL) {
  let last;
  const idle = await waitFor(async () => {
    last = await getMetrics(baseURL);
    return last.get('cortiq_running_sequences') === 0 && last.get('cortiq_kv_blocks_used') === 0 && last.get('cortiq_queue_length') === 0;
  }, { timeoutMs: 10_000 });
  assert.ok(idle, `idle after the requests: running ${last.get('cortiq_running_sequences')}, ` +
    `kv used ${last.get('cortiq_kv_blocks_used')}, queue ${last.get('cortiq_queue_length')}`);
}

describe('32 concurrent streams', () => {
  const STREAMS = 32;
  const TOKENS = 24;
  let server;
  let client;

  before(async () => {
    server = await startServer({ args: ['--parallel', String(STREAMS), '-c', '2048', '--alias', MODEL] });
    client = makeClient(server.baseURL);
  });
  after(() => stopCleanly(server));

  const request = (k) => ({
    model: MODEL,
    messages: [{ role: 'user', content: `Tell story number ${k} about ${wordText(3 + (k % 5), k)}.` }],
    max_tokens: TOKENS, ignore_eos: true, temperature: 0.8, seed: 1000 + k,
  });

  it('all complete with their tokens, and each text equals the same request alone', async () => {
    // Watch the server's own count of running sequences meanwhile.
    let peakRunning = 0;
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        peakRunning = Math.max(peakRunning, (await getMetrics(server.baseURL)).get('cortiq_running_sequences') ?? 0);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    const started = performance.now();
    const underLoad = await Promise.all(Array.from({ length: STREAMS }, (_, k) => timedChatStream(client, request(k))));
    const loadSeconds = (performance.now() - started) / 1000;
    watching = false;
    await watcher;

    underLoad.forEach((r, k) => {
      assert.equal(r.finishReason, 'length', `request ${k}: finish_reason`);
      assert.equal(r.usage?.completion_tokens, TOKENS, `request ${k}: usage ${JSON.stringify(r.usage)}`);
      assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    });
    const overlap = maxOverlap(underLoad);
    console.log(`${STREAMS} streams x ${TOKENS} tokens in ${loadSeconds.toFixed(2)} s; ` +
      `at most ${overlap} streams between first and last token at once (client); peak cortiq_running_sequences ${peakRunning}`);
    assert.ok(overlap >= 2, 'the streams were decoded together, not one after another');
    await waitUntilIdle(server.baseURL);

    // Seeded sampling must not depend on what else is in the batch.
    const started1 = performance.now();
    const mismatches = [];
    for (let k = 0; k < STREAMS; k++) {
      const alone = await timedChatStream(client, request(k));
      if (alone.text !== underLoad[k].text) {
        mismatches.push(`request ${k} (seed ${1000 + k}): under load ${JSON.stringify(underLoad[k].text)}, alone ${JSON.stringify(alone.text)}`);
      }
    }
    console.log(`${STREAMS} requests one at a time in ${((performance.now() - started1) / 1000).toFixed(2)} s; ` +
      `${STREAMS - mismatches.length}/${STREAMS} texts equal to those under load`);
    assert.deepEqual(mismatches, [], 'texts under load = texts alone');
  });
});

describe('prefix cache', () => {
  let server;
  let client;

  // A fresh server, so that the first request is cold.
  before(async () => {
    server = await startServer({ args: ['--parallel', '2', '-c', '2048', '--alias', MODEL] });
    client = makeClient(server.baseURL);
  });
  after(() => stopCleanly(server));

  /** The longest wordText prefix with at most `target` tokens. */
  async function textOfTokens(target) {
    let words = 100;
    while ((await tokenize(server.baseURL, wordText(words * 2))).length <= target) words *= 2;
    let [lo, hi] = [words, words * 2]; // tokens(lo) <= target < tokens(hi)
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if ((await tokenize(server.baseURL, wordText(mid))).length <= target) lo = mid; else hi = mid;
    }
    return wordText(lo);
  }

  it('a second request sharing 1,000+ tokens reuses them and starts 5x sooner', async () => {
    const shared = await textOfTokens(1100);
    const sharedTokens = (await tokenize(server.baseURL, shared)).length;
    assert.ok(sharedTokens >= 1050, `shared text of ${sharedTokens} tokens`);

    const ask = (tail) => timedChatStream(client, {
      model: MODEL, messages: [{ role: 'user', content: `${shared} ${tail}` }], max_tokens: 4, ignore_eos: true, temperature: 0,
    });
    const cold = await ask('Question one: what happened next?');
    const warm = await ask('Question two: who was there?');

    const cached = (r) => r.usage?.prompt_tokens_details?.cached_tokens;
    const ratio = cold.ttftMs / warm.ttftMs;
    console.log(`prompt ${cold.usage?.prompt_tokens} / ${warm.usage?.prompt_tokens} tokens; cached ${cached(cold)} / ${cached(warm)}; ` +
      `client TTFT cold ${cold.ttftMs.toFixed(1)} ms, warm ${warm.ttftMs.toFixed(1)} ms (ratio ${ratio.toFixed(1)}); ` +
      `server ttft_ms ${cold.timings?.ttft_ms} / ${warm.timings?.ttft_ms}`);
    assert.ok(cold.usage.prompt_tokens > sharedTokens, 'the prompt holds the shared text');
    assert.equal(cached(cold), 0, `cold request: ${JSON.stringify(cold.usage)}`);
    assert.ok(cached(warm) >= 1000, `warm request: ${JSON.stringify(warm.usage)}`);
    assert.ok(ratio >= 5, `time to first token: cold ${cold.ttftMs.toFixed(1)} ms, warm ${warm.ttftMs.toFixed(1)} ms, ratio ${ratio.toFixed(2)} < 5`);

    const m = await getMetrics(server.baseURL);
    assert.ok(m.get('cortiq_prefix_cache_hit_tokens_total') >= cached(warm), 'cortiq_prefix_cache_hit_tokens_total');
    assert.ok(m.get('cortiq_kv_blocks_cached') > 0, 'cortiq_kv_blocks_cached');
  });
});

describe('waiting queue', () => {
  let server;
  let client;

  before(async () => {
    server = await startServer({ args: ['--parallel', '1', '--queue', '2', '-c', '2048', '--alias', MODEL] });
    client = makeClient(server.baseURL);
  });
  after(() => stopCleanly(server));

  it('503 with a JSON error when the queue is full; the queued requests still complete', async () => {
    const chat = { model: MODEL, messages: [{ role: 'user', content: 'Go on.' }], ignore_eos: true };
    // One long stream takes the only slot...
    const long = await client.chat.completions.create({ ...chat, max_tokens: 1900, stream: true });
    const iterator = long[Symbol.asyncIterator]();
    await iterator.next();
    // ...two more wait...
    const queued = [1, 2].map(() => client.chat.completions.create({ ...chat, max_tokens: 3 }));
    let last;
    const full = await waitFor(async () => (last = await getMetrics(server.baseURL)).get('cortiq_queue_length') === 2, { timeoutMs: 10_000 });
    assert.ok(full, `cortiq_queue_length ${last.get('cortiq_queue_length')}, expected 2`);
    // ...and the next is turned away.
    const refused = await postJson(server.baseURL, '/v1/chat/completions', { ...chat, max_tokens: 3 });
    assert.equal(refused.status, 503, refused.text ?? String(refused.error));
    assert.equal(typeof refused.json?.error?.message, 'string', refused.text);
    assert.equal(typeof refused.json.error.type, 'string');
    assert.ok(['number', 'string'].includes(typeof refused.json.error.code));

    long.controller.abort();
    for (const r of await Promise.all(queued)) assert.equal(r.usage.completion_tokens, 3);
    await waitUntilIdle(server.baseURL);
    const m = await getMetrics(server.baseURL);
    assert.ok(m.get('cortiq_requests_total{status="503"}') >= 1, 'cortiq_requests_total{status="503"}');
  });
});
