// Server-side timings (docs/measurement.md): the `timings` object in bodies and final chunks,
// read through the official `openai` client (unknown fields pass through it), checked against
// the client's own clock; --no-timings removes them; the per-stage /metrics histograms.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, postJson, metrics, sseEvents, CLI } from './helpers.mjs';

const FIELDS = ['cache_n', 'prompt_n', 'prompt_ms', 'prompt_per_second', 'predicted_n', 'predicted_ms',
  'predicted_per_second', 'queue_ms', 'prefill_ms', 'decode_ms', 'ttft_ms', 'e2e_ms', 'preemptions', 'draft_n', 'draft_n_accepted',
  'arrival_unix_ms', 'token_ms'];

// What must hold for any one choice's timings; `usage` is that choice's token counts.
function checkTimings(t, { promptTokens, completionTokens }) {
  assert.deepEqual(Object.keys(t).sort(), [...FIELDS].sort());
  assert.equal(t.predicted_n, completionTokens);
  assert.equal(t.prompt_n + t.cache_n, promptTokens);
  assert.equal(t.token_ms.length, t.predicted_n);
  for (let i = 1; i < t.token_ms.length; i++) assert.ok(t.token_ms[i] > t.token_ms[i - 1], `token_ms increasing: ${t.token_ms}`);
  // Rounded to the microsecond each, so sums agree within a few of them.
  assert.ok(Math.abs(t.queue_ms + t.prefill_ms + t.decode_ms - t.e2e_ms) <= 1, JSON.stringify(t));
  assert.ok(Math.abs(t.queue_ms + t.prefill_ms - t.ttft_ms) <= 0.01);
  assert.ok(Math.abs(t.token_ms[0] - t.ttft_ms) <= 0.01, 'the first token is the server TTFT');
  assert.ok(t.token_ms.at(-1) <= t.e2e_ms + 0.01);
  assert.equal(t.prompt_ms, t.prefill_ms);
  assert.equal(t.predicted_ms, t.decode_ms);
  for (const f of ['queue_ms', 'prefill_ms', 'decode_ms']) assert.ok(t[f] >= 0, f);
  assert.equal(t.preemptions, 0);
}

