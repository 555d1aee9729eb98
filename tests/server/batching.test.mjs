// Continuous batching seen from outside: greedy over HTTP equals `inferlab generate`; 16 concurrent
// streams each get exactly their own tokens; 8 concurrent requests decode in batched steps.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, postJson, metrics, generateCli, tokenize } from './helpers.mjs';

const server = await startServer(['--max-batch', '16']);
test.after(() => server.stop());
const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 120_000 });

// The random-weight test model mostly repeats the prompt's last word: distinct last words give
// distinct continuations, so a token delivered to the wrong stream shows.
const words = ['apple', 'river', 'cloud', 'seven', 'orange', 'mountain', 'keyboard', 'violin', 'desert', 'pepper',
  'lantern', 'marble', 'rocket', 'tiger', 'velvet', 'harbor'];
const prompts = words.map((w) => `Tell me about ${w}`);

// Greedy completion text via a stream, with the token ids (logprobs carry each token's bytes).
async function streamCompletion(promptIds, maxTokens) {
  const stream = await client.completions.create({
    model: 'model', prompt: promptIds, max_tokens: maxTokens, temperature: 0, stream: true, ignore_eos: true,
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
  return text;
}

async function detokenize(ids) {
  const r = await postJson(server.base, '/detokenize', { tokens: ids });
  return r.json.prompt;
}

test('greedy output over HTTP equals inferlab generate', async () => {
  for (const prompt of prompts.slice(0, 3)) {
    const ids = await tokenize(server.base, { prompt });
    const cli = await generateCli(ids, 20);
    assert.equal(cli.tokens.length, 20);
    const http = await client.completions.create({ model: 'model', prompt: ids, max_tokens: 20, temperature: 0, ignore_eos: true });
    assert.equal(http.usage.completion_tokens, 20);
    assert.equal(http.choices[0].text, await detokenize(cli.tokens));
    // Chat: the rendered template's ids through the CLI give the chat completion's text.
    const messages = [{ role: 'user', content: prompt }];
    const chatIds = await tokenize(server.base, { messages });
    const chatCli = await generateCli(chatIds, 12);
    const chat = await client.chat.completions.create({ model: 'model', messages, max_tokens: 12, temperature: 0, ignore_eos: true });
    assert.equal(chat.choices[0].message.content, await detokenize(chatCli.tokens));
  }
});

test('16 concurrent streams each get exactly their own tokens', async () => {
  const ids = await Promise.all(prompts.map((p) => tokenize(server.base, { prompt: p })));
  const sequential = [];
  for (const p of ids) sequential.push(await streamCompletion(p, 24));
  assert.equal(new Set(sequential).size, sequential.length, 'distinct prompts give distinct outputs');
  const before = await metrics(server.base);
  const concurrent = await Promise.all(ids.map((p) => streamCompletion(p, 24)));
  const after = await metrics(server.base);
  for (let i = 0; i < prompts.length; i++) assert.equal(concurrent[i], sequential[i], `stream ${i}`);
  assert.ok(after.inferlab_batched_decode_steps_total > before.inferlab_batched_decode_steps_total);
});

test('8 concurrent requests run in batched decode steps (visible in /metrics)', async () => {
  const before = await metrics(server.base);
  await Promise.all(prompts.slice(0, 8).map((p) =>
    client.chat.completions.create({ model: 'model', messages: [{ role: 'user', content: p }], max_tokens: 32, temperature: 0, ignore_eos: true })));
  const after = await metrics(server.base);
  const batched = after.inferlab_batched_decode_steps_total - before.inferlab_batched_decode_steps_total;
  const steps = after.inferlab_decode_steps_total - before.inferlab_decode_steps_total;
  const tokens = after.inferlab_generation_tokens_total - before.inferlab_generation_tokens_total;
  console.log(`8 requests x 32 tokens: ${tokens} tokens in ${steps} decode steps, ${batched} of them batched`);
  assert.equal(tokens, 8 * 32);
  assert.ok(batched > 0, 'some decode steps carried more than one sequence');
  assert.ok(steps < tokens / 2, `${steps} steps for ${tokens} tokens: sequences shared steps`);
  const atMostOne = after['inferlab_decode_batch_size_bucket{le="1"}'] - before['inferlab_decode_batch_size_bucket{le="1"}'];
  assert.ok(atMostOne < steps, 'the batch-size histogram shows steps with batch > 1');
  let settled = after;
  for (let i = 0; i < 100 && settled.inferlab_running_requests !== 0; i++) {
    await new Promise((r) => setTimeout(r, 20));  // gauges are published after the engine step
    settled = await metrics(server.base);
  }
  assert.equal(settled.inferlab_running_requests, 0);
});

test('a shared prompt prefix is served from the prefix cache', async () => {
  const system = 'You are a helpful assistant who answers with great care and precision. '.repeat(4);
  const ask = (q) => client.chat.completions.create({
    model: 'model', max_tokens: 4, temperature: 0,
    messages: [{ role: 'system', content: system }, { role: 'user', content: q }],
  });
  const first = await ask('first question');
  const second = await ask('second question');
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 32, JSON.stringify(second.usage));
  const m = await metrics(server.base);
  assert.ok(m.inferlab_prefix_cache_hit_tokens_total >= 32);
});
