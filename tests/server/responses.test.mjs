// POST /v1/responses (OpenAI's Responses API) through the official `openai` npm client, unmodified,
// against `inferlab serve` on the trained SmolLM2-135M-Instruct (INFERLAB_TEST_MODEL): plain,
// streamed (the spec's event order, sequence numbers, deltas joined = the final text), a function
// tool round trip, text.format json_schema, previous_response_id, retrieve / delete, the input items
// (responses.inputItems.list), the store's eviction (--responses-store-size) and bad input answered
// in OpenAI's error shape.
import test from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, postJson } from './helpers.mjs';

const server = await startServer(['--responses-store-size', '3']);
test.after(() => server.stop());
const client = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
const model = (await client.models.list()).data[0].id;

const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const weatherTool = { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: weatherSchema, strict: true };

test('responses.create: a message with output_text, usage and the request echoed', async () => {
  const r = await client.responses.create({ model, input: 'What is the capital of France?', instructions: 'Answer briefly.',
                                            max_output_tokens: 40, temperature: 0 });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.ok(['completed', 'incomplete'].includes(r.status));
  assert.ok(r.output_text.trim().length > 0, JSON.stringify(r));
  const message = r.output.find((item) => item.type === 'message');
  assert.match(message.id, /^msg_/);
  assert.equal(message.role, 'assistant');
  assert.equal(message.content[0].type, 'output_text');
  assert.deepEqual(message.content[0].annotations, []);
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  assert.equal(r.instructions, 'Answer briefly.');
  assert.equal(r.max_output_tokens, 40);
  assert.equal(r.temperature, 0);
  assert.equal(r.error, null);
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
});

test('max_output_tokens cuts the answer: status incomplete, reason max_output_tokens', async () => {
  const r = await client.responses.create({ model, input: 'Write a long story about a dragon.', max_output_tokens: 3, temperature: 0 });
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.usage.output_tokens, 3);
  assert.equal(r.output[0].status, 'incomplete');
});

// The order the spec gives a message's events.
const messageEvents = ['response.output_item.added', 'response.content_part.added', 'response.output_text.delta',
                       'response.output_text.done', 'response.content_part.done', 'response.output_item.done'];

test('stream: the spec event order, increasing sequence numbers, deltas joined = the final text', async () => {
  const stream = await client.responses.create({ model, input: 'Name three colors.', max_output_tokens: 40, temperature: 0, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.ok(['response.completed', 'response.incomplete'].includes(types.at(-1)), types.join());
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `event ${i} (${e.type})`));
  // Collapse the runs of deltas: one message item's events in order.
  const collapsed = types.slice(2, -1).filter((t, i, all) => !(t === 'response.output_text.delta' && all[i - 1] === t));
  assert.deepEqual(collapsed, messageEvents);
  const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const done = events.find((e) => e.type === 'response.output_text.done');
  const final = events.at(-1).response;
  assert.ok(deltas.length > 0);
  assert.equal(done.text, deltas);
  assert.equal(final.output[0].content[0].text, deltas);
  assert.equal(final.output[0].id, done.item_id);
  assert.equal(events[0].response.id, final.id);
  assert.equal(events[0].response.status, 'in_progress');
  assert.ok(final.usage.output_tokens > 0);
});

test('stream framing: each event is an `event: <type>` line and its `data:` line', async () => {
  const r = await fetch(server.base + '/v1/responses', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ input: 'Hi', max_output_tokens: 5, stream: true }),
  });
  assert.equal(r.headers.get('content-type'), 'text/event-stream');
  const blocks = (await r.text()).split('\n\n').filter((b) => b && !b.startsWith(':'));
  assert.ok(blocks.length >= 8);
  for (const block of blocks) {
    const [eventLine, dataLine] = block.split('\n');
    const type = /^event: (\S+)$/.exec(eventLine)?.[1];
    assert.ok(type, block);
    assert.equal(JSON.parse(dataLine.replace(/^data: /, '')).type, type);
  }
});

