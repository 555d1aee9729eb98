// JSON Schema through the server on the real model (SmolLM2-135M-Instruct), sampled: 100 answers for
// each of 15 schemas that use the keywords the compiler enforces (integer and number ranges, string lengths,
// pattern, formats, prefixItems, item counts, const and enum, oneOf of tagged objects, $defs /
// $ref, optional properties, multipleOf, patternProperties, dependentRequired, $ref by $id), each answer validated
// by ajv (draft 2020-12 with ajv-formats), not by our own code.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { startServer } from './helpers.mjs';

const MODEL = process.env.INFERLAB_SMOLLM2;
if (!MODEL) throw new Error('set INFERLAB_SMOLLM2 (CTest does)');
const server = await startServer(['--max-batch', '32', '--max-n', '20', '--served-model-name', 'smollm2'], { model: MODEL });
test.after(() => server.stop());
const client = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

const shortText = { type: 'string', minLength: 1, maxLength: 12 };
const schemas = {
  digit: { type: 'object', properties: { digit: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['digit'], additionalProperties: false },
  // zod's z.number().min(0.5).max(5) and an exclusive fractional range.
  rating: {
    type: 'object',
    properties: { stars: { type: 'number', minimum: 0.5, maximum: 5 }, offset: { type: 'number', exclusiveMinimum: -1.25, exclusiveMaximum: 0.75 } },
    required: ['stars', 'offset'], additionalProperties: false,
  },
  ranges: {
    type: 'object',
    properties: { year: { type: 'integer', minimum: 1900, maximum: 2030 }, delta: { type: 'integer', exclusiveMinimum: -50, exclusiveMaximum: 50 } },
    required: ['year', 'delta'], additionalProperties: false,
  },
  lengths: { type: 'object', properties: { code: { type: 'string', minLength: 3, maxLength: 5 }, tags: { type: 'array', items: shortText, minItems: 1, maxItems: 3 } }, required: ['code', 'tags'], additionalProperties: false },
  pattern: { type: 'object', properties: { phone: { type: 'string', pattern: '^[0-9]{3}-[0-9]{4}$' }, sku: { type: 'string', pattern: '^[A-Z]{2}[0-9]{2}$' } }, required: ['phone', 'sku'], additionalProperties: false },
  formats: {
    type: 'object',
    properties: { day: { type: 'string', format: 'date' }, at: { type: 'string', format: 'date-time' }, id: { type: 'string', format: 'uuid' }, mail: { type: 'string', format: 'email' } },
    required: ['day', 'at', 'id', 'mail'], additionalProperties: false,
  },
  tuple: { type: 'array', prefixItems: [shortText, { type: 'integer', minimum: 1, maximum: 5 }, { type: 'boolean' }], items: false, minItems: 3 },
  choices: { type: 'object', properties: { kind: { const: 'point' }, level: { enum: ['low', 'mid', 'high'] }, n: { enum: [1, 2, 3] } }, required: ['kind', 'level', 'n'], additionalProperties: false },
  tagged: {
    oneOf: [
      { type: 'object', properties: { type: { const: 'cat' }, lives: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['type', 'lives'], additionalProperties: false },
      { type: 'object', properties: { type: { const: 'dog' }, name: shortText }, required: ['type', 'name'], additionalProperties: false },
    ],
  },
  // $defs / $ref, a definition used twice (not recursive: a sampled model may nest a recursive one
  // past any max_tokens; recursion is checked by the grammar tests and the JSON Schema Test Suite).
  refs: {
    $defs: { point: { type: 'object', properties: { x: { type: 'integer', minimum: -9, maximum: 9 }, y: { type: 'integer', minimum: -9, maximum: 9 } }, required: ['x', 'y'], additionalProperties: false } },
    type: 'object', properties: { from: { $ref: '#/$defs/point' }, to: { $ref: '#/$defs/point' } }, required: ['from', 'to'], additionalProperties: false,
  },
  // Optional properties (any subset, in order). A map (propertyNames, additionalProperties as a
  // schema) is left to the JSON Schema Test Suite: its size has no bound a grammar can end on, and a
  // sampled model may go on past any max_tokens.
  optional: {
    type: 'object',
    properties: { a: { type: 'boolean' }, b: { type: 'integer', minimum: 0, maximum: 3 }, c: { enum: ['x', 'y'] } },
    additionalProperties: false,
  },
  // multipleOf within bounds (the range and the remainder digit by digit).
  steps: {
    type: 'object',
    properties: { even: { type: 'integer', multipleOf: 2, minimum: 0, maximum: 98 }, fives: { type: 'integer', multipleOf: 5, minimum: -50, maximum: 50 } },
    required: ['even', 'fives'], additionalProperties: false,
  },
  // patternProperties: names by regex, at most 3 of them so that the object ends.
  patterned: {
    type: 'object', patternProperties: { '^x_[a-z]{1,4}$': { type: 'integer', minimum: 0, maximum: 9 } },
    additionalProperties: false, minProperties: 1, maxProperties: 3,
  },
  // dependentRequired: a card needs a billing address.
  dependent: {
    type: 'object', properties: { card: shortText, billing: shortText, note: shortText },
    dependentRequired: { card: ['billing'] }, additionalProperties: false,
  },
  // $ref by a relative $id within the schema.
  byId: {
    $id: 'https://example.com/order.json',
    $defs: { item: { $id: 'item.json', type: 'object', properties: { sku: { type: 'string', pattern: '^[A-Z]{3}$' }, qty: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['sku', 'qty'], additionalProperties: false } },
    type: 'object', properties: { first: { $ref: 'item.json' }, second: { $ref: 'item.json' } }, required: ['first', 'second'], additionalProperties: false,
  },
};

for (const [name, schema] of Object.entries(schemas)) {
  test(`${name}: 100 sampled answers, each valid by ajv`, async () => {
    const validate = ajv.compile(schema);
    const answers = [];
    // 5 requests of n = 20, in flight together: the scheduler batches them.
    await Promise.all(Array.from({ length: 5 }, async (_, i) => {
      const r = await client.chat.completions.create({
        model: 'smollm2', n: 20, seed: 1000 + i, temperature: 1, max_tokens: 400,
        messages: [{ role: 'user', content: `Give an example of a ${name} as JSON.` }],
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
      });
      for (const c of r.choices) answers.push(c);
    }));
    assert.equal(answers.length, 100);
    for (const c of answers) {
      assert.equal(c.finish_reason, 'stop', `cut short: ${c.message.content}`);
      const value = JSON.parse(c.message.content);
      assert.ok(validate(value), `${c.message.content}: ${ajv.errorsText(validate.errors)}`);
    }
  });
}
