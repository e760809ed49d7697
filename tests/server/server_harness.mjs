// Shared helpers for the `cortiq serve` tests and the server benchmark:
// the test model, a server on a free port, raw HTTP, SSE and /metrics.
//
// The cortiq binary comes from the environment (CORTIQ_CLI), so the same
// tests run against the release and the sanitizer builds.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

// The model every test uses: deterministic random weights with the built-in
// ~600-token SPM vocabulary and no chat template (the server uses ChatML).
// A Llama, or the family CORTIQ_TEST_ARCH names in the same size (ctest runs
// the openai client's tests on deepseek2 too: latent attention and a
// mixture of experts).
export const TEST_ARCH = process.env.CORTIQ_TEST_ARCH || 'llama';
export const MODEL_ARGS = ['--arch', TEST_ARCH, '--embd', '256', '--layers', '4', '--heads', '4',
  '--kv-heads', '2', '--ff', '768', '--ctx', '2048', '--seed', '1'];
export const N_EMBD = 256;
export const N_CTX = 2048;

export function cliPath() {
  const cli = process.env.CORTIQ_CLI;
  if (!cli) throw new Error('CORTIQ_CLI must name the cortiq binary (e.g. CORTIQ_CLI=build/src/cli/cortiq)');
  return cli;
}

// Every server started by this process, so that none outlives it.
const servers = new Set();
let tempDir = null;
let modelPath = null;

function cleanUp() {
  for (const child of servers) child.kill('SIGKILL');
  servers.clear();
  if (tempDir) rmSync(tempDir, { recursive: true, force: true });
  tempDir = null;
}
process.on('exit', cleanUp);
// 'exit' does not run when a signal ends the process (ctest's timeout, ^C).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    cleanUp();
    process.exit(128 + os.constants.signals[signal]);
  });
}

// Writes the test model into a temporary directory once per process.
export function testModel() {
  if (!modelPath) {
    tempDir = mkdtempSync(path.join(os.tmpdir(), 'cortiq-server-test-'));
    modelPath = path.join(tempDir, 'test.gguf');
    execFileSync(cliPath(), ['gen-model', ...MODEL_ARGS, '-o', modelPath], { stdio: ['ignore', 'ignore', 'pipe'] });
  }
  return modelPath;
}

const LISTENING = /listening on http:\/\/(\[[^\]]+\]|[^\s:/]+):(\d+)/;
const STDERR_KEEP = 1 << 20; // the last 1 MiB of the server's log is enough to explain a failure

/**
 * Starts `cortiq serve -m MODEL --host 127.0.0.1 --port 0 -t 1 ...args` (with
 * `env` added to this process's environment) and waits for its "listening on
 * http://HOST:PORT" line.
 * Returns {baseURL, host, port, child, stop(), stderrText(), exited}.
 */
export async function startServer({ args = [], model = testModel(), env = {}, readyTimeoutMs = 120_000 } = {}) {
  // One compute thread: ctest runs other tests beside these on two cores.
  const argv = ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0', '-t', '1', ...args];
  const child = spawn(cliPath(), argv, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  servers.add(child);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => {
    stderr += text;
    if (stderr.length > 2 * STDERR_KEEP) stderr = stderr.slice(-STDERR_KEEP);
  });
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      servers.delete(child);
      resolve({ code, signal });
    });
  });
  const describe = () => `cortiq ${argv.join(' ')}`;

  const address = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${describe()}: no "listening on" line after ${readyTimeoutMs} ms; stderr:\n${stderr}`));
    }, readyTimeoutMs);
    const onData = () => {
      const m = LISTENING.exec(stderr);
      if (!m) return;
      clearTimeout(timer);
      child.stderr.off('data', onData);
      resolve({ host: m[1], port: Number(m[2]) });
    };
    child.stderr.on('data', onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`${describe()} exited (code ${code}, signal ${signal}) before listening; stderr:\n${stderr}`));
    });
  });

  // Stops the server with SIGTERM (a clean shutdown) and returns its exit
  // status; SIGKILL after killTimeoutMs, reported as {forced: true}.
  async function stop({ killTimeoutMs = 30_000 } = {}) {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill('SIGTERM');
    let timer;
    const timeout = new Promise((resolve) => { timer = setTimeout(() => resolve(null), killTimeoutMs); });
    const status = await Promise.race([exited, timeout]);
    clearTimeout(timer);
    if (status) return status;
    child.kill('SIGKILL');
    return { ...(await exited), forced: true };
  }

  return {
    ...address,
    baseURL: `http://${address.host}:${address.port}`,
    child,
    exited,
    stop,
    stderrText: () => stderr,
  };
}

