// OpenAI wire format over plain HTTP: SSE framing, chunk shapes, usage, logprobs, stop strings,
// seeds, n, tokenize/detokenize, and errors in OpenAI's shape.
import test from 'node:test';
import assert from 'node:assert/strict';
import { startServer, postJson, sseEvents, metrics, tokenize } from './helpers.mjs';

const server = await startServer();
test.after(() => server.stop());
const chat = (body) => postJson(server.base, '/v1/chat/completions', body);
const complete = (body) => postJson(server.base, '/v1/completions', body);
const messages = [{ role: 'user', content: 'Tell me about caches.' }];

function assertError(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, `error body: ${r.text}`);
  for (const key of ['message', 'type', 'param', 'code']) assert.ok(key in r.json.error, `error.${key} in ${r.text}`);
  assert.equal(typeof r.json.error.message, 'string');
  assert.ok(r.json.error.message.length > 0);
  if (param !== undefined) assert.equal(r.json.error.param, param);
}

test('health, models and metrics endpoints', async () => {
  const health = await fetch(server.base + '/health');
  assert.equal(health.status, 200);
  const models = await (await fetch(server.base + '/v1/models')).json();
  assert.equal(models.object, 'list');
  assert.equal(models.data[0].id, 'model');
  assert.equal(models.data[0].object, 'model');
  const m = await metrics(server.base);
  for (const name of ['inferlab_queue_length', 'inferlab_running_requests', 'inferlab_kv_cache_blocks_used',
    'inferlab_kv_cache_blocks_total', 'inferlab_kv_cache_usage_ratio', 'inferlab_generation_tokens_total',
    'inferlab_batched_decode_steps_total', 'inferlab_time_to_first_token_seconds_count',
    'inferlab_inter_token_latency_seconds_count', 'inferlab_e2e_request_latency_seconds_count',
    'inferlab_decode_batch_size_count', 'inferlab_prompt_tokens_total'])
    assert.ok(name in m, `${name} in /metrics`);
});

test('streaming chat: framing, one id, role first, finish chunk, usage only when asked, [DONE]', async () => {
  for (const includeUsage of [false, true]) {
    const body = { model: 'model', messages, stream: true, max_tokens: 12, temperature: 0 };
    if (includeUsage) body.stream_options = { include_usage: true };
    const r = await fetch(server.base + '/v1/chat/completions', { method: 'POST', body: JSON.stringify(body) });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^text\/event-stream/);
    const raw = await r.text();
    assert.ok(raw.endsWith('data: [DONE]\n\n'));
    const events = sseEvents(raw);
    assert.equal(events.pop(), '[DONE]');
    const chunks = events.map((e) => JSON.parse(e));
    const ids = new Set(chunks.map((c) => c.id));
    const created = new Set(chunks.map((c) => c.created));
    assert.equal(ids.size, 1);
    assert.equal(created.size, 1);
    assert.match([...ids][0], /^chatcmpl-/);
    for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    let usageChunk = null;
    if (includeUsage) {
      usageChunk = chunks.pop();
      assert.deepEqual(usageChunk.choices, []);
      assert.equal(usageChunk.usage.completion_tokens, 12);
      assert.equal(usageChunk.usage.total_tokens, usageChunk.usage.prompt_tokens + 12);
    } else {
      for (const c of chunks) assert.ok(!('usage' in c) || c.usage === null);
    }
    const last = chunks.pop();
    assert.equal(last.choices[0].finish_reason, 'length');
    assert.deepEqual(last.choices[0].delta, {});
    for (const c of chunks.slice(1)) {
      assert.equal(c.choices[0].finish_reason, null);
      assert.equal(typeof c.choices[0].delta.content, 'string');
      assert.ok(!c.choices[0].delta.content.includes('\uFFFD'), 'whole UTF-8 only');
    }
    const streamed = chunks.slice(1).map((c) => c.choices[0].delta.content).join('');
    const whole = await chat({ model: 'model', messages, max_tokens: 12, temperature: 0 });
    assert.equal(whole.status, 200);
    assert.equal(whole.json.object, 'chat.completion');
    assert.equal(whole.json.choices[0].message.role, 'assistant');
    assert.equal(whole.json.choices[0].message.content, streamed);
    assert.equal(whole.json.usage.completion_tokens, 12);
  }
});

test('streaming completions and prompt as token ids', async () => {
  const ids = await tokenize(server.base, { prompt: 'The cache holds' });
  const r = await fetch(server.base + '/v1/completions', {
    method: 'POST',
    body: JSON.stringify({ prompt: ids, max_tokens: 6, temperature: 0, stream: true }),
  });
  const events = sseEvents(await r.text());
  assert.equal(events.pop(), '[DONE]');
  const chunks = events.map((e) => JSON.parse(e));
  for (const c of chunks) assert.equal(c.object, 'text_completion');
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
  const text = chunks.map((c) => c.choices[0].text).join('');
  const whole = await complete({ prompt: 'The cache holds', max_tokens: 6, temperature: 0 });
  assert.equal(whole.json.choices[0].text, text);
  assert.equal(whole.json.usage.prompt_tokens, ids.length);
  const echo = await complete({ prompt: 'The cache holds', max_tokens: 6, temperature: 0, echo: true });
  assert.equal(echo.json.choices[0].text, 'The cache holds' + text);
});

