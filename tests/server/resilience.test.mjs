// A client that disconnects mid-stream frees its slot and KV blocks at once; 1000 malformed
// requests all get 4xx and the server keeps serving; SIGTERM ends in-flight streams cleanly.
import test from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, postJson, metrics, sleep, sseEvents } from './helpers.mjs';

test('disconnect mid-stream frees the slot and KV blocks', async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const idle = await metrics(server.base);
  assert.equal(idle.inferlab_kv_cache_blocks_used, 0);
  const controller = new AbortController();
  const r = await fetch(server.base + '/v1/chat/completions', {
    method: 'POST', signal: controller.signal,
    body: JSON.stringify({ messages: [{ role: 'user', content: 'go on forever' }], max_tokens: 3000, ignore_eos: true, stream: true, temperature: 0 }),
  });
  const reader = r.body.getReader();
  let received = 0;
  while (received < 5) {
    const { value } = await reader.read();
    received += new TextDecoder().decode(value).split('data: ').length - 1;
  }
  const busy = await metrics(server.base);
  assert.equal(busy.inferlab_running_requests, 1);
  assert.ok(busy.inferlab_kv_cache_blocks_used > 0);
  controller.abort();
  let after = null;
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    after = await metrics(server.base);
    if (after.inferlab_running_requests === 0 && after.inferlab_kv_cache_blocks_used === 0) break;
    await sleep(20);
  }
  assert.equal(after.inferlab_running_requests, 0);
  assert.equal(after.inferlab_kv_cache_blocks_used, idle.inferlab_kv_cache_blocks_used);
  assert.equal(after['inferlab_requests_finished_total{reason="cancelled"}'], 1);
  assert.ok(after.inferlab_generation_tokens_total < 3000, 'generation stopped early');
});

// Deterministic pseudo-random generator so a failure can be replayed.
function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

function malformedBodies(count) {
  const rand = rng(20241202);
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const junkValues = [null, true, false, -1, 0, 1e309, -1e308, 2 ** 63, 1.5, '', 'x'.repeat(50), [], {}, [1, 'a'], { a: 1 }, 'NaN'];
  const fields = ['messages', 'prompt', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'top_k', 'min_p',
    'n', 'stop', 'stream', 'stream_options', 'seed', 'logprobs', 'top_logprobs', 'frequency_penalty', 'presence_penalty',
    'logit_bias', 'model', 'tools', 'tool_choice', 'response_format', 'ignore_eos', 'echo', 'best_of', 'suffix'];
  const out = [];
  while (out.length < count) {
    const kind = out.length % 5;
    const chat = rand() < 0.5;
    const route = chat ? '/v1/chat/completions' : '/v1/completions';
    if (kind === 0) {
      // Random bytes.
      const bytes = Buffer.alloc(1 + Math.floor(rand() * 200));
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rand() * 256);
      if (bytes[0] === 0x7b || bytes[0] === 0x5b) bytes[0] = 0x21;  // never accidentally valid JSON
      out.push({ route, body: bytes });
    } else if (kind === 1) {
      // Truncated or broken JSON.
      const good = JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], prompt: 'hi', max_tokens: 2 });
      out.push({ route, body: good.slice(0, Math.floor(rand() * (good.length - 1))) });
    } else if (kind === 2) {
      // Valid JSON that is not an object.
      out.push({ route, body: JSON.stringify(pick([[], [1, 2], 'text', 42, null, true])) });
    } else if (kind === 3) {
      // Missing the required field.
      const body = { max_tokens: 2 };
      body[pick(fields.filter((f) => f !== 'messages' && f !== 'prompt'))] = pick(junkValues);
      out.push({ route, body: JSON.stringify(body) });
    } else {
      // The required field present, one field of a wrong type or out of range.
      const body = chat ? { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 } : { prompt: 'hi', max_tokens: 2 };
      const field = pick(['max_tokens', 'temperature', 'top_p', 'n', 'stop', 'stream', 'seed', 'logprobs',
        'frequency_penalty', 'presence_penalty', 'logit_bias', 'model', chat ? 'messages' : 'prompt', 'top_k', 'min_p']);
      const bad = {
        max_tokens: [0, -3, 'ten', 1e12, 2.5, [], {}], temperature: [-1, 3, 'hot', [], {}], top_p: [0, -0.5, 1.5, 'x'],
        n: [0, -1, 1e9, 'two', 1.5], stop: [5, [1, 2], { a: 1 }, ['']], stream: ['yes', 1, []], seed: ['s', 1.5, 1e300, {}],
        logprobs: chat ? ['yes', 3] : [-1, 100, 'x'], frequency_penalty: [-3, 3, 'x'], presence_penalty: [5, 'x'],
        logit_bias: [5, { foo: 1 }, { 1: 'x' }, { 1: 500 }], model: [5, 'nope', [], {}],
        messages: [[], 'hi', [1], [{ role: 'x', content: 'y' }], [{ content: 'no role' }], [{ role: 'user', content: 5 }]],
        prompt: [5, {}, [], [1, -2], [1e10], [[]], [true]], top_k: [-2, 'x', 1.5], min_p: [-0.1, 2, 'x'],
      }[field];
      body[field] = pick(bad);
      out.push({ route, body: JSON.stringify(body) });
    }
  }
  return out;
}

