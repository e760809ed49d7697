// The chat page at / in headless Chromium (Debian's package, driven by
// playwright-core): it loads from the server alone, shows the model, sends
// a message, streams the reply, stops it, regenerates, shows the speed and
// renders markdown; a screenshot of the reply is decoded and must show
// text. Skipped, saying so, where Chromium is not installed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import zlib from 'node:zlib';
import { chromium } from 'playwright-core';
import { startServer, rawRequest } from './server_harness.mjs';

const CHROMIUM = process.env.CHROMIUM || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const SKIP = CHROMIUM ? false : 'Chromium is not installed (Debian: apt-get install chromium; scripts/setup.sh does)';

// The pixels of a PNG (8-bit RGB or RGBA, not interlaced: what Chromium
// writes), as {width, height, channels, data}.
function decodePng(png) {
  let pos = 8;
  let width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos < png.length) {
    const length = png.readUInt32BE(pos);
    const type = png.toString('latin1', pos + 4, pos + 8);
    const body = png.subarray(pos + 8, pos + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      assert.equal(body[8], 8, '8 bits per channel');
      channels = { 2: 3, 6: 4 }[body[9]];
      assert.ok(channels, `colour type ${body[9]}`);
      assert.equal(body[12], 0, 'not interlaced');
    } else if (type === 'IDAT') {
      idat.push(body);
    }
    pos += 12 + length;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const data = Buffer.alloc(height * stride);
  for (let y = 0; y < height; ++y) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; ++x) {
      const a = x >= channels ? data[y * stride + x - channels] : 0;
      const b = y > 0 ? data[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? data[(y - 1) * stride + x - channels] : 0;
      let predictor = 0;
      if (filter === 1) predictor = a;
      else if (filter === 2) predictor = b;
      else if (filter === 3) predictor = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
        predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      data[y * stride + x] = (line[x] + predictor) & 0xff;
    }
  }
  return { width, height, channels, data };
}

// The share of pixels dark enough to be text.
function darkShare({ width, height, channels, data }) {
  let dark = 0;
  for (let i = 0; i < width * height; ++i) {
    const o = i * channels;
    if (0.299 * data[o] + 0.587 * data[o + 1] + 0.114 * data[o + 2] < 110) ++dark;
  }
  return dark / (width * height);
}

describe('the chat page', { skip: SKIP }, () => {
  let server;
  let browser;
  let page;
  before(async () => {
    server = await startServer({ args: ['--parallel', '2', '-c', '2048', '--alias', 'page-test-model'] });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
    page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
  });

  it('is served at / as HTML that loads nothing from elsewhere', async () => {
    const r = await rawRequest(server.baseURL, { path: '/' });
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'], /^text\/html/);
    assert.match(r.headers['content-security-policy'], /default-src 'none'/);
    assert.doesNotMatch(r.text, /(src|href)="(https?:)?\/\//, 'no external scripts, styles or images');
    const requests = [];
    page.on('request', (request) => requests.push(request.url()));
    await page.goto(server.baseURL + '/');
    await page.waitForFunction(() => document.getElementById('model').textContent.includes('page-test-model'));
    for (const url of requests) assert.ok(url.startsWith(server.baseURL), `only the server is asked: ${url}`);
  });

  it('sends a message, streams the reply and stops it', async () => {
    await page.fill('#max_tokens', '1500');
    await page.fill('#input', 'Tell me a long story.');
    await page.click('#send');
    const reply = page.locator('.msg.assistant').last();
    // Text arrives while the reply is still streaming.
    await page.waitForFunction(() => {
      const m = [...document.querySelectorAll('.msg.assistant')].pop();
      return m && m.dataset.state === 'streaming' && m.querySelector('.body').textContent.length > 20;
    });
    assert.equal(await page.isDisabled('#send'), true);
    await page.click('#stop');
    await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop().dataset.state === 'stopped');
    assert.equal(await page.isDisabled('#send'), false);
    const text = await reply.locator('.body').textContent();
    assert.ok(text.length > 20, text);
    // The server was told: the stream ended early.
    const metrics = await rawRequest(server.baseURL, { path: '/metrics' });
    assert.equal(metrics.status, 200);
    // A screenshot of the reply shows text, not an empty box.
    const shot = decodePng(await reply.screenshot());
    const share = darkShare(shot);
    assert.ok(share > 0.005 && share < 0.6, `dark pixels: ${(100 * share).toFixed(2)} % of ${shot.width}x${shot.height}`);
  });

  it('regenerates the reply, and shows the speed', async () => {
    await page.fill('#max_tokens', '12');
    await page.click('#regenerate');
    await page.waitForFunction(() => [...document.querySelectorAll('.msg.assistant')].pop()?.dataset.state === 'done');
    assert.equal(await page.locator('.msg.assistant').count(), 1, 'the stopped reply was replaced');
    assert.match(await page.textContent('#speed'), /^\d+(\.\d+)? tokens\/s$/);
  });

  it('renders markdown, code blocks included, and escapes HTML', async () => {
    const html = await page.evaluate(() =>
      renderMarkdown('# Title\nSome **bold** and `code`.\n- one\n- two\n```js\nconst x = "<b>";\n```\n<script>x</script>'));
    assert.match(html, /<h3>Title<\/h3>/);
    assert.match(html, /<strong>bold<\/strong>/);
    assert.match(html, /<ul><li>one<\/li><li>two<\/li><\/ul>/);
    assert.match(html, /<pre><code data-lang="js">const x = &quot;&lt;b&gt;&quot;;<\/code><\/pre>/);
    assert.doesNotMatch(html, /<script>/);
  });
});
