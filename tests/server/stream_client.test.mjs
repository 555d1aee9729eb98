// The course's stream client scenario, unchanged, with the official `openai` npm client:
// list models, stream a chat completion (max_tokens=64, temperature=0), print E2E and first content.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

test('openai client: course stream_client scenario', async (t) => {
  const server = await startServer();
  t.after(() => server.stop());

  const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 60_000 });
  const model = (await client.models.list()).data[0].id;
  const messages = [{ role: 'user', content: '用一句话解释 KV Cache。' }];
  const started = performance.now();
  let firstContent = null;
  let text = '';
  let chunks = 0;
  let finish = null;

  const stream = await client.chat.completions.create({
    model, messages, stream: true, max_tokens: 64, temperature: 0,
  });
  for await (const chunk of stream) {
    chunks++;
    const piece = chunk.choices.length ? chunk.choices[0].delta.content : null;
    if (chunk.choices.length && chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
    if (piece) {
      if (firstContent === null) firstContent = performance.now();
      process.stdout.write(piece);
      text += piece;
    }
  }
  const ended = performance.now();
  console.log(`\nE2E: ${(ended - started).toFixed(1)} ms`);
  if (firstContent !== null) console.log(`First content: ${(firstContent - started).toFixed(1)} ms`);

  assert.equal(model, 'model');
  assert.ok(['stop', 'length'].includes(finish), `finish_reason ${finish}`);
  assert.ok(text.length > 0, 'some content arrived');
  assert.ok(firstContent !== null && firstContent <= ended);
  assert.ok(chunks >= 3, 'role chunk, content, final chunk');

  // The same call without streaming gives the same text (greedy) and usage.
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 64, temperature: 0 });
  assert.equal(whole.choices[0].message.content, text);
  assert.equal(whole.choices[0].finish_reason, finish);
  assert.ok(whole.usage.prompt_tokens > 0);
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
  if (finish === 'length') assert.equal(whole.usage.completion_tokens, 64);
});