/**
 * One HTTP request on a fresh connection (no keep-alive pool, so that one
 * request's fate cannot affect the next). Never throws: a dropped
 * connection comes back as {error}. body: string, Buffer or undefined,
 * sent with a Content-Length, or with `Transfer-Encoding: chunked` when
 * chunked is true (the server must limit and parse both).
 */
export function rawRequest(baseURL, { method = 'GET', path: urlPath = '/', headers = {}, body, chunked = false, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve) => {
    const url = new URL(urlPath, baseURL);
    const framing = body === undefined || chunked ? {} : { 'content-length': Buffer.byteLength(body) };
    const req = http.request(url, { method, headers: { ...framing, ...headers }, agent: false });
    let settled = false;
    let response = null;
    const finish = (result) => {
      if (settled) return;
      settled = true;
      resolve(result);
    };
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer after ${timeoutMs} ms`)));
    req.on('response', (res) => {
      response = res;
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json;
        try { json = JSON.parse(text); } catch { json = undefined; }
        finish({ status: res.statusCode, headers: res.headers, text, json });
      });
      const partial = (error) => finish({ status: res.statusCode, headers: res.headers, text: Buffer.concat(chunks).toString('utf8'), error });
      res.on('error', partial);
      // 'close' after 'end' is a no-op; before it, the body was cut short.
      res.on('close', () => partial(new Error('connection closed before the end of the response')));
    });
    req.on('error', (error) => {
      // A server may answer (413) and close before the whole body is sent:
      // keep the answer if it arrived, and say that the write failed.
      if (!response) finish({ error });
    });
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** POST a JSON value (or a raw string) and return rawRequest's result. */
export function postJson(baseURL, urlPath, value, headers = {}) {
  const body = typeof value === 'string' ? value : JSON.stringify(value);
  return rawRequest(baseURL, { method: 'POST', path: urlPath, headers: { 'content-type': 'application/json', ...headers }, body });
}

export async function tokenize(baseURL, content) {
  const r = await postJson(baseURL, '/tokenize', { content });
  if (r.status !== 200 || !Array.isArray(r.json?.tokens)) {
    throw new Error(`/tokenize: status ${r.status}, body ${r.text ?? r.error}`);
  }
  return r.json.tokens;
}

/**
 * Parses Prometheus text into a Map from 'name' or 'name{labels}' (as
 * written) to a number.
 */
export function parseMetrics(text) {
  const values = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+?(?:\{[^}]*\})?)\s+(\S+)/.exec(line);
    if (m) values.set(m[1], Number(m[2]));
  }
  return values;
}

export async function getMetrics(baseURL, headers = {}) {
  const r = await rawRequest(baseURL, { path: '/metrics', headers });
  if (r.status !== 200) throw new Error(`/metrics: status ${r.status}, body ${r.text ?? r.error}`);
  return parseMetrics(r.text);
}

/** Polls check() (async, returns truthy when done) until it holds or timeoutMs passes. */
export async function waitFor(check, { timeoutMs = 10_000, intervalMs = 50 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result) return result;
    if (Date.now() > deadline) return result;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * POSTs a streaming request and reads its server-sent events with fetch.
 * onEvent(json, ms) is called for each `data: {...}` event, ms = time since
 * the request was sent. Returns {status, events, done, sentAt, error?}, done
 * true when `data: [DONE]` arrived.
 */
export async function postStream(baseURL, urlPath, value, { onEvent = () => {}, headers = {}, signal } = {}) {
  const sentAt = performance.now();
  const res = await fetch(new URL(urlPath, baseURL), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(value),
    signal,
  });
  if (res.status !== 200) {
    return { status: res.status, events: [], done: false, sentAt, error: await res.text() };
  }
  const decoder = new TextDecoder();
  const events = [];
  let buffer = '';
  let done = false;
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    // Events are separated by a blank line; each has `data: ` lines.
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (!data) continue;
      if (data === '[DONE]') { done = true; continue; }
      const json = JSON.parse(data);
      events.push(json);
      onEvent(json, performance.now() - sentAt);
    }
  }
  return { status: res.status, events, done, sentAt };
}

/** Seeded PRNG (mulberry32): the random tests must be the same every run. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ('the a little fox ran over hills and rivers while old friends sang songs about ' +
  'morning light in quiet towns where children played near green fields of wheat under ' +
  'blue skies every day until evening came with soft rain').split(' ');

/** A deterministic English-looking text of `count` words. */
export function wordText(count, seed = 1) {
  const random = prng(seed);
  const words = [];
  for (let i = 0; i < count; i++) words.push(WORDS[Math.floor(random() * WORDS.length)]);
  return words.join(' ');
}