test('function tool round trip: a forced call validates against its schema, its output gets a message', async () => {
  const validate = new Ajv().compile(weatherSchema);
  for (const tool_choice of ['required', { type: 'function', name: 'get_weather' }]) {
    const first = await client.responses.create({ model, input: 'What is the weather in Paris?', tools: [weatherTool], tool_choice,
                                                  parallel_tool_calls: false, max_output_tokens: 100, temperature: 0 });
    const calls = first.output.filter((item) => item.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(first.output));
    const call = calls[0];
    assert.match(call.id, /^fc_/);
    assert.match(call.call_id, /^call_/);
    assert.equal(call.name, 'get_weather');
    assert.ok(validate(JSON.parse(call.arguments)), call.arguments);
    assert.deepEqual(first.tools[0].name, 'get_weather');

    const second = await client.responses.create({
      input: [{ role: 'user', content: 'What is the weather in Paris?' }, call,
              { type: 'function_call_output', call_id: call.call_id, output: '{"temperature": 21, "sky": "sunny"}' }],
      tools: [weatherTool], tool_choice: 'none', max_output_tokens: 40, temperature: 0,
    });
    assert.equal(second.output[0].type, 'message', JSON.stringify(second.output));
    assert.ok(second.output_text.length > 0);
    assert.ok(second.usage.input_tokens > first.usage.input_tokens, 'the call and its output are in the prompt');
  }
});

