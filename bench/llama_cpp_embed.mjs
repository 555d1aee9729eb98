#!/usr/bin/env node
// llama.cpp's embeddings (node-llama-cpp's LlamaEmbeddingContext, CPU) of a list of texts: the peer
// a GGUF embedding model is checked against (tests/server/embeddings_test.py minilm-gguf).
//
//   node bench/llama_cpp_embed.mjs MODEL.gguf --cases TEXTS.json [-t 1]
// TEXTS.json: a JSON array of strings. Prints {"embeddings": [[...], ...], "cpu_backend": "..."}: each
// text's pooled embedding as llama.cpp computes it (the GGUF's pooling_type; [CLS] and [SEP] added
// around a WordPiece text, as llama.cpp's tokenizer adds them), not normalized; exit 3 when
// node-llama-cpp is absent.
import {readFileSync} from "node:fs";
import {fail, importNodeLlamaCpp, loadLlama, loadModel, loadedCpuBackend, parseArgs, positiveInt} from "./llama_cpp_peer.mjs";

const usage = "usage: node bench/llama_cpp_embed.mjs MODEL.gguf --cases TEXTS.json [-t 1]";
const args = parseArgs(process.argv.slice(2), {
  usage, defaults: {cases: undefined, threads: "1"}, flags: {"--cases": "cases", "-t": "threads", "--threads": "threads"},
});
if (args.cases === undefined) fail(`--cases is required\n${usage}`, 2);
let texts;
try {
  texts = JSON.parse(readFileSync(args.cases, "utf8"));
} catch (e) {
  fail(`${args.cases}: ${e.message}`, 2);
}
if (!Array.isArray(texts) || !texts.every((t) => typeof t === "string")) fail(`${args.cases}: expected a JSON array of strings`, 2);

const nlc = await importNodeLlamaCpp();
const llama = await loadLlama(nlc);
const model = await loadModel(llama, args.model);
const context = await model.createEmbeddingContext({contextSize: 512, batchSize: 512, threads: positiveInt(args.threads, "-t")});
const embeddings = [];
for (const text of texts) embeddings.push(Array.from((await context.getEmbeddingFor(text)).vector));
process.stdout.write(JSON.stringify({embeddings, cpu_backend: loadedCpuBackend()}) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
