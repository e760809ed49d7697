#!/usr/bin/env node
// Decode throughput of `cortiq serve`: one stream alone, then N concurrent
// streams (continuous batching), over raw HTTP + SSE (no npm packages).
//
//   node bench/server/throughput.mjs [--cli build/src/cli/cortiq] [--model FILE]
//        [--parallel 32] [--streams N] [--threads T] [--tokens 64] [--ctx 2048] [--json]
//
// Without --model it benchmarks the tests' gen-model model (tiny: the
// numbers then show the server's overhead more than the engine's speed).
import { parseArgs } from 'node:util';
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
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opts.help) {
  console.log('usage: node bench/server/throughput.mjs [--cli PATH] [--model FILE] [--parallel 32] [--streams N] ' +
    '[--threads T] [--tokens 64] [--ctx 2048] [--json]');
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
  const r = await postStream(baseURL, '/v1/completions', {
    model: 'bench', prompt: `Story ${k}: once upon a time`, max_tokens: tokens, ignore_eos: true,
    temperature: 0.8, seed: k, stream: true, stream_options: { include_usage: true },
  }, {
    onEvent(event) {
      if (event.choices?.[0]?.text) times.push(performance.now());
      if (event.usage) usage = event.usage;
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
  };
}

const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function main() {
  const model = opts.model ?? testModel();
  const args = ['--parallel', String(parallel), '-c', opts.ctx, '--queue', String(Math.max(streams, 64))];
  if (opts.threads) args.push('-t', opts.threads);
  const server = await startServer({ model, args });
  try {
    await timedStream(server.baseURL, 0); // warm-up: page in the weights, start the threads

    const single = await timedStream(server.baseURL, 1);

    const results = await Promise.all(Array.from({ length: streams }, (_, k) => timedStream(server.baseURL, 100 + k)));
    const first = Math.min(...results.map((r) => r.first));
    const last = Math.max(...results.map((r) => r.last));
    const generated = results.reduce((n, r) => n + r.generated, 0);
    const aggregateTps = generated / ((last - first) / 1000);
    const metrics = await getMetrics(server.baseURL);

    const report = {
      model: path.basename(model),
      parallel, streams, tokens, threads: opts.threads ? Number(opts.threads) : null,
      single: { decodeTps: single.decodeTps, ttftMs: single.ttftMs },
      concurrent: {
        aggregateTps,
        wallSeconds: (last - first) / 1000,
        perRequestDecodeTps: mean(results.map((r) => r.decodeTps)),
        perRequestTtftMs: mean(results.map((r) => r.ttftMs)),
        maxTtftMs: Math.max(...results.map((r) => r.ttftMs)),
      },
      ratio: aggregateTps / single.decodeTps,
      serverDecodeTps: metrics.get('cortiq_decode_tokens_per_second') ?? null,
    };
    if (opts.json) {
      console.log(JSON.stringify(report, null, 2));
    } else {
      const f = (x, digits = 1) => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');
      console.log(`model ${report.model}, ${tokens} tokens per stream, --parallel ${parallel}` +
        (opts.threads ? `, ${opts.threads} threads` : '') + '\n');
      console.log('| run | streams | decode tokens/s (aggregate) | per stream tokens/s | mean TTFT ms |');
      console.log('|---|---:|---:|---:|---:|');
      console.log(`| single | 1 | ${f(single.decodeTps)} | ${f(single.decodeTps)} | ${f(single.ttftMs)} |`);
      console.log(`| concurrent | ${streams} | ${f(aggregateTps)} | ${f(report.concurrent.perRequestDecodeTps)} | ${f(report.concurrent.perRequestTtftMs)} |`);
      console.log(`\nratio (concurrent aggregate / single): ${f(report.ratio, 2)}x`);
    }
  } finally {
    await server.stop();
  }
}

await main();
