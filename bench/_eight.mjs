// Aggregate decode throughput of N concurrent streams vs 1 stream against a running server.
// Usage: node bench/batching.mjs BASE_URL [--concurrency 8] [--tokens 64] [--model NAME]
// Decode throughput = tokens after each stream's first token / (last token - first first token),
// so prompt processing (prefill) is left out of both figures.
import OpenAI from 'openai';

const args = process.argv.slice(2);
const base = args[0];
if (!base) throw new Error('usage: node bench/batching.mjs BASE_URL [--concurrency N] [--tokens T]');
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : fallback;
};
const concurrency = Number(option('--concurrency', 8));
const tokens = Number(option('--tokens', 64));
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'EMPTY', maxRetries: 0, timeout: 600_000 });
const model = option('--model', (await client.models.list()).data[0].id);

async function oneStream(i) {
  const stream = await client.completions.create({
    model, prompt: `Stream ${i} tells a story about`, max_tokens: tokens, temperature: 0, ignore_eos: true,
    stream: true, stream_options: { include_usage: true },
  });
  const times = [];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    if (chunk.choices?.[0]?.text) times.push(performance.now());
  }
  return { times, generated: usage ? usage.completion_tokens : times.length };
}

async function metric(name) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name + ' '));
  return line ? Number(line.split(' ')[1]) : NaN;
}

async function run(n) {
  const batchedBefore = await metric('inferlab_batched_decode_steps_total');
  const stepsBefore = await metric('inferlab_decode_steps_total');
  const results = await Promise.all(Array.from({ length: n }, (_, i) => oneStream(i)));
  const firsts = results.map((r) => r.times[0]);
  const lasts = results.map((r) => r.times.at(-1));
  const start = Math.min(...firsts), end = Math.max(...lasts);
  // Tokens after the first of each stream; usage counts tokens exactly (a chunk may carry none).
  const decoded = results.reduce((sum, r) => sum + r.generated - 1, 0);
  const throughput = decoded / ((end - start) / 1000);
  const steps = (await metric('inferlab_decode_steps_total')) - stepsBefore;
  const batched = (await metric('inferlab_batched_decode_steps_total')) - batchedBefore;
  console.log(`${n} stream${n > 1 ? 's' : ' '}: ${decoded} decode tokens in ${((end - start) / 1000).toFixed(2)} s = ` +
    `${throughput.toFixed(1)} tok/s aggregate (${steps} decode steps, ${batched} batched)`);
  return throughput;
}



const many = await run(concurrency);