test('timings: bodies and final chunks, consistent with the client clock', async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 60_000 });
  const model = 'model';

  await t.test('non-streaming chat: one choice, timings at the top', async () => {
    const before = Date.now();
    const r = await client.chat.completions.create({
      model, messages: [{ role: 'user', content: 'Say something.' }], max_tokens: 12, temperature: 0, ignore_eos: true,
    });
    const after = Date.now();
    assert.equal(r.choices[0].message.role, 'assistant');
    checkTimings(r.timings, { promptTokens: r.usage.prompt_tokens, completionTokens: r.usage.completion_tokens });
    assert.equal(r.timings.predicted_n, 12);
    // Same machine, same system clock: the server saw it arrive while the client waited.
    assert.ok(r.timings.arrival_unix_ms >= before - 1 && r.timings.arrival_unix_ms <= after, `${before} ${r.timings.arrival_unix_ms} ${after}`);
    assert.ok(r.timings.e2e_ms <= after - before + 1);
  });

  await t.test('streaming completions: finish chunk and usage chunk carry it; server TTFT <= client TTFT', async () => {
    for (let round = 0; round < 3; round++) {
      const started = performance.now();
      let firstContent = null;
      let finishChunk = null;
      let usageChunk = null;
      let contentChunks = 0;
      const stream = await client.completions.create({
        model, prompt: `Once upon a time ${round}`, max_tokens: 8, temperature: 0, ignore_eos: true,
        stream: true, stream_options: { include_usage: true },
      });
      for await (const chunk of stream) {
        if (chunk.choices.length && chunk.choices[0].text) {
          contentChunks++;
          if (firstContent === null) firstContent = performance.now();
        }
        if (chunk.choices.length && chunk.choices[0].finish_reason) finishChunk = chunk;
        else if (chunk.usage) usageChunk = chunk;
        else assert.equal(chunk.timings, undefined, 'only the last chunks carry timings');
      }
      const clientTtft = firstContent - started;
      assert.ok(finishChunk && usageChunk);
      const tm = finishChunk.timings;
      checkTimings(tm, { promptTokens: usageChunk.usage.prompt_tokens, completionTokens: usageChunk.usage.completion_tokens });
      assert.deepEqual(usageChunk.timings, tm);
      assert.ok(tm.ttft_ms <= clientTtft, `server TTFT ${tm.ttft_ms} > client TTFT ${clientTtft}`);
      assert.ok(contentChunks <= tm.predicted_n);
    }
  });

  await t.test('a stop string ends the text early; the timings still come, and cover what was generated', async () => {
    const plain = await postJson(server.base, '/v1/completions', { prompt: 'abc', max_tokens: 10, temperature: 0, ignore_eos: true });
    const text = plain.json.choices[0].text;
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 1);
    assert.ok(stop.length === 1);
    for (const stream of [false, true]) {
      const r = await postJson(server.base, '/v1/completions', { prompt: 'abc', max_tokens: 10, temperature: 0, ignore_eos: true, stop: [stop], stream });
      const last = stream ? JSON.parse(sseEvents(r.text).filter((e) => e !== '[DONE]').at(-1)) : r.json;
      assert.equal(last.choices[0].finish_reason, 'stop');
      assert.ok(last.timings.predicted_n >= 1 && last.timings.predicted_n <= 10);
      assert.equal(last.timings.token_ms.length, last.timings.predicted_n);
    }
  });

  await t.test('n = 2: each choice its own timings (per choice in the body, in its finish chunk when streaming)', async () => {
    const r = await client.completions.create({ model, prompt: 'Hello', max_tokens: 4, n: 2, temperature: 1, seed: 3 });
    assert.equal(r.timings, undefined);
    assert.equal(r.choices.length, 2);
    for (const c of r.choices) checkTimings(c.timings, { promptTokens: r.usage.prompt_tokens, completionTokens: 4 });
    const s = await postJson(server.base, '/v1/completions', { prompt: 'Hello', max_tokens: 4, n: 2, stream: true, stream_options: { include_usage: true } });
    const chunks = sseEvents(s.text).filter((e) => e !== '[DONE]').map((e) => JSON.parse(e));
    const finishes = chunks.filter((c) => c.choices.length && c.choices[0].finish_reason);
    assert.deepEqual(finishes.map((c) => c.choices[0].index).sort(), [0, 1]);
    for (const c of finishes) checkTimings(c.timings, { promptTokens: chunks.at(-1).usage.prompt_tokens, completionTokens: 4 });
    assert.equal(chunks.at(-1).timings, undefined, 'the usage chunk of several choices has no single timings');
  });

  await t.test('a repeated long prompt: cache_n counts the prefix-cache tokens, as usage does', async () => {
    const prompt = 'The quick brown fox jumps over the lazy dog. '.repeat(8);
    await client.completions.create({ model, prompt, max_tokens: 2 });
    const again = await client.completions.create({ model, prompt, max_tokens: 2 });
    assert.ok(again.timings.cache_n > 0);
    assert.equal(again.timings.cache_n, again.usage.prompt_tokens_details.cached_tokens);
    assert.equal(again.timings.prompt_n + again.timings.cache_n, again.usage.prompt_tokens);
  });

  await t.test('bench serve against inferlab serve: every row has the server figures, server TTFT <= client TTFT', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'inferlab-timings-'));
    try {
      const csvPath = path.join(dir, 'requests.csv');
      await promisify(execFile)(CLI, ['bench', 'serve', '--base-url', server.base, '--dataset', 'random', '--input-len', '24',
        '--output-len', '6', '--ignore-eos', '--num-requests', '8', '--concurrency', '4', '--output', csvPath], { encoding: 'utf8' });
      const [header, ...lines] = readFileSync(csvPath, 'utf8').trim().split('\n');
      const cols = header.split(',');
      const rows = lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v])));
      assert.equal(rows.length, 8);
      for (const r of rows) {
        assert.equal(r.status, 'ok');
        const [queue, prefill, decode, serverTtft, ttft] = ['server_queue_ms', 'server_prefill_ms', 'server_decode_ms',
          'server_ttft_ms', 'ttft_ms'].map((k) => Number(r[k]));
        assert.ok(r.server_ttft_ms !== '' && r.server_decode_ms !== '' && r.cached_tokens !== '' && r.preemptions !== '', JSON.stringify(r));
        assert.ok(serverTtft <= ttft, `server TTFT ${serverTtft} > client TTFT ${ttft}`);
        assert.ok(Math.abs(queue + prefill - serverTtft) <= 0.01);
        assert.ok(serverTtft + decode <= Number(r.end_ms) - Number(r.start_ms), 'the server e2e fits in the client e2e');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  await t.test('/metrics: per-stage histograms with vLLM buckets, one count per finished request', async () => {
    const before = await metrics(server.base);
    await client.completions.create({ model, prompt: 'count me', max_tokens: 3 });
    const m = await metrics(server.base);
    for (const name of ['request_queue', 'request_prefill', 'request_decode', 'e2e_request_latency']) {
      const key = `inferlab_${name}_seconds_count`;
      assert.equal(m[key] - before[key], 1, key);
      assert.ok(`inferlab_${name}_seconds_bucket{le="7680"}` in m, `${name}: vLLM's request-latency buckets`);
    }
    assert.ok('inferlab_time_to_first_token_seconds_bucket{le="2560"}' in m);
    assert.ok('inferlab_time_to_first_token_seconds_bucket{le="0.001"}' in m);
    assert.ok('inferlab_inter_token_latency_seconds_bucket{le="0.075"}' in m);
    assert.equal(m['inferlab_time_to_first_token_seconds_count'] - before['inferlab_time_to_first_token_seconds_count'], 1);
    assert.equal(m['inferlab_inter_token_latency_seconds_count'] - before['inferlab_inter_token_latency_seconds_count'], 2);
    const sum = (k) => m[k] - before[k];
    assert.ok(Math.abs(sum('inferlab_request_queue_seconds_sum') + sum('inferlab_request_prefill_seconds_sum') +
      sum('inferlab_request_decode_seconds_sum') - sum('inferlab_e2e_request_latency_seconds_sum')) < 1e-3);
  });
});

test('--no-timings: no timings anywhere; the client still parses everything', async (t) => {
  const server = await startServer(['--no-timings']);
  t.after(() => server.stop());
  const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 60_000 });
  const r = await client.chat.completions.create({ model: 'model', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
  assert.equal(r.timings, undefined);
  assert.ok(r.usage.completion_tokens >= 1);
  const raw = await postJson(server.base, '/v1/completions', { prompt: 'hi', max_tokens: 3, n: 2 });
  assert.equal(raw.status, 200);
  assert.ok(!raw.text.includes('timings'));
  const s = await postJson(server.base, '/v1/chat/completions', {
    messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, stream: true, stream_options: { include_usage: true },
  });
  assert.ok(s.text.includes('[DONE]'));
  assert.ok(!s.text.includes('timings'));
});
