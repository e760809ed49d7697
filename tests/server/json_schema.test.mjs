// Structured output checked by a standard validator: every schema of
// json_schemas.mjs, 50 seeded generations each on the random-weight test
// model (which writes anything the grammar allows), through `cortiq run
// --json-schema` and through the server's response_format with the openai
// client; every output must parse and pass ajv (JSON Schema 2020-12 with
// ajv-formats). Also: json_object, the "grammar" extension, streaming, and
// a 400 naming the problem for a schema a grammar cannot express.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { startServer, postJson, testModel, cliPath } from './server_harness.mjs';
import { SCHEMAS } from './json_schemas.mjs';

const run = promisify(execFile);
const SEEDS = 50;
// Enough for the longest outputs seen (a free string may run a few hundred
// tokens before the model samples its closing quote): a generation that
// hits it fails the test, since a cut-off text is not JSON.
const MAX_TOKENS = 1800;
const PROMPT = 'Answer with JSON:';

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

// Runs fn over the items, `limit` at a time; the results in order.
async function pool(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i], i);
    }
  }
  await Promise.all(Array.from({ length: limit }, worker));
  return results;
}

// Why `text` is not a valid answer to the schema, or null.
function problem(validate, text, finishReason) {
  if (finishReason !== 'stop') return `finish_reason ${finishReason}`;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON (${error.message})`;
  }
  if (!validate(value)) return ajv.errorsText(validate.errors);
  return null;
}

function report(failures) {
  return failures.slice(0, 5).map((f) => `${f.name}, seed ${f.seed}: ${f.why}\n  ${JSON.stringify(f.text).slice(0, 400)}`).join('\n');
}

describe('JSON Schema outputs (ajv)', () => {
  it(`every schema has a validator and at least 20 are tested`, () => {
    assert.ok(SCHEMAS.length >= 20, `${SCHEMAS.length} schemas`);
    for (const { name, schema } of SCHEMAS) assert.doesNotThrow(() => ajv.compile(schema), name);
  });

  it(`cortiq run --json-schema: ${SEEDS} seeds per schema validate`, async () => {
    const model = testModel();
    const jobs = SCHEMAS.flatMap(({ name, schema }) =>
      Array.from({ length: SEEDS }, (_, i) => ({ name, schema, seed: i + 1 })));
    const failures = [];
    let tokens = 0;
    await pool(jobs, 2, async ({ name, schema, seed }) => {
      const { stdout } = await run(cliPath(), ['run', '-m', model, '-p', PROMPT, '-t', '1', '--json-schema',
        JSON.stringify(schema), '--seed', String(seed), '--temp', '1', '-n', String(MAX_TOKENS), '--json'],
      { maxBuffer: 1 << 26 });
      const result = JSON.parse(stdout);
      tokens += result.generated_tokens;
      const why = problem(compileNamed(name, schema), result.text, result.finish_reason);
      if (why) failures.push({ name, seed, why, text: result.text });
    });
    assert.equal(failures.length, 0, `${failures.length} of ${jobs.length} outputs fail:\n${report(failures)}`);
    assert.ok(tokens > jobs.length * 5, `${tokens} tokens in all`);
  });

  describe('through the server (response_format)', () => {
    let server;
    let client;
    before(async () => {
      server = await startServer({ args: ['--parallel', '8', '-c', '2048'] });
      client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: 'x', maxRetries: 0, timeout: 300_000 });
    });
    after(async () => {
      await server?.stop();
    });

    it(`${SEEDS} seeds per schema validate`, async () => {
      const jobs = SCHEMAS.flatMap(({ name, schema }) =>
        Array.from({ length: SEEDS }, (_, i) => ({ name, schema, seed: i + 1 })));
      const failures = [];
      await pool(jobs, 8, async ({ name, schema, seed }) => {
        const r = await client.chat.completions.create({
          messages: [{ role: 'user', content: PROMPT }],
          response_format: { type: 'json_schema', json_schema: { name: name.replace(/\W+/g, '_'), schema, strict: true } },
          seed,
          temperature: 1,
          max_tokens: MAX_TOKENS,
        });
        const choice = r.choices[0];
        const why = problem(compileNamed(name, schema), choice.message.content, choice.finish_reason);
        if (why) failures.push({ name, seed, why, text: choice.message.content });
      });
      assert.equal(failures.length, 0, `${failures.length} of ${jobs.length} outputs fail:\n${report(failures)}`);
    });

    it('keeps the members in the order the schema declares them', async () => {
      const schema = { type: 'object', properties: { zeta: { type: 'integer' }, alpha: { type: 'boolean' } }, required: ['zeta', 'alpha'] };
      const r = await client.chat.completions.create({
        messages: [{ role: 'user', content: PROMPT }],
        response_format: { type: 'json_schema', json_schema: { name: 'ordered', schema } },
        seed: 3,
        max_tokens: 200,
      });
      const text = r.choices[0].message.content;
      assert.deepEqual(Object.keys(JSON.parse(text)), ['zeta', 'alpha'], text);
    });

    it('json_object gives an object, streamed or not, on completions too', async () => {
      for (const seed of [1, 2, 3]) {
        const r = await client.chat.completions.create({
          messages: [{ role: 'user', content: PROMPT }],
          response_format: { type: 'json_object' },
          seed,
          temperature: 1,
          max_tokens: MAX_TOKENS,
        });
        const value = JSON.parse(r.choices[0].message.content);
        assert.equal(typeof value, 'object');
        assert.ok(value !== null && !Array.isArray(value));
      }
      const stream = await client.chat.completions.create({
        messages: [{ role: 'user', content: PROMPT }],
        response_format: { type: 'json_schema', json_schema: { name: 'n', schema: SCHEMAS[8].schema } },
        seed: 4,
        temperature: 1,
        max_tokens: MAX_TOKENS,
        stream: true,
      });
      let text = '';
      let finish = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(finish, 'stop');
      assert.equal(problem(compileNamed(SCHEMAS[8].name, SCHEMAS[8].schema), text, finish), null, text);
      const completion = await client.completions.create({
        model: 'm',
        prompt: PROMPT,
        response_format: { type: 'json_schema', json_schema: { name: 'e', schema: SCHEMAS[2].schema } },
        seed: 5,
        max_tokens: 100,
      });
      assert.ok(SCHEMAS[2].schema.enum.some((v) => JSON.stringify(v) === completion.choices[0].text), completion.choices[0].text);
    });

    it('takes a GBNF grammar ("grammar", as llama-server does)', async () => {
      const r = await postJson(server.baseURL, '/v1/chat/completions', {
        messages: [{ role: 'user', content: 'Yes or no?' }],
        grammar: 'root ::= "yes" | "no"',
        seed: 1,
        temperature: 1,
      });
      assert.equal(r.status, 200, r.text);
      assert.ok(['yes', 'no'].includes(r.json.choices[0].message.content), r.text);
    });

    it('answers 400 naming what a schema or grammar cannot say', async () => {
      const cases = [
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'uri' } } } },
          /response_format\.json_schema\.schema.*format "uri" is not supported/],
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { not: {} } } } }, /"not" cannot be expressed/],
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/$defs/none' } } } }, /does not resolve/],
        [{ response_format: { type: 'json_schema' } }, /needs a 'json_schema' object/],
        [{ response_format: { type: 'yaml' } }, /'response_format.type' must be/],
        [{ grammar: 'root ::= "a' }, /'grammar': grammar line 1, column \d+/],
        [{ grammar: 'root ::= x' }, /'grammar':.*x/],
      ];
      for (const [fields, message] of cases) {
        const r = await postJson(server.baseURL, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], ...fields });
        assert.equal(r.status, 400, `${JSON.stringify(fields)}: ${r.text}`);
        assert.match(r.json.error.message, message, JSON.stringify(fields));
      }
    });
  });
});

const validators = new Map();
function compileNamed(name, schema) {
  if (!validators.has(name)) validators.set(name, ajv.compile(schema));
  return validators.get(name);
}
