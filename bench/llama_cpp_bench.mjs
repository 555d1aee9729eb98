#!/usr/bin/env node
// llama.cpp's speed measured like llama-bench, through node-llama-cpp's prebuilt CPU build: the peer
// that bench/speed.sh runs beside `inferlab bench engine` when no llama-bench binary is given.
//
//   node bench/llama_cpp_bench.mjs MODEL.gguf [-p 512] [-n 128] [-d 0] [-t THREADS] [-r 5] [--json]
//
// ppP: P random prompt tokens decoded into an empty KV cache in batches of up to 512 (llama-bench's
//      n_ubatch), logits for the last token of each 2048 (its n_batch), as llama_batch_get_one does.
// tgN: N single-token decodes from an empty KV cache, each computing its logits.
// -d D (llama-bench's n_depth): each run starts after D random tokens decoded untimed into the
//      cache (in batches of 512); the tests are named "pp512 @ d1024", as llama-bench names them.
// One warm-up run per test, then -r runs; tokens/s per run, mean and sample stddev (llama-bench's
// avg_ts / stddev_ts). Context: n_ctx = P + N, F16 KV cache, flash attention "auto" (llama-bench's
// defaults). Decoding goes straight to node-llama-cpp's addon (initBatch / addToBatch / decodeBatch,
// each llama_decode run on a libuv worker): no sampling, no JS token queue. What remains over
// llama-bench is one promise round trip per llama_decode (tens of microseconds; a tg step takes
// milliseconds) and Node's own ~50 MB in the peak RSS.
// Exit 3 when node-llama-cpp is not installed.
import {fail, importNodeLlamaCpp, loadLlama, loadModel, loadedCpuBackend, parseArgs, positiveInt} from "./llama_cpp_peer.mjs";

const usage = "usage: node bench/llama_cpp_bench.mjs MODEL.gguf [-p 512] [-n 128] [-d 0] [-t THREADS] [-r 5] [--json]";
const args = parseArgs(process.argv.slice(2), {
  usage,
  defaults: {p: "512", n: "128", d: "0", threads: "0", r: "5", json: false},
  flags: {"-p": "p", "--n-prompt": "p", "-n": "n", "--n-gen": "n", "-d": "d", "--n-depth": "d", "-t": "threads", "--threads": "threads",
          "-r": "r", "--repetitions": "r", "--json": "json"},
});
const prompt = positiveInt(args.p, "-p", {allowZero: true});
const gen = positiveInt(args.n, "-n", {allowZero: true});
const depth = positiveInt(args.d, "-d", {allowZero: true});
const reps = positiveInt(args.r, "-r");
let threads = positiveInt(args.threads, "-t", {allowZero: true});
if (prompt === 0 && gen === 0) fail("-p and -n are both 0: nothing to measure", 2);
const UBATCH = 512, NBATCH = 2048;

const nlc = await importNodeLlamaCpp();
const llama = await loadLlama(nlc);
if (threads === 0) threads = llama.cpuMathCores;
const model = await loadModel(llama, args.model);
const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
if (!vocab) fail(`${args.model}: no tokenizer.ggml.tokens in the GGUF metadata`);
const context = await model.createContext({contextSize: Math.max(depth + prompt + gen, 64), batchSize: UBATCH, sequences: 1,
                                           threads, flashAttention: "auto"});
const sequenceId = context.getSequence()._sequenceId;
const addon = context._ctx;  // node-llama-cpp 3.21's internal addon context (pinned in package.json)
for (const method of ["initBatch", "addToBatch", "decodeBatch", "disposeSequence"])
  if (typeof addon?.[method] !== "function")
    fail(`node-llama-cpp ${nlc.version ?? ""}: the addon context has no ${method}(); this script needs the version pinned in package.json`);

// llama-bench draws tokens with std::rand(); any uniform generator will do.
let state = 12345;
const randomToken = () => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state % vocab;
};

