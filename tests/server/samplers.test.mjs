// typical_p, XTC and DRY (llama-server's fields) on SmolLM2 through the official `openai` npm
// client, on both /v1/chat/completions and /v1/completions: what each does to a real model's
// answers, checked against the model's own log-probabilities where they show it, and the 400s that
// name a field out of range. (The exact checks against llama.cpp and transformers are
// tests/generation/sampler_vs_llama_cpp.sh and typical_p_vs_transformers.sh.)
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

const server = await startServer();
test.after(() => server.stop());
const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 120_000 });
const messages = [{ role: 'user', content: 'Write a short story about a lighthouse keeper.' }];
const model = (await client.models.list()).data[0].id;

test('XTC with probability 1: no step picks a token above the threshold unless it is the least likely of them', async () => {
  const threshold = 0.1;
  let steps = 0;
  let excluded = 0;
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 24, temperature: 1, seed, logprobs: true, top_logprobs: 20,
      xtc_probability: 1, xtc_threshold: threshold,
    });
    for (const step of r.choices[0].logprobs.content) {
      // top_logprobs are the model's own distribution (temperature 1): the candidates above the threshold.
      const above = step.top_logprobs.filter((t) => Math.exp(t.logprob) >= threshold);
      steps++;
      if (above.length < 2) continue;
      excluded++;
      const leastLikely = above.reduce((a, b) => (b.logprob < a.logprob ? b : a));
      const chosenAbove = above.find((t) => t.token === step.token);
      assert.ok(!chosenAbove || chosenAbove.token === leastLikely.token,
        `step chose '${step.token}' (p ${Math.exp(step.logprob).toFixed(3)}), which XTC removes`);
    }
  }
  assert.ok(steps >= 24, `only ${steps} steps`);
  assert.ok(excluded >= 3, `only ${excluded} steps had two candidates above ${threshold}: the check checked little`);
});

test('typical_p near 0 keeps one token per step: different seeds give the same answer, unlike plain sampling', async () => {
  const answer = async (seed, extra) => (await client.completions.create({
    model, prompt: 'The lighthouse keeper', max_tokens: 16, temperature: 1, seed, ...extra,
  })).choices[0].text;
  const typical = await Promise.all([1, 2, 3].map((seed) => answer(seed, { typical_p: 0.001 })));
  assert.equal(new Set(typical).size, 1, JSON.stringify(typical));
  const plain = await Promise.all([1, 2, 3].map((seed) => answer(seed, {})));
  assert.ok(new Set(plain).size > 1, JSON.stringify(plain));
});

test('DRY steers greedy decoding off a repeated sequence', async () => {
  const cycle = '1, 2, 3, 4';
  const prompt = Array(3).fill(cycle).join(', ') + ',';
  const answer = async (extra) => (await client.completions.create({
    model, prompt, max_tokens: 32, temperature: 0, ...extra,
  })).choices[0].text;
  const count = (text) => text.split(cycle).length - 1;
  const plain = await answer({});
  assert.ok(count(plain) >= 2, `without DRY the model repeats: ${JSON.stringify(plain)}`);
  const dry = await answer({ dry_multiplier: 2, dry_allowed_length: 2 });
  assert.ok(count(dry) < count(plain), `DRY: ${JSON.stringify(dry)} vs ${JSON.stringify(plain)}`);
  // Breakers stop the repeat from reaching back: every word a breaker, DRY has nothing to penalise.
  const broken = await answer({ dry_multiplier: 2, dry_allowed_length: 2, dry_sequence_breakers: [' '] });
  assert.equal(broken, plain);
});

test('out-of-range values are 400s that name the field, on chat and completions', async () => {
  const bad = [
    { typical_p: 0 }, { typical_p: 1.5 }, { xtc_probability: 2 }, { xtc_threshold: -1 }, { dry_multiplier: -1 },
    { dry_base: 0.5 }, { dry_allowed_length: -1 }, { dry_penalty_last_n: -2 }, { dry_sequence_breakers: [] },
    { dry_sequence_breakers: [1] },
  ];
  for (const fields of bad) {
    const [name] = Object.keys(fields);
    for (const call of [
      () => client.chat.completions.create({ model, messages, max_tokens: 2, ...fields }),
      () => client.completions.create({ model, prompt: 'Hi', max_tokens: 2, ...fields }),
    ]) {
      await assert.rejects(call(), (e) => {
        assert.equal(e.status, 400, JSON.stringify(fields));
        assert.equal(e.param, name);
        assert.match(e.message, new RegExp(name));
        return true;
      });
    }
  }
  // Still serving.
  const ok = await client.chat.completions.create({ model, messages, max_tokens: 2, typical_p: 0.9 });
  assert.equal(ok.choices.length, 1);
});
