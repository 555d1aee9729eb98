// Renders a GGUF's chat template (tokenizer.chat_template) with @huggingface/jinja for each case of
// a JSON file: the second reference for the chat-template check of tests/model/smollm2_test.py.
//   node tests/model/render_chat_jinja.mjs TEMPLATE_FILE CASES.json BOS EOS
// CASES.json: [{"messages": [...], "add_generation_prompt": bool}, ...]; prints a JSON array of strings.
// Exit 77 when @huggingface/jinja is not installed.
import fs from "node:fs";

const [templateFile, casesFile, bos, eos] = process.argv.slice(2);
if (!templateFile || !casesFile) {
  console.error("usage: render_chat_jinja.mjs TEMPLATE_FILE CASES.json BOS EOS");
  process.exit(2);
}
let Template;
try {
  ({ Template } = await import("@huggingface/jinja"));
} catch (e) {
  console.error(`SKIP: @huggingface/jinja is not installed (${e.message}); run scripts/setup`);
  process.exit(77);
}
const template = new Template(fs.readFileSync(templateFile, "utf8"));
const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const out = cases.map((c) => template.render({
  messages: c.messages,
  add_generation_prompt: c.add_generation_prompt ?? true,
  bos_token: bos ?? "",
  eos_token: eos ?? "",
}));
process.stdout.write(JSON.stringify(out) + "\n");
