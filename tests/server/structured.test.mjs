// Structured outputs and tool calls through the official `openai` npm client: json_schema with
// zodResponseFormat and chat.completions.parse, json_object, the grammar and regex extensions,
// refused schema keywords, tool_choice required / named / auto (steered by logit_bias, a real
// OpenAI field, since the test model's weights are random), streamed tool-call deltas reassembled
// by the SDK's stream helper, n and streaming under a schema, and tool results round-tripping
// through the chat template.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat, zodFunction } from 'openai/helpers/zod';
import { z } from 'zod';
import Ajv2020 from 'ajv/dist/2020.js';
import { startServer, postJson, sseEvents } from './helpers.mjs';

const NO_THINKING = ['--chat-template-kwargs', '{"enable_thinking": false}'];

// The test model has Qwen3's thinking template; these answers are steered as a non-thinking model's.
const server = await startServer(NO_THINKING);
test.after(() => server.stop());
const client = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
const messages = [{ role: 'user', content: 'Answer in JSON.' }];
const ajv = new Ajv2020({ strict: false });

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  role: z.enum(['admin', 'user']),
  tags: z.array(z.string().max(5)).max(2),
});

test('chat.completions.parse with zodResponseFormat: every answer parses, validates and keeps the schema\'s key order', async () => {
  for (const seed of [1, 2, 3]) {
    const completion = await client.chat.completions.parse({
      model: 'model', messages, seed, max_tokens: 400, response_format: zodResponseFormat(Person, 'person'),
    });
    const choice = completion.choices[0];
    assert.equal(choice.finish_reason, 'stop', JSON.stringify(choice));
    assert.ok(choice.message.parsed, choice.message.content);
    Person.parse(choice.message.parsed);
    // In the schema's order, as OpenAI writes them (sorted would put age first).
    assert.deepEqual(Object.keys(JSON.parse(choice.message.content)), ['name', 'age', 'role', 'tags']);
  }
});

test('json_object: a JSON object; n and streaming under a schema', async () => {
  const r = await client.chat.completions.create({ model: 'model', messages, max_tokens: 300, seed: 5, response_format: { type: 'json_object' } });
  if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(r.choices[0].message.content), 'object');
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer' } }, required: ['ok', 'n'], additionalProperties: false };
  const validate = ajv.compile(schema);
  const stream = await client.chat.completions.create({
    model: 'model', messages, n: 3, stream: true, max_tokens: 100, temperature: 1, top_p: 0.9, top_k: 50, min_p: 0.01,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } },
  });
  const texts = ['', '', ''];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
  for (const text of texts) assert.ok(validate(JSON.parse(text)), `${text}: ${ajv.errorsText(validate.errors)}`);
});

test('grammar (GBNF) and regex extensions constrain the whole output', async () => {
  const g = await postJson(server.base, '/v1/chat/completions', {
    messages, max_tokens: 20, grammar: 'root ::= ("yes" | "no") " " [0-9]{2}',
  });
  assert.equal(g.status, 200, g.text);
  assert.match(g.json.choices[0].message.content, /^(yes|no) [0-9]{2}$/);
  const r = await postJson(server.base, '/v1/completions', { prompt: 'Phone:', max_tokens: 20, regex: '\\d{3}-\\d{4}' });
  assert.equal(r.status, 200, r.text);
  assert.match(r.json.choices[0].text, /^\d{3}-\d{4}$/);
  assert.equal(r.json.choices[0].finish_reason, 'stop');
});

test('what cannot be enforced is refused with a 400 naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'model', messages, response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'array', items: { type: 'string' }, uniqueItems: true } } } }),
    (e) => e.status === 400 && /uniqueItems/.test(e.message) && e.param === 'response_format');
  const bad = await postJson(server.base, '/v1/chat/completions', { messages, grammar: 'root ::= undefined-rule' });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /undefined-rule/);
  const regex = await postJson(server.base, '/v1/chat/completions', { messages, regex: '(a)\\1' });
  assert.equal(regex.status, 400);
  assert.match(regex.json.error.message, /back-reference/);
  const two = await postJson(server.base, '/v1/chat/completions', { messages, regex: 'a', grammar: 'root ::= "a"' });
  assert.equal(two.status, 400);
  const strictBad = await postJson(server.base, '/v1/chat/completions', {
    messages, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'f', strict: true, parameters: { type: 'object', properties: { n: { type: 'number', multipleOf: 0.5, maximum: 99 } } } } }],
  });
  assert.equal(strictBad.status, 400, strictBad.text);
  assert.match(strictBad.json.error.message, /multipleOf/);
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather for a city', strict: true,
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false },
  },
};
const clock = { type: 'function', function: { name: 'now', description: 'The time' } };