test('stop strings end the text before the stop, also when split across tokens', async () => {
  const base = await complete({ prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true });
  const full = base.json.choices[0].text;
  assert.ok(full.length >= 6, `need some text: ${JSON.stringify(full)}`);
  // A stop string spanning a token boundary: the middle of the text, 3 characters.
  const chars = [...full];
  const at = Math.floor(chars.length / 2);
  const stop = chars.slice(at, at + 3).join('');
  const expected = full.slice(0, full.indexOf(stop));
  for (const stream of [false, true]) {
    const body = { prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true, stop: [stop, 'never-appears'], stream };
    let text, finish;
    if (stream) {
      const raw = await (await fetch(server.base + '/v1/completions', { method: 'POST', body: JSON.stringify(body) })).text();
      const chunks = sseEvents(raw).slice(0, -1).map((e) => JSON.parse(e));
      text = chunks.map((c) => c.choices[0].text).join('');
      finish = chunks.at(-1).choices[0].finish_reason;
    } else {
      const r = await complete(body);
      text = r.json.choices[0].text;
      finish = r.json.choices[0].finish_reason;
    }
    assert.equal(text, expected, `stream=${stream} stop=${JSON.stringify(stop)}`);
    assert.equal(finish, 'stop');
  }
});

test('seeded sampling: same seed same text, n choices differ', async () => {
  const body = { messages, max_tokens: 16, temperature: 1.0, top_p: 0.95, seed: 1234 };
  const a = await chat(body), b = await chat(body), c = await chat({ ...body, seed: 99 });
  assert.equal(a.json.choices[0].message.content, b.json.choices[0].message.content);
  assert.notEqual(a.json.choices[0].message.content, c.json.choices[0].message.content);
  const many = await chat({ ...body, n: 3 });
  assert.equal(many.status, 200);
  assert.deepEqual(many.json.choices.map((x) => x.index), [0, 1, 2]);
  assert.equal(many.json.choices[0].message.content, a.json.choices[0].message.content);
  assert.equal(new Set(many.json.choices.map((x) => x.message.content)).size, 3);
  assert.equal(many.json.usage.completion_tokens, 48);
  const streamed = await fetch(server.base + '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ ...body, n: 2, stream: true }) });
  const chunks = sseEvents(await streamed.text()).slice(0, -1).map((e) => JSON.parse(e));
  const texts = ['', ''];
  for (const ch of chunks) for (const x of ch.choices) texts[x.index] += x.delta.content ?? '';
  assert.equal(texts[0], many.json.choices[0].message.content);
  assert.equal(texts[1], many.json.choices[1].message.content);
});

test('logprobs in chat and completions shapes', async () => {
  const r = await chat({ messages, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
  assert.equal(r.status, 200, r.text);
  const content = r.json.choices[0].logprobs.content;
  assert.equal(content.length, 4);
  for (const entry of content) {
    assert.equal(typeof entry.token, 'string');
    assert.ok(entry.logprob <= 0);
    assert.ok(Array.isArray(entry.bytes));
    assert.equal(entry.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.equal(entry.top_logprobs[0].logprob, entry.logprob);
  }
  const bytes = Buffer.from(content.flatMap((e) => e.bytes)).toString('utf8');
  assert.equal(bytes, r.json.choices[0].message.content, 'token bytes concatenate to the content');
  const c = await complete({ prompt: 'Hello', max_tokens: 3, temperature: 0, logprobs: 2 });
  const lp = c.json.choices[0].logprobs;
  assert.equal(lp.tokens.length, 3);
  assert.equal(lp.token_logprobs.length, 3);
  assert.equal(lp.top_logprobs.length, 3);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.deepEqual(lp.text_offset.slice(0, 1), [0]);
  const none = await chat({ messages, max_tokens: 2 });
  assert.equal(none.json.choices[0].logprobs, null);
});

test('tokenize and detokenize round-trip', async () => {
  const ids = await tokenize(server.base, { prompt: 'Hello, 世界!' });
  assert.ok(ids.length > 0);
  const r = await postJson(server.base, '/detokenize', { tokens: ids });
  assert.equal(r.status, 200);
  assert.equal(r.json.prompt, 'Hello, 世界!');
  const chatIds = await tokenize(server.base, { messages });
  const whole = await chat({ messages, max_tokens: 1 });
  assert.equal(whole.json.usage.prompt_tokens, chatIds.length);
  assertError(await postJson(server.base, '/detokenize', { tokens: [-1] }), 400, 'tokens');
  assertError(await postJson(server.base, '/tokenize', { prompt: 5 }), 400, 'prompt');
});

test('bad requests get OpenAI-shaped 4xx errors', async () => {
  assertError(await postJson(server.base, '/v1/chat/completions', '{"messages": ['), 400);
  assertError(await postJson(server.base, '/v1/chat/completions', '[1,2]'), 400);
  assertError(await chat({ model: 'no-such-model', messages }), 404, 'model');
  assert.equal((await chat({ model: 'no-such-model', messages })).json.error.code, 'model_not_found');
  assertError(await chat({ messages: [] }), 400, 'messages');
  assertError(await chat({}), 400, 'messages');
  assertError(await chat({ messages: 'hi' }), 400, 'messages');
  assertError(await chat({ messages: [{ role: 'wizard', content: 'x' }] }), 400, 'messages');
  assertError(await chat({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }), 400, 'messages');
  assertError(await chat({ messages, max_tokens: 0 }), 400, 'max_tokens');
  assertError(await chat({ messages, max_tokens: -5 }), 400, 'max_tokens');
  assertError(await chat({ messages, max_tokens: 'ten' }), 400, 'max_tokens');
  assertError(await chat({ messages, max_tokens: 1e30 }), 400, 'max_tokens');
  assertError(await chat({ messages, max_tokens: 100000 }), 400, 'messages');
  assertError(await chat({ messages, temperature: 'hot' }), 400, 'temperature');
  assertError(await chat({ messages, temperature: 5 }), 400, 'temperature');
  assertError(await chat({ messages, top_p: 0 }), 400, 'top_p');
  assertError(await chat({ messages, n: 1000 }), 400, 'n');
  assertError(await chat({ messages, n: 0 }), 400, 'n');
  assertError(await chat({ messages, stop: 7 }), 400, 'stop');
  assertError(await chat({ messages, stream: 'yes' }), 400, 'stream');
  assertError(await chat({ messages, stream_options: { include_usage: true } }), 400, 'stream_options');
  assertError(await chat({ messages, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 400, 'tool_choice');
  assertError(await chat({ messages, tool_choice: 'required' }), 400, 'tool_choice');
  assertError(await chat({ messages, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'phone' } } } }), 400, 'response_format');
  assertError(await chat({ messages, response_format: { type: 'yaml' } }), 400, 'response_format');
  assertError(await chat({ messages, top_logprobs: 3 }), 400, 'top_logprobs');
  assertError(await chat({ messages, logit_bias: { 'abc': 1 } }), 400, 'logit_bias');
  const huge = 'word '.repeat(5000);
  const tooLong = await complete({ prompt: huge, max_tokens: 4 });
  assertError(tooLong, 400, 'prompt');
  assert.equal(tooLong.json.error.code, 'context_length_exceeded');
  assertError(await complete({ prompt: [1, 2, 99999999] }), 400, 'prompt');
  assertError(await complete({ prompt: { text: 'x' } }), 400, 'prompt');
  assertError(await complete({ prompt: 'x', suffix: 'y' }), 400, 'suffix');
  assertError(await complete({ prompt: 'x', best_of: 3 }), 400, 'best_of');
  const missing = await fetch(server.base + '/v1/nothing-here');
  assert.equal(missing.status, 404);
  assert.ok((await missing.json()).error.message.includes('/v1/nothing-here'));
  // Unknown fields are ignored.
  const extra = await chat({ messages, max_tokens: 2, some_future_field: { a: 1 }, user: 'u1' });
  assert.equal(extra.status, 200);
});

test('overload: a full queue answers 503 with Retry-After', async () => {
  const small = await startServer(['--max-queue', '1', '--max-batch', '1']);
  try {
    // One running and one queued at most: of 8 arriving together, some must be refused.
    const long = { prompt: 'a b c', max_tokens: 200, ignore_eos: true, temperature: 0 };
    const results = await Promise.all(Array.from({ length: 8 }, () => postJson(small.base, '/v1/completions', long)));
    const refused = results.filter((r) => r.status === 503);
    const served = results.filter((r) => r.status === 200);
    assert.ok(refused.length > 0, `statuses: ${results.map((r) => r.status)}`);
    assert.ok(served.length >= 1, `statuses: ${results.map((r) => r.status)}`);
    assert.equal(served.length + refused.length, results.length, `statuses: ${results.map((r) => r.status)}`);
    assert.equal(refused[0].headers.get('retry-after'), '1');
    assert.match(refused[0].json.error.message, /queued/);
    for (const r of served) assert.equal(r.json.usage.completion_tokens, 200);
  } finally {
    await small.stop('SIGKILL');
  }
});
