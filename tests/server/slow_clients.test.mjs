// `cortiq serve` against clients that hold connections without finishing a
// request: slowloris-style heads sent a byte at a time, idle keep-alive
// connections, oversized heads. None of them may hold a request thread: a
// real request is answered at once while they wait, each bound is answered
// with its status and a JSON error, and the server keeps serving.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, rawRequest, postJson } from './server_harness.mjs';

// Few request threads (1 parallel + 2 queued + 16), a 2-second head bound.
const SERVER_ARGS = ['--parallel', '1', '--queue', '2', '--timeout', '2'];
const SLOW_CLIENTS = 60; // three times the request threads
const IDLE_CLIENTS = 40;

// A connection on which bytes are sent by the test; collects what comes back.
function connect(port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const state = { socket, received: '', closed: false };
    socket.setEncoding('utf8');
    socket.on('data', (text) => { state.received += text; });
    socket.on('close', () => { state.closed = true; });
    socket.on('error', () => {});
    socket.once('connect', () => resolve(state));
    socket.once('error', reject);
  });
}

async function waitUntil(check, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

// The whole of one raw exchange: sends `bytes`, waits for the server to
// close (every refusal closes), returns the text received.
async function exchange(port, bytes) {
  const c = await connect(port);
  c.socket.write(bytes);
  await waitUntil(() => c.closed, 10_000);
  c.socket.destroy();
  return c.received;
}

function statusAndBody(text) {
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]);
  const body = text.slice(text.indexOf('\r\n\r\n') + 4);
  return { status, json: JSON.parse(body) };
}

describe('slow and oversized clients', () => {
  let server;
  before(async () => { server = await startServer({ args: SERVER_ARGS }); });
  after(async () => { await server?.stop(); });

  it('a slowloris crowd and idle connections do not starve a real request', async () => {
    const slow = [];
    for (let i = 0; i < SLOW_CLIENTS; ++i) {
      const c = await connect(server.port);
      c.socket.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\n');
      slow.push(c);
    }
    const idle = [];
    for (let i = 0; i < IDLE_CLIENTS; ++i) idle.push(await connect(server.port));
    // A byte every 200 ms from each slow client: never a whole head.
    const drip = setInterval(() => { for (const c of slow) if (!c.closed) c.socket.write('X'); }, 200);
    try {
      await new Promise((r) => setTimeout(r, 500));
      const started = Date.now();
      const health = await rawRequest(server.baseURL, { path: '/health', timeoutMs: 10_000 });
      const completion = await postJson(server.baseURL, '/v1/completions', { prompt: 'hi', max_tokens: 4 });
      const took = Date.now() - started;
      assert.equal(health.status, 200, JSON.stringify(health));
      assert.equal(completion.status, 200, completion.text);
      assert.ok(took < 1500, `real requests took ${took} ms beside ${SLOW_CLIENTS} slow clients`);

      // The head bound (2 s from the first byte) ends each slow client
      // with a 408 and a JSON error; idle connections are closed.
      assert.ok(await waitUntil(() => slow.every((c) => c.closed), 10_000), 'slow clients still open');
      for (const c of slow) {
        const { status, json } = statusAndBody(c.received);
        assert.equal(status, 408);
        assert.equal(json.error.code, 'request_timeout');
      }
      assert.ok(await waitUntil(() => idle.every((c) => c.closed), 10_000), 'idle connections still open');
    } finally {
      clearInterval(drip);
      for (const c of [...slow, ...idle]) c.socket.destroy();
    }
  });

  it('oversized heads get 414 or 431 with a JSON error, and the server goes on', async () => {
    const longLine = await exchange(server.port, `GET /${'a'.repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.equal(statusAndBody(longLine).status, 414);
    assert.equal(statusAndBody(longLine).json.error.code, 'uri_too_long');

    let many = 'GET /health HTTP/1.1\r\nHost: x\r\n';
    for (let i = 0; i < 101; ++i) many += `X-Header-${i}: ${i}\r\n`;
    const manyHeaders = await exchange(server.port, many + '\r\n');
    assert.equal(statusAndBody(manyHeaders).status, 431);
    assert.equal(statusAndBody(manyHeaders).json.error.code, 'headers_too_large');

    const huge = await exchange(server.port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(70_000)}\r\n\r\n`);
    assert.equal(statusAndBody(huge).status, 431);

    // Just under the bounds is served.
    let hundred = 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n';
    for (let i = 0; i < 98; ++i) hundred += `X-Header-${i}: ${i}\r\n`;
    const ok = await exchange(server.port, hundred + '\r\n');
    assert.match(ok, /^HTTP\/1\.1 200 /);
  });

  it('pipelined and kept-alive requests on one connection are each answered', async () => {
    const c = await connect(server.port);
    const get = 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n';
    c.socket.write(get + get); // two requests in one write
    assert.ok(await waitUntil(() => (c.received.match(/HTTP\/1\.1 200 /g) || []).length === 2, 5_000), c.received);
    c.socket.write(get); // a third, after the first two were answered
    assert.ok(await waitUntil(() => (c.received.match(/HTTP\/1\.1 200 /g) || []).length === 3, 5_000), c.received);
    assert.equal(c.closed, false);
    c.socket.destroy();
  });
});

describe('connection limit', () => {
  let server;
  before(async () => { server = await startServer({ args: [...SERVER_ARGS, '--max-connections', '8'] }); });
  after(async () => { await server?.stop(); });

  it('a connection over --max-connections gets 503 with Retry-After; a freed slot serves again', async () => {
    const held = [];
    for (let i = 0; i < 8; ++i) held.push(await connect(server.port));
    await new Promise((r) => setTimeout(r, 200));
    const refused = await exchange(server.port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const { status, json } = statusAndBody(refused);
    assert.equal(status, 503);
    assert.match(refused, /Retry-After: 1/);
    assert.equal(json.error.code, 'too_many_connections');
    for (const c of held) c.socket.destroy();
    await new Promise((r) => setTimeout(r, 300)); // the loop sees them close
    const health = await rawRequest(server.baseURL, { path: '/health', timeoutMs: 5_000 });
    assert.equal(health.status, 200);
  });
});
