#!/usr/bin/env node
// llama.cpp's tokenizer (node-llama-cpp, the GGUF's own vocabulary and pre-tokenizer) on a list of
// strings: the reference our GGUF tokenizer is checked against (tests/model/smollm2_test.py).
//
//   node bench/llama_cpp_tokenize.mjs MODEL.gguf --cases CASES.json
// CASES.json: a JSON array of strings. Prints one JSON array of id arrays, one per string, with no
// BOS added and special-token text (<|im_start|>) read as that token (llama_tokenize with
// add_special false and parse_special true, what `inferlab tokenize --cases` does, as Hugging Face
// tokenizers do); exit 3 when node-llama-cpp is absent.
import {readFileSync} from "node:fs";
import {fail, importNodeLlamaCpp, loadLlama, parseArgs} from "./llama_cpp_peer.mjs";

const usage = "usage: node bench/llama_cpp_tokenize.mjs MODEL.gguf --cases CASES.json";
const args = parseArgs(process.argv.slice(2), {usage, defaults: {cases: undefined}, flags: {"--cases": "cases"}});
if (args.cases === undefined) fail(`--cases is required\n${usage}`, 2);
let cases;
try {
  cases = JSON.parse(readFileSync(args.cases, "utf8"));
} catch (e) {
  fail(`${args.cases}: ${e.message}`, 2);
}
if (!Array.isArray(cases) || !cases.every((c) => typeof c === "string")) fail(`${args.cases}: expected a JSON array of strings`, 2);

const nlc = await importNodeLlamaCpp();
const llama = await loadLlama(nlc);
// The vocabulary alone: no weights are read.
const model = await llama.loadModel({modelPath: args.model, vocabOnly: true});
const out = cases.map((text) => Array.from(model.tokenize(text, true)));
process.stdout.write(JSON.stringify(out) + "\n");
await model.dispose();
await llama.dispose();
