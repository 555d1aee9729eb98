#!/usr/bin/env node
// Greedy next tokens of llama.cpp (node-llama-cpp, CPU) for a prompt of token ids: the cross-check
// of bench/hf_to_gguf.py and the engine (tests/peer runs it beside `inferlab generate`).
//
//   node bench/llama_cpp_greedy.mjs MODEL.gguf --prompt-ids 1,2,3 [-n 16] [-t 1] [--logprobs FILE]
// Prints {"tokens": [...], "cpu_backend": "..."}; exit 3 when node-llama-cpp is absent.
// --logprobs FILE: raw little-endian float32 [steps][vocab], each step's log-softmax of llama.cpp's
// logits (from the full probability list node-llama-cpp returns; log p = logit - logsumexp).
import {writeFileSync} from "node:fs";
import {fail, importNodeLlamaCpp, loadLlama, loadModel, loadedCpuBackend, parseArgs, positiveInt} from "./llama_cpp_peer.mjs";

const usage = "usage: node bench/llama_cpp_greedy.mjs MODEL.gguf --prompt-ids 1,2,3 [-n 16] [-t 1] [--logprobs FILE]";
const args = parseArgs(process.argv.slice(2), {
  usage,
  defaults: {promptIds: undefined, n: "16", threads: "1", logprobs: undefined},
  flags: {"--logprobs": "logprobs", "--prompt-ids": "promptIds", "-n": "n", "--n-gen": "n", "-t": "threads", "--threads": "threads"},
});
if (args.promptIds === undefined) fail(`--prompt-ids is required\n${usage}`, 2);
const prompt = args.promptIds.split(",").map((s) => positiveInt(s.trim(), "--prompt-ids", {allowZero: true}));
const steps = positiveInt(args.n, "-n");
const threads = positiveInt(args.threads, "-t");

const nlc = await importNodeLlamaCpp();
const llama = await loadLlama(nlc);
const model = await loadModel(llama, args.model);
const context = await model.createContext({contextSize: prompt.length + steps + 8, batchSize: 512, threads, sequences: 1});
const sequence = context.getSequence();
const tokens = [];
const rows = [];
// temperature 0 = llama.cpp's greedy sampler (argmax); no penalties or biases are set.
const metadata = {probabilities: args.logprobs !== undefined};
for await (const out of sequence.evaluateWithMetadata(prompt, metadata, {temperature: 0, yieldEogToken: true})) {
  tokens.push(out.token);
  if (args.logprobs !== undefined) {
    const row = new Float32Array(model.tokens.tokenCount ?? out.probabilities.size).fill(-Infinity);
    for (const [token, p] of out.probabilities) if (token < row.length) row[token] = Math.log(p);
    rows.push(row);
  }
  if (tokens.length >= steps) break;
}
if (args.logprobs !== undefined)
  writeFileSync(args.logprobs, Buffer.concat(rows.map((r) => Buffer.from(r.buffer, r.byteOffset, r.byteLength))));
process.stdout.write(JSON.stringify({tokens, cpu_backend: loadedCpuBackend()}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