test('stream with a forced call: function_call_arguments deltas, done with the whole arguments', async () => {
  const stream = await client.responses.create({ model, input: 'Weather in Rome?', tools: [weatherTool], tool_choice: 'required',
                                                 parallel_tool_calls: false, max_output_tokens: 100, temperature: 0, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  events.forEach((e, i) => assert.equal(e.sequence_number, i));
  const types = events.map((e) => e.type);
  const added = events.find((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
  assert.ok(added, types.join());
  const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
  const done = events.find((e) => e.type === 'response.function_call_arguments.done');
  assert.equal(done.arguments, deltas);
  assert.equal(done.item_id, added.item.id);
  assert.ok(types.indexOf('response.function_call_arguments.done') < types.lastIndexOf('response.output_item.done'));
  const final = events.at(-1).response;
  const call = final.output.find((item) => item.type === 'function_call');
  assert.equal(call.arguments, deltas);
  assert.ok(new Ajv().compile(weatherSchema)(JSON.parse(call.arguments)));
});

test('text.format json_schema: the output parses and validates', async () => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer' } },
                   required: ['name', 'age'], additionalProperties: false };
  const r = await client.responses.create({ model, input: 'Invent a person.', max_output_tokens: 80, temperature: 0,
                                            text: { format: { type: 'json_schema', name: 'person', schema, strict: true } } });
  assert.equal(r.status, 'completed', JSON.stringify(r));
  const value = JSON.parse(r.output_text);
  assert.ok(new Ajv().compile(schema)(value), r.output_text);
  assert.equal(r.text.format.name, 'person');
});

test('previous_response_id: the second turn sees the first turn', async () => {
  const first = await client.responses.create({ model, input: 'My name is Ada.', max_output_tokens: 20, temperature: 0 });
  const followUp = 'What is my name?';
  const alone = await client.responses.create({ model, input: followUp, max_output_tokens: 20, temperature: 0, store: false });
  const second = await client.responses.create({ model, input: followUp, previous_response_id: first.id, max_output_tokens: 20, temperature: 0 });
  assert.equal(second.previous_response_id, first.id);
  // The second prompt holds the first turn: its input and its answer.
  assert.ok(second.usage.input_tokens >= alone.usage.input_tokens + first.usage.output_tokens, JSON.stringify([first.usage, alone.usage, second.usage]));
  assert.ok(second.usage.input_tokens > alone.usage.input_tokens + first.usage.input_tokens / 2);
  // store false: not kept.
  await assert.rejects(client.responses.retrieve(alone.id), (e) => e.status === 404);
});

test('inputItems.list: a chain\'s items newest first, both orders, paged by id; bad queries are 400s', async () => {
  const first = await client.responses.create({ model, input: 'My name is Ada.', max_output_tokens: 10, temperature: 0 });
  const call = { type: 'function_call', call_id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' };
  const second = await client.responses.create({
    model, previous_response_id: first.id, tools: [weatherTool], tool_choice: 'none', max_output_tokens: 10, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: 'call_a', output: 'sunny' }],
  });
  const page = await client.responses.inputItems.list(second.id);
  const types = page.data.map((item) => item.type);
  assert.deepEqual(types, ['function_call_output', 'function_call', 'message', ...first.output.map((i) => i.type).reverse(), 'message']);
  assert.deepEqual(page.data.at(-1).content, [{ type: 'input_text', text: 'My name is Ada.' }]);
  assert.equal(page.data[0].call_id, 'call_a');
  assert.equal(page.data[0].output, 'sunny');
  assert.equal(page.data[1].arguments, call.arguments);
  assert.equal(page.data[3].id, first.output.at(-1).id);
  const ids = page.data.map((item) => item.id);
  assert.equal(new Set(ids).size, ids.length);
  assert.equal(page.has_more, false);
  const asc = await client.responses.inputItems.list(second.id, { order: 'asc' });
  assert.deepEqual(asc.data.map((item) => item.id), [...ids].reverse());
  // The SDK's async iteration pages by `after` = the last id.
  const paged = [];
  for await (const item of client.responses.inputItems.list(second.id, { limit: 2 })) paged.push(item.id);
  assert.deepEqual(paged, ids);
  const raw = await (await fetch(`${server.base}/v1/responses/${second.id}/input_items?limit=2&after=${ids[0]}`)).json();
  assert.deepEqual(raw.data.map((item) => item.id), ids.slice(1, 3));
  assert.equal(raw.first_id, ids[1]);
  assert.equal(raw.last_id, ids[2]);
  assert.equal(raw.has_more, true);
  const before = await (await fetch(`${server.base}/v1/responses/${second.id}/input_items?limit=2&before=${ids.at(-1)}`)).json();
  assert.deepEqual(before.data.map((item) => item.id), ids.slice(-3, -1));
  assert.equal(before.has_more, true);
  for (const [query, param] of [['limit=0', 'limit'], ['limit=101', 'limit'], ['limit=x', 'limit'], ['order=up', 'order'],
                                ['after=msg_nope', 'after'], ['include[]=file_search_call.results', 'include']]) {
    const r = await fetch(`${server.base}/v1/responses/${second.id}/input_items?${query}`);
    assert.equal(r.status, 400, query);
    assert.equal((await r.json()).error.param, param, query);
  }
  await assert.rejects(client.responses.inputItems.list('resp_nope'), (e) => e.status === 404 && e.error?.code === 'response_not_found');
});

test('retrieve, delete, and eviction past --responses-store-size answer 404', async () => {
  const made = [];
  for (let i = 0; i < 4; ++i) made.push(await client.responses.create({ model, input: `Count to ${i + 1}.`, max_output_tokens: 5 }));
  const last = await client.responses.retrieve(made[3].id);
  assert.equal(last.id, made[3].id);
  assert.deepEqual(last.output, made[3].output);
  // The store holds 3: the first is gone, for retrieve and for previous_response_id.
  await assert.rejects(client.responses.retrieve(made[0].id), (e) => e.status === 404 && e.error?.message?.includes(made[0].id));
  await assert.rejects(client.responses.inputItems.list(made[0].id), (e) => e.status === 404 && e.error?.message?.includes(made[0].id));
  assert.equal((await client.responses.inputItems.list(made[1].id)).data.length, 1);
  await assert.rejects(client.responses.create({ model, input: 'Hi', previous_response_id: made[0].id }),
                       (e) => e.status === 404 && e.param === 'previous_response_id');
  await client.responses.delete(made[3].id);  // the SDK types it void; the raw answer is checked below
  await assert.rejects(client.responses.retrieve(made[3].id), (e) => e.status === 404);
  const again = await fetch(`${server.base}/v1/responses/${made[2].id}`, { method: 'DELETE' });
  assert.deepEqual(await again.json(), { id: made[2].id, object: 'response.deleted', deleted: true });
  assert.equal((await fetch(`${server.base}/v1/responses/${made[2].id}`, { method: 'DELETE' })).status, 404);
});

test('bad input: a 4xx in OpenAI error shape, and the server keeps serving', async () => {
  const cases = [
    [404, 'previous_response_id', { input: 'Hi', previous_response_id: 'resp_nope' }],
    [400, 'tools', { input: 'Hi', tools: [{ type: 'web_search' }] }],
    [400, 'input', { input: [{ type: 'function_call_output', call_id: 'call_x', output: '1' }] }],
    [400, 'input', { input: [] }],
    [400, 'input', { input: '' }],
    [400, 'input', {}],
    [400, 'text.format', { input: 'Hi', text: { format: { type: 'json_schema', name: 'x' } } }],
    [400, 'text.format', { input: 'Hi', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'object', strict: 1, properties: { a: { type: 'nonsense' } } } } } }],
    [400, 'text.format', { input: 'Hi', text: { format: { type: 'xml' } } }],
    [400, 'tool_choice', { input: 'Hi', tools: [weatherTool], tool_choice: { type: 'function', name: 'other' } }],
    [400, 'input', { input: [{ type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }],
    [400, 'truncation', { input: 'Hi', truncation: 'auto' }],
    [400, 'background', { input: 'Hi', background: true }],
  ];
  for (const [status, param, body] of cases) {
    const r = await postJson(server.base, '/v1/responses', body);
    assert.equal(r.status, status, `${JSON.stringify(body)} -> ${r.text}`);
    assert.equal(typeof r.json.error.message, 'string');
    assert.equal(r.json.error.param, param, r.text);
    assert.ok('type' in r.json.error && 'code' in r.json.error);
  }
  await assert.rejects(client.responses.create({ model, input: 'Hi', tools: [{ type: 'file_search', vector_store_ids: ['x'] }] }),
                       (e) => e.status === 400 && /file_search/.test(e.message));
  const r = await client.responses.create({ model, input: 'Still there?', max_output_tokens: 5 });
  assert.ok(r.output_text.length > 0);
});

