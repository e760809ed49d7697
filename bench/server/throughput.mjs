#!/usr/bin/env node
// Decode throughput of `cortiq serve`: one stream alone, then N concurrent
// streams (continuous batching), over raw HTTP + SSE (no npm packages).
//
//   node bench/server/throughput.mjs [--cli build/src/cli/cortiq] [--model FILE]
//        [--parallel 32] [--streams N] [--threads T] [--tokens 64] [--ctx 2048] [--json]
//        [--peer PATH/llama-server]
//
// With --peer, the same measurement runs against llama.cpp's server on the
// same file with the same threads, slots and context per sequence, right
// after Cortiq's, and the table gives both and their ratio.
//
// Without --model it benchmarks the tests' gen-model model (tiny: the
// numbers then show the server's overhead more than the engine's speed).
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const { values: opts } = parseArgs({
  options: {
    cli: { type: 'string' },
    model: { type: 'string' },
    parallel: { type: 'string', default: '32' },
    streams: { type: 'string' },
    threads: { type: 'string' },
    tokens: { type: 'string', default: '64' },
    ctx: { type: 'string', default: '2048' },
    json: { type: 'boolean', default: false },
    peer: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opts.help) {
  console.log('usage: node bench/server/throughput.mjs [--cli PATH] [--model FILE] [--parallel 32] [--streams N] ' +
    '[--threads T] [--tokens 64] [--ctx 2048] [--json] [--peer PATH/llama-server]');
  process.exit(0);
}
process.env.CORTIQ_CLI = opts.cli ?? process.env.CORTIQ_CLI ?? path.join(root, 'build/src/cli/cortiq');
if (!existsSync(process.env.CORTIQ_CLI)) {
  console.error(`no cortiq binary at ${process.env.CORTIQ_CLI}: give --cli PATH or CORTIQ_CLI`);
  process.exit(2);
}
// Imported after CORTIQ_CLI is set: the harness reads it.
const { startServer, testModel, postStream, getMetrics } = await import('../../tests/server/server_harness.mjs');

const parallel = Number(opts.parallel);
const streams = Number(opts.streams ?? parallel);
const tokens = Number(opts.tokens);

/**
 * One streaming completion of exactly `tokens` tokens (ignore_eos). Times
 * are performance.now() values: the first and last token's arrival.
 */
async function timedStream(baseURL, k) {
  const times = [];
  let usage = null;
  let timings = null; // the server's own (llama.cpp's field names; both servers send them)
  const r = await postStream(baseURL, '/v1/completions', {
    model: 'bench', prompt: `Story ${k}: once upon a time`, max_tokens: tokens, ignore_eos: true,
    temperature: 0.8, seed: k, stream: true, stream_options: { include_usage: true },
  }, {
    onEvent(event) {
      if (event.choices?.[0]?.text) times.push(performance.now());
      if (event.usage) usage = event.usage;
      if (event.timings) timings = event.timings;
    },
  });
  if (r.status !== 200) throw new Error(`request ${k}: status ${r.status}: ${r.error}`);
  const generated = usage?.completion_tokens ?? tokens;
  const first = times[0];
  const last = times.at(-1);
  return {
    generated,
    first,
    last,
    ttftMs: first - r.sentAt,
    // Decode speed after the first token: the tokens after it over the time they took.
    decodeTps: last > first ? (generated - 1) / ((last - first) / 1000) : NaN,
    serverDecodeTps: timings?.predicted_per_second ?? NaN,
  };
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

// A free TCP port on the loopback interface, for the peer's --port.
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

// llama.cpp's server with the same slots, context per slot and threads;
// ready when /health answers 200.
async function startPeer(binary, model) {
  const port = await freePort();
  const argv = ['-m', model, '--host', '127.0.0.1', '--port', String(port), '-np', String(parallel),
    '-c', String(parallel * Number(opts.ctx)), '--no-webui'];
  if (opts.threads) argv.push('-t', opts.threads, '-tb', opts.threads);
  const child = spawn(binary, argv, { stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LD_LIBRARY_PATH: path.dirname(binary) } });
  let stderr = '';
  child.stderr.on('data', (t) => { stderr = (stderr + t).slice(-20000); });
  const baseURL = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited: ${stderr}`);
    try {
      if ((await fetch(`${baseURL}/health`)).status === 200) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) throw new Error(`llama-server did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    baseURL,
    stop: () => new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGTERM'); }),
  };
}

// Warm-up, one stream alone, then all streams at once.
async function measure(server) {
  await timedStream(server.baseURL, 0); // page in the weights, start the threads
  const single = await timedStream(server.baseURL, 1);
  const results = await Promise.all(Array.from({ length: streams }, (_, k) => timedStream(server.baseURL, 100 + k)));
  const first = Math.min(...results.map((r) => r.first));
  const last = Math.max(...results.map((r) => r.last));
  // As for the single stream: the tokens after each stream's first one
  // (those come from prefill), over the time from the first to the last.
  const decoded = results.reduce((n, r) => n + r.generated - 1, 0);
  const aggregateTps = decoded / ((last - first) / 1000);
  return {
    single: { decodeTps: single.decodeTps, serverDecodeTps: single.serverDecodeTps, ttftMs: single.ttftMs },
    concurrent: {
      aggregateTps,
      wallSeconds: (last - first) / 1000,
      perRequestDecodeTps: mean(results.map((r) => r.decodeTps)),
      perRequestTtftMs: mean(results.map((r) => r.ttftMs)),
      maxTtftMs: Math.max(...results.map((r) => r.ttftMs)),
    },
    ratio: aggregateTps / single.decodeTps,
  };
}

async function main() {
  const model = opts.model ?? testModel();
  const args = ['--parallel', String(parallel), '-c', opts.ctx, '--queue', String(Math.max(streams, 64))];
  if (opts.threads) args.push('-t', opts.threads);
  const report = { model: path.basename(model), parallel, streams, tokens,
    threads: opts.threads ? Number(opts.threads) : null };
  const server = await startServer({ model, args });
  try {
    report.cortiq = await measure(server);
    report.cortiq.serverDecodeTps = (await getMetrics(server.baseURL)).get('cortiq_decode_tokens_per_second') ?? null;
  } finally {
    await server.stop();
  }
  if (opts.peer) {
    const peer = await startPeer(opts.peer, model);
    try {
      report.peer = await measure(peer);
    } finally {
      await peer.stop();
    }
  }
  if (opts.json) {
    console.log(JSON.stringify(report, null, 2));
    return;
  }
  const f = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');
  console.log(`model ${report.model}, ${tokens} tokens per stream, --parallel ${parallel}` +
    (opts.threads ? `, ${opts.threads} threads` : '') + '\n');
  // The client-side times see the SSE events as they arrive; a server that
  // sends them in bursts looks faster or slower than it decodes, so the
  // single stream's own reported decode speed is given too.
  console.log('| server | run | streams | decode tokens/s (aggregate) | per stream tokens/s | server-reported tokens/s | mean TTFT ms |');
  console.log('|---|---|---:|---:|---:|---:|---:|');
  const rows = [['cortiq', report.cortiq]];
  if (report.peer) rows.push(['llama-server', report.peer]);
  for (const [name, r] of rows) {
    console.log(`| ${name} | single | 1 | ${f(r.single.decodeTps)} | ${f(r.single.decodeTps)} | ${f(r.single.serverDecodeTps)} | ${f(r.single.ttftMs)} |`);
    console.log(`| ${name} | concurrent | ${streams} | ${f(r.concurrent.aggregateTps)} | ${f(r.concurrent.perRequestDecodeTps)} | | ${f(r.concurrent.perRequestTtftMs)} |`);
  }
  for (const [name, r] of rows) console.log(`\n${name}: concurrent aggregate / single = ${f(r.ratio, 2)}x`);
  if (report.peer) {
    console.log(`cortiq / llama-server: single ${f(report.cortiq.single.decodeTps / report.peer.single.decodeTps, 2)}x, ` +
      `concurrent ${f(report.cortiq.concurrent.aggregateTps / report.peer.concurrent.aggregateTps, 2)}x`);
  }
}

await main();
