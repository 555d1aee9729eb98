import OpenAI from 'openai';
const [base, n, tokens] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'EMPTY', maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
const t0 = performance.now();
await Promise.all(Array.from({length: n}, async (_, i) => {
  const s = await client.completions.create({model, prompt: `Stream ${i} tells a story about`, max_tokens: tokens, temperature: 0, ignore_eos: true, stream: true});
  for await (const c of s) {}
}));
console.log(`${n} x ${tokens} in ${((performance.now()-t0)/1000).toFixed(2)} s`);
