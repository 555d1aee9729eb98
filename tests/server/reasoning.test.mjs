// Reasoning output of a thinking model (Qwen3's template) through the official `openai` npm client:
// message.reasoning_content apart from the answer, streamed as delta.reasoning_content before the
// content, counted in usage; a json_schema answer after free thoughts. The model has random
// weights, so `inferlab serve --test-hooks` lets each request name the tokens to pick
// (test_forced_output, honoured only while a grammar allows them): under test are the server's
// parsing, the grammar's start at </think> and the streaming.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

const server = await startServer(['--test-hooks']);
test.after(() => server.stop());
const client = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'What is 2 + 2?' }];
const forced = '<think>\nTwo and two.\nFour.\n</think>\n\nIt is 4.<|im_end|>';

test('a whole answer: reasoning_content apart from the content, counted in usage', async () => {
  const r = await client.chat.completions.create({ model: 'model', messages, max_tokens: 64, temperature: 0, test_forced_output: forced });
  const message = r.choices[0].message;
  assert.equal(message.reasoning_content, 'Two and two.\nFour.');
  assert.equal(message.content, 'It is 4.');
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 5, JSON.stringify(r.usage));
  assert.ok(r.usage.completion_tokens_details.reasoning_tokens < r.usage.completion_tokens);
});

test('streamed: reasoning deltas first, then content deltas, the same texts', async () => {
  const stream = await client.chat.completions.create({
    model: 'model', messages, max_tokens: 64, temperature: 0, stream: true, stream_options: { include_usage: true }, test_forced_output: forced,
  });
  let reasoning = '', content = '', seenContent = false, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.reasoning_content) {
        assert.ok(!seenContent, 'no thoughts after the answer started');
        reasoning += choice.delta.reasoning_content;
      }
      if (choice.delta.content) {
        seenContent = true;
        content += choice.delta.content;
      }
    }
  }
  assert.equal(reasoning, 'Two and two.\nFour.');
  assert.equal(content, 'It is 4.');
  assert.ok(usage.completion_tokens_details.reasoning_tokens > 5);
});

test('json_schema on a thinking model: free thoughts, then JSON by the schema', async () => {
  const r = await client.chat.completions.create({
    model: 'model', messages, max_tokens: 400, temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'answer', strict: true, schema: {
      type: 'object', properties: { answer: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['answer'], additionalProperties: false } } },
    test_forced_output: '<think>\nNo JSON { here.\n</think>\n\nIt is 4.',
  });
  const message = r.choices[0].message;
  assert.equal(message.reasoning_content, 'No JSON { here.');
  const answer = JSON.parse(message.content);
  assert.deepEqual(Object.keys(answer), ['answer']);
  assert.ok(Number.isInteger(answer.answer) && answer.answer >= 0 && answer.answer <= 9, message.content);
});

test('max_tokens inside the thoughts: length and no half answer', async () => {
  const r = await client.chat.completions.create({ model: 'model', messages, max_tokens: 4, temperature: 0, test_forced_output: forced });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(!r.choices[0].message.content, JSON.stringify(r.choices[0].message));
  assert.ok(r.choices[0].message.reasoning_content.length > 0);
});
