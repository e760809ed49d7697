#!/usr/bin/env node
// A soak of `cortiq serve`: for --minutes, 2 clients per slot send a
// bounded, seeded mix of requests, each client waiting for its answer before
// the next. Reports requests served, errors by kind, time to first token and
// decode speed (p50 and the slow tail), the server's RSS and KV blocks at
// the start, a tenth of the way through and at the end (after the load
// stops: nothing may grow once warm), and whether the
// server survived. Not a CI test: it runs for half an hour by default.
//
//   node bench/server/soak.mjs [--cli build/src/cli/cortiq] [--model FILE] [--minutes 30]
//        [--parallel 4] [--clients N] [--threads T] [--seed 1] [--json]
//
// The mix (weights in MIX): streamed and plain chat and completions, n = 2
// or 3, prompts that share a long prefix (prefix-cache hits), streams the
// client aborts part way, malformed bodies (must get 400), embeddings, and
// prompts that overflow the context (must get 400). Anything else — a 5xx,
// a dropped connection, a stream without [DONE] — counts as an error.
import { parseArgs } from 'node:util';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opts } = parseArgs({
  options: {
    cli: { type: 'string' },
    model: { type: 'string' },
    minutes: { type: 'string', default: '30' },
    parallel: { type: 'string', default: '4' },
    clients: { type: 'string' },
    threads: { type: 'string' },
    seed: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opts.help) {
  console.log('usage: node bench/server/soak.mjs [--cli PATH] [--model FILE] [--minutes 30] [--parallel 4] ' +
    '[--clients N] [--threads T] [--seed 1] [--json]');
  process.exit(0);
}
process.env.CORTIQ_CLI = opts.cli ?? process.env.CORTIQ_CLI ?? path.join(root, 'build/src/cli/cortiq');
if (!existsSync(process.env.CORTIQ_CLI)) {
  console.error(`no cortiq binary at ${process.env.CORTIQ_CLI}: give --cli PATH or CORTIQ_CLI`);
  process.exit(2);
}
const { startServer, testModel, postJson, postStream, getMetrics, prng, wordText } =
  await import('../../tests/server/server_harness.mjs');

const parallel = Number(opts.parallel);
const clients = Number(opts.clients ?? 2 * parallel);
const durationMs = Number(opts.minutes) * 60_000;
const CTX = 2048; // per sequence (-c)

// Kinds of request and how often each comes (out of the sum).
const MIX = [
  ['chat_stream', 20], ['chat', 10], ['completion_stream', 15], ['completion', 10], ['n_choices', 8],
  ['prefix_hit', 15], ['abort', 8], ['malformed', 5], ['embeddings', 6], ['overflow', 3],
];
const MIX_TOTAL = MIX.reduce((n, [, w]) => n + w, 0);
// Three long shared prefixes (300 words, ~1,000 tokens): prefix_hit prompts start with one.
const PREFIXES = [1, 2, 3].map((k) => wordText(300, 100 + k));
const MALFORMED = ['{', '{"model": "m", "messages": 5}', '{"prompt": "x", "max_tokens": -1}', '[1,2]',
  '{"messages": [{"role": "user"}]}', '{"prompt": "x", "temperature": "hot"}'];

function pick(random) {
  let r = random() * MIX_TOTAL;
  for (const [kind, weight] of MIX) {
    if ((r -= weight) < 0) return kind;
  }
  return MIX[0][0];
}

const percentile = (xs, p) => {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};

function rssBytes(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

// One streamed request: TTFT and decode speed from the events' arrival.
async function streamed(baseURL, urlPath, body, abortAfter) {
  const controller = new AbortController();
  const times = [];
  let events = 0;
  try {
    const r = await postStream(baseURL, urlPath, { ...body, stream: true }, {
      signal: controller.signal,
      onEvent(event) {
        const choice = event.choices?.[0];
        if (choice?.text || choice?.delta?.content) times.push(performance.now());
        // Aborting alone can leave the body's async iterator waiting forever
        // (undici, node 20): throwing leaves the loop, which cancels the body.
        if (abortAfter && ++events >= abortAfter) {
          controller.abort();
          throw new Error('aborted by the client');
        }
      },
    });
    if (r.status !== 200) return { outcome: `status ${r.status}` };
    if (r.events.some((e) => e.error)) return { outcome: 'error event' };
    if (!r.done) return { outcome: 'no [DONE]' };
    return { outcome: 'ok', ttftMs: times[0] - r.sentAt, tokens: times.length,
      decodeTps: times.length > 1 ? (times.length - 1) / ((times.at(-1) - times[0]) / 1000) : NaN };
  } catch (error) {
    if (abortAfter && controller.signal.aborted) return { outcome: 'ok' };
    return { outcome: `dropped: ${error.message}` };
  }
}

async function plain(baseURL, urlPath, body, expectStatus = 200) {
  const r = await postJson(baseURL, urlPath, body);
  if (r.error && r.status === undefined) return { outcome: `dropped: ${r.error.message}` };
  if (r.status !== expectStatus) return { outcome: `status ${r.status}` };
  if (expectStatus !== 200 && !r.json?.error) return { outcome: 'no error object' };
  return { outcome: 'ok' };
}

async function request(baseURL, kind, random, k) {
  const words = (n) => wordText(n, Math.floor(random() * 1e9));
  const maxTokens = 8 + Math.floor(random() * 56);
  const sampling = { temperature: random() < 0.3 ? 0 : 0.8, seed: k, max_tokens: maxTokens };
  const chat = (content) => ({ model: 'soak', messages: [{ role: 'user', content }], ...sampling });
  const completion = (prompt) => ({ model: 'soak', prompt, ...sampling });
  switch (kind) {
    case 'chat_stream': return streamed(baseURL, '/v1/chat/completions', chat(words(20 + Math.floor(random() * 200))));
    case 'chat': return plain(baseURL, '/v1/chat/completions', chat(words(20 + Math.floor(random() * 200))));
    case 'completion_stream': return streamed(baseURL, '/v1/completions', completion(words(10 + Math.floor(random() * 300))));
    case 'completion': return plain(baseURL, '/v1/completions', completion(words(10 + Math.floor(random() * 300))));
    case 'n_choices': return plain(baseURL, '/v1/completions', { ...completion(words(30)), n: 2 + Math.floor(random() * 2) });
    case 'prefix_hit': {
      const prefix = PREFIXES[Math.floor(random() * PREFIXES.length)];
      return streamed(baseURL, '/v1/completions', completion(`${prefix} ${words(5 + Math.floor(random() * 30))}`));
    }
    case 'abort': return streamed(baseURL, '/v1/completions', { ...completion(words(40)), max_tokens: 200 }, 2 + Math.floor(random() * 8));
    case 'malformed': return plain(baseURL, '/v1/chat/completions', MALFORMED[Math.floor(random() * MALFORMED.length)], 400);
    case 'embeddings': return plain(baseURL, '/v1/embeddings', { model: 'soak', input: [words(20), words(60)] });
    case 'overflow': return plain(baseURL, '/v1/completions', completion(words(CTX + 500)), 400);
    default: throw new Error(`unknown kind ${kind}`);
  }
}

// A request that has not ended after this long counts as an error ("no
// answer") and the client goes on.
const REQUEST_TIMEOUT_MS = 120_000;
function withTimeout(promise, ms) {
  let timer;
  const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve({ outcome: 'no answer' }), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function snapshot(server) {
  const m = await getMetrics(server.baseURL);
  return { rss: rssBytes(server.child.pid), kvUsed: m.get('cortiq_kv_blocks_used'),
    kvCached: m.get('cortiq_kv_blocks_cached'), kvFree: m.get('cortiq_kv_blocks_free'),
    running: m.get('cortiq_running_sequences') };
}

// startServer passes -t 1 before these; a later -t wins.
const args = ['--parallel', String(parallel), '-c', String(CTX), '--queue', String(4 * clients)];
if (opts.threads) args.push('-t', opts.threads);
const server = await startServer({ model: opts.model ?? testModel(), args });
// A warm-up of each kind, so the start snapshot sees caches and buffers grown.
const warm = prng(Number(opts.seed) ^ 0x5eed);
for (const [kind] of MIX) await request(server.baseURL, kind, warm, 0);
await new Promise((r) => setTimeout(r, 500));
const start = await snapshot(server);

const byKind = new Map(MIX.map(([kind]) => [kind, { served: 0, errors: new Map() }]));
const ttft = [];
const decode = [];
let tokens = 0;
const began = performance.now();
const deadline = Date.now() + durationMs;
const progress = setInterval(() => {
  if (opts.json) return;
  const served = [...byKind.values()].reduce((n, e) => n + e.served, 0);
  const waiting = inFlight.filter((f) => f && Date.now() - f.since > 10_000).map((f) => f.kind);
  console.error(`${((performance.now() - began) / 60000).toFixed(1)} min: ${served} requests, ` +
    `RSS ${(rssBytes(server.child.pid) / 2 ** 20).toFixed(0)} MiB` +
    (waiting.length ? `, waiting over 10 s: ${waiting.join(' ')}` : ''));
}, 60_000);
// RSS once the run is a tenth through (buffers and touched KV pages at their
// working size), to tell growth from warming up.
let settled = null;
const settleTimer = setTimeout(async () => { settled = await snapshot(server); }, durationMs / 10);
// What each client waits for, for the report of a request that never ends.
const inFlight = new Array(clients).fill(null);
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  const random = prng(Number(opts.seed) * 1000 + c);
  for (let k = 0; Date.now() < deadline && server.child.exitCode === null; k++) {
    const kind = pick(random);
    inFlight[c] = { kind, since: Date.now() };
    const result = await withTimeout(request(server.baseURL, kind, random, c * 1_000_000 + k), REQUEST_TIMEOUT_MS);
    inFlight[c] = null;
    const entry = byKind.get(kind);
    entry.served++;
    if (result.outcome !== 'ok') entry.errors.set(result.outcome, (entry.errors.get(result.outcome) ?? 0) + 1);
    if (Number.isFinite(result.ttftMs)) ttft.push(result.ttftMs);
    if (Number.isFinite(result.decodeTps)) decode.push(result.decodeTps);
    tokens += result.tokens ?? 0;
  }
}));
clearInterval(progress);
clearTimeout(settleTimer);
const elapsed = (performance.now() - began) / 1000;
const crashed = server.child.exitCode !== null || server.child.signalCode !== null;
let end = null;
if (!crashed) {
  // The load has stopped: every sequence ends and gives its blocks back.
  for (let i = 0; i < 100; i++) {
    end = await snapshot(server);
    if (end.running === 0 && end.kvUsed === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
}
const stop = await server.stop();

const report = {
  minutes: elapsed / 60, slots: parallel, clients, seed: Number(opts.seed),
  served: Object.fromEntries([...byKind].map(([k, e]) => [k, e.served])),
  errors: Object.fromEntries([...byKind].filter(([, e]) => e.errors.size).map(([k, e]) => [k, Object.fromEntries(e.errors)])),
  ttftMs: { p50: percentile(ttft, 0.5), p99: percentile(ttft, 0.99) },
  decodeTokensPerSecond: { p50: percentile(decode, 0.5), p99: percentile(decode, 0.01) },
  streamedTokensPerSecond: tokens / elapsed,
  start, settled, end, crashed, exit: stop,
};
if (opts.json) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const mib = (b) => `${(b / 2 ** 20).toFixed(1)} MiB`;
  const served = Object.values(report.served).reduce((a, b) => a + b, 0);
  const errorCount = Object.values(report.errors).reduce((n, e) => n + Object.values(e).reduce((a, b) => a + b, 0), 0);
  console.log(`| soak | ${report.minutes.toFixed(1)} min, ${parallel} slots, ${clients} clients, seed ${report.seed} |`);
  console.log('|---|---|');
  console.log(`| requests served | ${served} (${Object.entries(report.served).map(([k, n]) => `${k} ${n}`).join(', ')}) |`);
  console.log(`| errors | ${errorCount}${errorCount ? ` ${JSON.stringify(report.errors)}` : ''} |`);
  console.log(`| TTFT p50 / p99 | ${report.ttftMs.p50.toFixed(0)} / ${report.ttftMs.p99.toFixed(0)} ms |`);
  console.log(`| decode tokens/s per stream p50 / p1 | ${report.decodeTokensPerSecond.p50.toFixed(1)} / ${report.decodeTokensPerSecond.p99.toFixed(1)} |`);
  console.log(`| streamed tokens/s (all clients) | ${report.streamedTokensPerSecond.toFixed(1)} |`);
  console.log(`| RSS start → 10 % → end | ${mib(start.rss)} → ${settled ? mib(settled.rss) : 'n/a'} → ${end ? mib(end.rss) : 'n/a'} |`);
  console.log(`| KV blocks used start → end | ${start.kvUsed} → ${end?.kvUsed ?? 'n/a'} (cached ${start.kvCached} → ${end?.kvCached ?? 'n/a'}) |`);
  console.log(`| crashes | ${crashed ? 1 : 0} (exit ${JSON.stringify(stop)}) |`);
}
process.exit(crashed || !end || end.kvUsed !== 0 ? 1 : 0);