function checkCall(call, tools) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  const tool = tools.find((t) => t.function.name === call.function.name);
  assert.ok(tool, `called ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  if (tool.function.parameters) assert.ok(ajv.validate(tool.function.parameters, args), call.function.arguments);
  else assert.deepEqual(args, {});
}

test('tool_choice required and named: real calls, finish_reason tool_calls, parameterless tools get {}', async () => {
  const required = await client.chat.completions.create({
    model: 'model', messages, tools: [weather, clock], tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, seed: 3,
  });
  const choice = required.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
  assert.equal(choice.message.tool_calls.length, 1);
  checkCall(choice.message.tool_calls[0], [weather, clock]);
  for (const name of ['now', 'get_weather']) {
    const named = await client.chat.completions.create({
      model: 'model', messages, tools: [weather, clock], tool_choice: { type: 'function', function: { name } }, parallel_tool_calls: false, max_tokens: 200,
    });
    assert.equal(named.choices[0].finish_reason, 'tool_calls');
    assert.equal(named.choices[0].message.tool_calls[0].function.name, name);
    checkCall(named.choices[0].message.tool_calls[0], [weather, clock]);
  }
});

test('tool_choice auto: a call steered by logit_bias on <tool_call>, strict arguments enforced after it', async () => {
  const tok = await postJson(server.base, '/tokenize', { prompt: '<tool_call>', add_special_tokens: false });
  assert.equal(tok.json.tokens.length, 1, tok.text);
  const r = await client.chat.completions.create({
    model: 'model', messages, tools: [weather], tool_choice: 'auto', parallel_tool_calls: false, max_tokens: 200,
    logit_bias: { [tok.json.tokens[0]]: 100 },
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls', JSON.stringify(r.choices[0]));
  checkCall(r.choices[0].message.tool_calls[0], [weather]);
  // Without the bias the random model writes text: no call, and the text is content.
  const plain = await client.chat.completions.create({ model: 'model', messages, tools: [weather], max_tokens: 8, seed: 1 });
  assert.equal(plain.choices[0].finish_reason, 'length');
  assert.equal(plain.choices[0].message.tool_calls, undefined);
  assert.ok(plain.choices[0].message.content.length > 0);
});

test('streamed tool calls: header delta first, then arguments; the SDK stream helper reassembles them', async () => {
  const body = { model: 'model', messages, tools: [weather, clock], tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200, seed: 9, stream: true };
  const r = await fetch(server.base + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const events = sseEvents(await r.text()).filter((e) => e !== '[DONE]').map((e) => JSON.parse(e));
  const deltas = events.flatMap((e) => e.choices.flatMap((c) => c.delta?.tool_calls ?? []));
  assert.ok(deltas.length >= 2, JSON.stringify(deltas));
  assert.ok(deltas[0].id && deltas[0].type === 'function' && deltas[0].function.name, JSON.stringify(deltas[0]));
  const contents = events.map((e) => e.choices[0]?.delta?.content ?? '').join('');
  assert.equal(contents, '', 'no tag leaked as content');
  const stream = client.chat.completions.stream({ ...body, stream: undefined });
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].finish_reason, 'tool_calls');
  checkCall(final.choices[0].message.tool_calls[0], [weather, clock]);
  // zodFunction tools (strict) with the runner-free parse API.
  const parsed = await client.chat.completions.parse({
    model: 'model', messages, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 200,
    tools: [zodFunction({ name: 'lookup', parameters: z.object({ id: z.number().int(), exact: z.boolean() }) })],
  });
  const call = parsed.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'lookup');
  assert.equal(typeof call.function.parsed_arguments.exact, 'boolean');
});

test('assistant tool_calls and tool results round-trip through the template', async () => {
  const history = [
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '21 degrees' },
  ];
  const tok = await postJson(server.base, '/tokenize', { messages: history, tools: [weather] });
  assert.equal(tok.status, 200, tok.text);
  const text = (await postJson(server.base, '/detokenize', { tokens: tok.json.tokens })).json.text;
  assert.match(text, /<tool_call>\n\{"name": "get_weather", "arguments": \{"city": ?"Paris"/);
  assert.match(text, /<tool_response>\n21 degrees\n<\/tool_response>/);
  const r = await client.chat.completions.create({ model: 'model', messages: history, tools: [weather], max_tokens: 4 });
  assert.equal(r.choices[0].message.role, 'assistant');
});