test('an error past the headers: an `error` event, then response.failed with the error; nothing stored', async () => {
  const slow = await startServer(['--timeout', '0.3']);
  try {
    const timed = new OpenAI({ baseURL: slow.base + '/v1', apiKey: 'unused', maxRetries: 0 });
    // Greedy: a sampled answer may end on its own inside the 0.3 s.
    const stream = await timed.responses.create({ model, input: 'Write a long story.', max_output_tokens: 2000, stream: true, temperature: 0 });
    const events = [];
    for await (const event of stream) events.push(event);
    events.forEach((e, i) => assert.equal(e.sequence_number, i));
    const [error, failed] = events.slice(-2);
    assert.equal(error.type, 'error');
    assert.equal(error.code, 'timeout');
    assert.match(error.message, /timed out/);
    assert.equal(failed.type, 'response.failed');
    assert.equal(failed.response.status, 'failed');
    assert.equal(failed.response.error.code, 'timeout');
    await assert.rejects(timed.responses.retrieve(failed.response.id), (e) => e.status === 404);
    await assert.rejects(timed.responses.create({ model, input: 'Write a long story.', max_output_tokens: 2000, temperature: 0 }),
                         (e) => e.status === 504 && e.error?.code === 'timeout');
  } finally {
    await slow.stop();
  }
});