async function decode(tokens, firstPosition, withLogits) {
  addon.initBatch(tokens.length);
  addon.addToBatch(sequenceId, firstPosition, Uint32Array.from(tokens),
                   withLogits ? Uint32Array.of(tokens.length - 1) : new Uint32Array(0));
  await addon.decodeBatch();
}

// n random tokens from position `from` on, in batches of up to UBATCH.
async function decodeMany(n, from) {
  for (let done = 0; done < n;) {
    const count = Math.min(UBATCH, n - done);
    const tokens = Array.from({length: count}, randomToken);
    const endsBatch = (done + count) % NBATCH === 0 || done + count === n;
    await decode(tokens, from + done, endsBatch);
    done += count;
  }
}

// An empty cache (llama_memory_seq_rm(-1, -1)), then the depth's tokens, untimed.
async function startAtDepth() {
  addon.disposeSequence(sequenceId);
  if (depth > 0) await decodeMany(depth, 0);
}

async function runPrompt(n) {
  await startAtDepth();
  const start = process.hrtime.bigint();
  await decodeMany(n, depth);
  return Number(process.hrtime.bigint() - start) / 1e9;
}

async function runGen(n) {
  await startAtDepth();
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await decode([randomToken()], depth + i, true);
  return Number(process.hrtime.bigint() - start) / 1e9;
}
const at = depth > 0 ? ` @ d${depth}` : "";

function stats(samples) {
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  const variance = samples.length > 1 ? samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (samples.length - 1) : 0;
  return {avg_ts: mean, stddev_ts: Math.sqrt(variance), samples_ts: samples};
}

const results = [];
if (prompt > 0) {
  await runPrompt(prompt);  // warm-up, as llama-bench
  const samples = [];
  for (let r = 0; r < reps; r++) samples.push(prompt / await runPrompt(prompt));
  results.push({test: `pp${prompt}${at}`, n_prompt: prompt, n_gen: 0, n_depth: depth, ...stats(samples)});
}
if (gen > 0) {
  await runGen(1);  // llama-bench warms tg up with one token
  const samples = [];
  for (let r = 0; r < reps; r++) samples.push(gen / await runGen(gen));
  results.push({test: `tg${gen}${at}`, n_prompt: 0, n_gen: gen, n_depth: depth, ...stats(samples)});
}

const out = {
  peer: "llama.cpp via node-llama-cpp",
  node_llama_cpp_version: JSON.parse((await import("node:fs")).readFileSync(
    new URL("../node_modules/node-llama-cpp/package.json", import.meta.url), "utf8")).version,
  llama_cpp_release: llama.llamaCppRelease?.release,
  cpu_backend: loadedCpuBackend(),
  system_info: llama.systemInfo?.trim(),
  model: args.model,
  model_type: model.typeDescription,
  model_size_bytes: model.size,
  threads: context.currentThreads ?? threads,
  n_ubatch: UBATCH,
  flash_attn: context.flashAttention,
  results,
  peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
};
if (args.json) {
  process.stdout.write(JSON.stringify(out, null, 1) + "\n");
} else {
  process.stdout.write(`llama.cpp ${out.llama_cpp_release} (node-llama-cpp ${out.node_llama_cpp_version}, ggml-cpu-${out.cpu_backend}), ` +
                       `${out.model_type}, ${(out.model_size_bytes / 1e6).toFixed(0)} MB, ${out.threads} thread(s)\n\n`);
  process.stdout.write("| test | t/s |\n|---|---|\n");
  for (const r of results) process.stdout.write(`| ${r.test} | ${r.avg_ts.toFixed(2)} ± ${r.stddev_ts.toFixed(2)} |\n`);
  process.stdout.write(`\npeak RSS ${(out.peak_rss_bytes / 1048576).toFixed(0)} MiB\n`);
}
await context.dispose();
await model.dispose();
await llama.dispose();
