// The small OpenAI API pieces real clients expect (issue 15's "API gaps"), through the official
// `openai` npm client where it exposes them: models.retrieve, x-request-id (`_request_id`),
// system_fingerprint, usage details, the /metrics reason of a stop string, SSE `: ping` comments.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, postJson, metrics, sseEvents, MODEL } from './helpers.mjs';

// --max-batch 1: a second stream waits in the queue while the first decodes (the ping test; the
// first is 2,000 tokens long: 400 ended within the 0.2 s ping interval once the kernels got faster).
const server = await startServer(['--max-batch', '1', '--sse-ping-interval', '0.2']);
test.after(() => server.stop());
const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 60_000 });
const messages = [{ role: 'user', content: 'Tell me about caches.' }];

test('models.retrieve: the served model by any accepted name; an unknown id is 404 model_not_found', async () => {
  const model = await client.models.retrieve('model');
  assert.equal(model.id, 'model');
  assert.equal(model.object, 'model');
  assert.equal(typeof model.created, 'number');
  assert.equal(model.owned_by, 'inferlab');
  // The path form is accepted too ('/' travels as %2F).
  assert.equal((await client.models.retrieve(MODEL)).id, 'model');
  await assert.rejects(client.models.retrieve('no-such-model'), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.code, 'model_not_found');
    assert.equal(e.param, 'model');
    assert.equal(e.type, 'invalid_request_error');
    assert.match(e.message, /no-such-model/);
    assert.ok(e.requestID, 'an error carries x-request-id too');
    return true;
  });
});

test('x-request-id on every answer: a sane client id is echoed, anything else replaced', async () => {
  const made = await client.chat.completions.create({ model: 'model', messages, max_tokens: 2 });
  assert.match(made._request_id, /^req_[0-9a-f]{24}$/);
  const other = await client.chat.completions.create({ model: 'model', messages, max_tokens: 2 });
  assert.notEqual(other._request_id, made._request_id);
  const echoed = await client.models.list({ headers: { 'x-request-id': 'trace-42.a:b_c' } }).withResponse();
  assert.equal(echoed.request_id, 'trace-42.a:b_c');
  for (const bad of ['x'.repeat(129), 'has space', 'semi;colon']) {
    const r = await fetch(server.base + '/v1/models', { headers: { 'x-request-id': bad } });
    assert.match(r.headers.get('x-request-id'), /^req_[0-9a-f]{24}$/, JSON.stringify(bad));
  }
  for (const [path, status] of [['/health', 200], ['/metrics', 200], ['/nowhere', 404]]) {
    const r = await fetch(server.base + path);
    assert.equal(r.status, status);
    assert.match(r.headers.get('x-request-id') ?? '', /^req_/, path);
  }
  const bad = await postJson(server.base, '/v1/chat/completions', '{not json');
  assert.equal(bad.status, 400);
  assert.match(bad.headers.get('x-request-id') ?? '', /^req_/);
});

test('system_fingerprint and usage details in bodies and in every chunk', async () => {
  const whole = await client.chat.completions.create({ model: 'model', messages, max_tokens: 3 });
  assert.match(whole.system_fingerprint, /^fp_[0-9a-f]{10}$/);
  assert.deepEqual(whole.usage.completion_tokens_details,
    { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
  assert.equal(typeof whole.usage.prompt_tokens_details.cached_tokens, 'number');
  assert.equal(whole.usage.prompt_tokens_details.audio_tokens, 0);
  const legacy = await client.completions.create({ model: 'model', prompt: 'Once', max_tokens: 3 });
  assert.equal(legacy.system_fingerprint, whole.system_fingerprint, 'one configuration, one fingerprint');
  assert.equal(legacy.usage.completion_tokens_details.reasoning_tokens, 0);
  const stream = await client.chat.completions.create({
    model: 'model', messages, max_tokens: 3, stream: true, stream_options: { include_usage: true },
  });
  let chunks = 0;
  let usage = null;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.system_fingerprint, whole.system_fingerprint);
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(chunks >= 3);
  assert.equal(usage.completion_tokens_details.reasoning_tokens, 0);
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
});

test('/metrics counts a request ended by a stop string as stop, not cancelled', async () => {
  // The text a greedy run makes, then a stop string from its middle.
  const body = { model: 'model', prompt: 'Once upon a time', max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(body)).choices[0].text;
  const chars = [...full];
  const stop = chars.slice(8, 11).join('');
  const before = await metrics(server.base);
  for (const stream of [false, true]) {
    if (stream) {
      const s = await client.completions.create({ ...body, stop, stream: true });
      for await (const _ of s);
    } else {
      const r = await client.completions.create({ ...body, stop });
      assert.equal(r.choices[0].finish_reason, 'stop');
    }
  }
  // The engine counts the finish at its next step: wait for it.
  let after = null;
  for (let i = 0; i < 100; i++) {
    after = await metrics(server.base);
    if (after['inferlab_requests_finished_total{reason="stop"}'] - before['inferlab_requests_finished_total{reason="stop"}'] >= 2) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const delta = (reason) => after[`inferlab_requests_finished_total{reason="${reason}"}`] -
    before[`inferlab_requests_finished_total{reason="${reason}"}`];
  assert.equal(delta('stop'), 2);
  assert.equal(delta('cancelled'), 0);
});

// Raw bytes of a stream that waits in the queue behind a long one (--max-batch 1).
async function queuedStreamBytes(base) {
  const long = fetch(base + '/v1/completions', {
    method: 'POST',
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 2000, ignore_eos: true, temperature: 0 }),
  }).then((r) => r.text());
  await new Promise((r) => setTimeout(r, 100));
  const r = await fetch(base + '/v1/completions', {
    method: 'POST',
    body: JSON.stringify({ prompt: 'Once', max_tokens: 2, stream: true }),
  });
  const raw = await r.text();
  await long;
  return raw;
}

test('SSE `: ping` comments while a stream waits, ignored by the openai client; none with --sse-ping-interval 0', async () => {
  const raw = await queuedStreamBytes(server.base);
  const firstData = raw.indexOf('data: ');
  assert.ok(raw.slice(0, firstData).includes(': ping\n\n'), `a ping before the first event:\n${raw.slice(0, 300)}`);
  assert.match(raw, /^(: ping\n\n)+data: /, 'pings are whole comment events');
  assert.equal(sseEvents(raw).pop(), '[DONE]');

  // The official client skips the comments: the same queued stream reads as plain chunks.
  const long = client.completions.create({ model: 'model', prompt: 'Once upon a time', max_tokens: 2000, ignore_eos: true });
  await new Promise((r) => setTimeout(r, 100));
  let text = '';
  for await (const chunk of await client.completions.create({ model: 'model', prompt: 'Once', max_tokens: 4, stream: true }))
    text += chunk.choices[0]?.text ?? '';
  await long;
  assert.ok(text.length > 0);

  const quiet = await startServer(['--max-batch', '1', '--sse-ping-interval', '0']);
  try {
    const rawQuiet = await queuedStreamBytes(quiet.base);
    assert.ok(!rawQuiet.includes(': ping'), rawQuiet.slice(0, 200));
    assert.ok(rawQuiet.startsWith('data: '));
  } finally {
    await quiet.stop();
  }
});
