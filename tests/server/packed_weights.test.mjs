// The server on packed weights (bf16, int8, q4: the SIMD kernels, not OpenBLAS): greedy over HTTP
// equals `inferlab generate` with the same --weights, and concurrent streams (several rows per
// matmul) equal the same requests one at a time (one row per matmul).
import test from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startServer, postJson, metrics, tokenize, CLI, MODEL } from './helpers.mjs';

const prompts = ['Tell me about apple', 'Tell me about river', 'Tell me about violin', 'Tell me about rocket',
  'Tell me about tiger', 'Tell me about harbor'];

// Asynchronous, as generateCli in helpers.mjs: a synchronous call blocks the event loop past the
// server's 5 s keep-alive timeout when the CLI is slow (ASan), and the next request meets a dead socket.
async function generate(ids, maxNewTokens, weights, extra = []) {
  const { stdout } = await promisify(execFile)(CLI, ['generate', MODEL, '--prompt-ids', ids.join(','), '--max-new-tokens',
    String(maxNewTokens), '--ignore-eos', '--weights', weights, '--json', ...extra], { encoding: 'utf8' });
  return JSON.parse(stdout.trim().split('\n').pop()).tokens;
}

async function completionIds(base, ids, maxTokens) {
  const r = await postJson(base, '/v1/completions', {
    model: 'model', prompt: ids, max_tokens: maxTokens, temperature: 0, ignore_eos: true,
  });
  assert.equal(r.status, 200, r.text);
  return r.json.choices[0].text;
}

for (const weights of ['bf16', 'int8', 'q4']) {
  test(`--weights ${weights}: HTTP greedy equals inferlab generate, concurrent equals sequential`, async () => {
    const server = await startServer(['--weights', weights, '--max-batch', '8']);
    try {
      const ids = await Promise.all(prompts.map((prompt) => tokenize(server.base, { prompt })));
      for (const p of ids.slice(0, 2)) {
        const cli = await generate(p, 16, weights);
        assert.equal(cli.length, 16);
        const detok = await postJson(server.base, '/detokenize', { tokens: cli });
        assert.equal(await completionIds(server.base, p, 16), detok.json.prompt, `${weights}: HTTP vs generate`);
      }
      const sequential = [];
      for (const p of ids) sequential.push(await completionIds(server.base, p, 20));
      const before = await metrics(server.base);
      const concurrent = await Promise.all(ids.map((p) => completionIds(server.base, p, 20)));
      const after = await metrics(server.base);
      for (let i = 0; i < ids.length; i++) assert.equal(concurrent[i], sequential[i], `${weights}: stream ${i}`);
      assert.ok(after.inferlab_batched_decode_steps_total > before.inferlab_batched_decode_steps_total,
        'the concurrent requests shared decode steps');
    } finally {
      await server.stop();
    }
  });
}

// --kv-type f16: the server's cache holds K/V in half precision. /server_info names the type,
// HTTP greedy equals `inferlab generate --kv-type f16`, and concurrent streams equal sequential ones.
test('--kv-type f16: HTTP greedy equals generate --kv-type f16, concurrent equals sequential', async () => {
  const server = await startServer(['--weights', 'q4', '--max-batch', '8', '--kv-type', 'f16']);
  try {
    const info = await (await fetch(`${server.base}/server_info`)).json();
    assert.equal(info.flags.kv_type, 'f16');
    const ids = await Promise.all(prompts.map((prompt) => tokenize(server.base, { prompt })));
    const cli = await generate(ids[0], 16, 'q4', ['--kv-type', 'f16']);
    const detok = await postJson(server.base, '/detokenize', { tokens: cli });
    assert.equal(await completionIds(server.base, ids[0], 16), detok.json.prompt, 'HTTP vs generate --kv-type f16');
    const sequential = [];
    for (const p of ids) sequential.push(await completionIds(server.base, p, 20));
    const concurrent = await Promise.all(ids.map((p) => completionIds(server.base, p, 20)));
    for (let i = 0; i < ids.length; i++) assert.equal(concurrent[i], sequential[i], `f16 cache: stream ${i}`);
  } finally {
    await server.stop();
  }
});
