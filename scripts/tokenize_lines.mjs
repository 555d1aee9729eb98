// Tokenizes text for scripts/train_demo_model.py with the Hugging Face reference tokenizer
// (@huggingface/tokenizers), so training sees exactly the ids the engine's tokenizer produces.
// Usage: node scripts/tokenize_lines.mjs TOKENIZER_JSON < texts.json > ids.json
// stdin: a JSON array of strings; stdout: a JSON array of id arrays (special tokens are cut out
// by the tokenizer's added_tokens; nothing is prepended).
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath] = process.argv.slice(2);
if (!tokenizerPath) {
  console.error("usage: tokenize_lines.mjs TOKENIZER_JSON < texts.json");
  process.exit(2);
}
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const configPath = path.join(path.dirname(tokenizerPath), "tokenizer_config.json");
const config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, config);
const texts = JSON.parse(fs.readFileSync(0, "utf8"));
const out = texts.map((t) => Array.from(tokenizer.encode(t, { add_special_tokens: false }).ids));
process.stdout.write(JSON.stringify(out));