test('1000 malformed requests: all 4xx in OpenAI shape, server keeps serving', async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const cases = malformedBodies(1000);
  const statuses = {};
  let next = 0;
  async function worker() {
    while (next < cases.length) {
      const c = cases[next++];
      const r = await fetch(server.base + c.route, { method: 'POST', body: c.body });
      const text = await r.text();
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      assert.ok(r.status >= 400 && r.status < 500, `${c.route} ${JSON.stringify(String(c.body))} -> ${r.status} ${text}`);
      const parsed = JSON.parse(text);
      assert.equal(typeof parsed.error.message, 'string');
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker));
  console.log('statuses:', statuses);
  // Raw garbage on the socket (not even HTTP) too.
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => {
      const socket = net.connect(server.port, '127.0.0.1', () => socket.end(Buffer.from(`\x00\xff GARBAGE ${i}\r\n\r\n`)));
      socket.on('error', resolve);
      socket.on('close', resolve);
      socket.resume();
    });
  }
  const ok = await postJson(server.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'still there?' }], max_tokens: 3 });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await fetch(server.base + '/health')).status, 200);
  assert.equal(server.child.exitCode, null);
});

test('per-request timeout: 504 without streaming, an error event in a stream, resources freed', async (t) => {
  const server = await startServer(['--timeout', '0.5']);
  t.after(() => server.stop());
  const body = { prompt: 'x', max_tokens: 3500, ignore_eos: true };
  const plain = await postJson(server.base, '/v1/completions', body);
  assert.equal(plain.status, 504, plain.text);
  assert.equal(plain.json.error.code, 'timeout');
  assert.match(plain.json.error.message, /timed out after 0\.5 s/);
  const raw = await (await fetch(server.base + '/v1/completions', { method: 'POST', body: JSON.stringify({ ...body, stream: true }) })).text();
  const events = sseEvents(raw);
  assert.equal(events.at(-1), '[DONE]');
  assert.equal(JSON.parse(events.at(-2)).error.code, 'timeout');
  let m = await metrics(server.base);
  for (let i = 0; i < 100 && (m.inferlab_running_requests !== 0 || m.inferlab_kv_cache_blocks_used !== 0); i++) {
    await sleep(20);  // gauges are published after the engine step that ended the request
    m = await metrics(server.base);
  }
  assert.equal(m['inferlab_requests_finished_total{reason="timeout"}'], 2);
  assert.equal(m.inferlab_running_requests, 0);
  assert.equal(m.inferlab_kv_cache_blocks_used, 0);
});

test('SIGTERM: in-flight streams end cleanly and the server exits 0', async () => {
  const server = await startServer(['--drain', '1']);
  const r = await fetch(server.base + '/v1/completions', {
    method: 'POST',
    body: JSON.stringify({ prompt: 'long', max_tokens: 3500, ignore_eos: true, stream: true }),
  });
  const reader = r.body.getReader();
  await reader.read();
  const short = postJson(server.base, '/v1/completions', { prompt: 'short', max_tokens: 4 });
  await sleep(50);
  server.child.kill('SIGTERM');
  let raw = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    raw += new TextDecoder().decode(value);
  }
  const events = sseEvents(raw.slice(raw.indexOf('data: ')));
  assert.equal(events.at(-1), '[DONE]');
  const last = JSON.parse(events.at(-2));
  assert.ok(last.error || last.choices[0].finish_reason, `ended with an error event or a finish: ${events.at(-2)}`);
  if (last.error) assert.match(last.error.message, /shutting down/);
  const shortResult = await short;
  assert.equal(shortResult.status, 200, 'a short request in flight finishes within the drain time');
  const { code, signal } = await server.stop();
  assert.equal(code, 0, `exit ${code} signal ${signal}; log:\n${server.log()}`);
});
