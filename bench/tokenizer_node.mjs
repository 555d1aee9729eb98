// Encode throughput of the Node reference (@huggingface/tokenizers) on a corpus file, for
// `inferlab bench tokenizer`. Prints one JSON line: {"mb_per_s": ..., "tokens": ..., "bytes": ...}.
// Usage: node bench/tokenizer_node.mjs TOKENIZER_JSON CORPUS_FILE SECONDS
import fs from "node:fs";
import path from "node:path";

const [tokenizerPath, corpusPath, secondsArg] = process.argv.slice(2);
if (!tokenizerPath || !corpusPath) {
  console.error("usage: tokenizer_node.mjs TOKENIZER_JSON CORPUS_FILE [SECONDS]");
  process.exit(2);
}
let Tokenizer;
try {
  ({ Tokenizer } = await import("@huggingface/tokenizers"));
} catch (e) {
  console.error(`@huggingface/tokenizers is not installed (run scripts/setup): ${e.message}`);
  process.exit(3);
}
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const configPath = path.join(path.dirname(tokenizerPath), "tokenizer_config.json");
const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, config);
// The same documents as the C++ side: the corpus split after each newline.
const corpus = fs.readFileSync(corpusPath, "utf8");
const documents = corpus.match(/[^\n]*\n|[^\n]+$/g) ?? [];
const bytes = Buffer.byteLength(corpus, "utf8");
const seconds = Number(secondsArg ?? 3);

for (const d of documents.slice(0, 200)) tokenizer.encode(d, { add_special_tokens: false });  // warm-up
let rounds = 0, tokens = 0;
const start = process.hrtime.bigint();
let elapsed = 0;
do {
  tokens = 0;
  for (const d of documents) tokens += tokenizer.encode(d, { add_special_tokens: false }).ids.length;
  ++rounds;
  elapsed = Number(process.hrtime.bigint() - start) / 1e9;
} while (elapsed < seconds);
console.log(JSON.stringify({ mb_per_s: (bytes * rounds) / 1e6 / elapsed, tokens, bytes, rounds, seconds: elapsed }));
