// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) driven by Anthropic's
// own npm client (@anthropic-ai/sdk, unmodified) and the AI SDK's Anthropic provider, against the
// default model (SmolLM2-135M-Instruct: ChatML, Hermes tool calls). Expected texts come from the
// server itself (greedy answers, then stop sequences cut out of them), never written down here.
import test from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { startServer, postJson } from './helpers.mjs';

const NO_THINKING = ['--chat-template-kwargs', '{"enable_thinking": false}'];

// The test model has Qwen3's thinking template; these answers are steered as a non-thinking model's.
const server = await startServer(NO_THINKING);
const key = 'sk-inferlab-' + Math.random().toString(16).slice(2);
const keyed = await startServer([...NO_THINKING, '--api-key', key, '--max-body-bytes', '20000']);
test.after(async () => {
  await server.stop();
  await keyed.stop();
});

const modelName = (await (await fetch(server.base + '/v1/models')).json()).data[0].id;
const client = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
const question = [{ role: 'user', content: 'What is the capital of France?' }];

const Weather = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 20 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const weatherTool = { name: 'get_weather', description: 'The current weather in a city', input_schema: Weather };

// The input of a forced call against the schema: the keys, their types and the enum.
function assertWeatherInput(input) {
  assert.deepEqual(Object.keys(input).sort(), ['city', 'unit'], JSON.stringify(input));
  assert.equal(typeof input.city, 'string');
  assert.ok(input.city.length <= 20);
  assert.ok(['celsius', 'fahrenheit'].includes(input.unit), JSON.stringify(input));
}

// `event:` / `data:` pairs of an Anthropic SSE body, in order (comments dropped).
function namedEvents(text) {
  const events = [];
  for (const block of text.split('\n\n')) {
    const lines = block.split('\n').filter((l) => l && !l.startsWith(':'));
    if (!lines.length) continue;
    assert.ok(lines[0].startsWith('event: ') && lines[1].startsWith('data: ') && lines.length === 2, JSON.stringify(block));
    events.push({ name: lines[0].slice(7), data: JSON.parse(lines[1].slice(6)) });
  }
  return events;
}

function assertAnthropicError(r, status, type) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json?.type, 'error', r.text);
  assert.equal(r.json.error.type, type, r.text);
  assert.equal(typeof r.json.error.message, 'string');
}

test('messages.create: a text answer in Anthropic shape, usage counted', async () => {
  const message = await client.messages.create({ model: modelName, max_tokens: 40, temperature: 0, messages: question });
  assert.match(message.id, /^msg_/);
  assert.equal(message.type, 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.content.length, 1);
  assert.equal(message.content[0].type, 'text');
  assert.ok(message.content[0].text.length > 0);
  assert.ok(['end_turn', 'max_tokens'].includes(message.stop_reason));
  assert.equal(message.stop_sequence, null);
  assert.ok(message.usage.input_tokens > 5 && message.usage.output_tokens > 0 && message.usage.output_tokens <= 40);
  // The system prompt as text blocks reaches the template as the system message.
  const withSystem = await client.messages.create({
    model: modelName, max_tokens: 1, messages: question, system: [{ type: 'text', text: 'Answer in one word.' }],
  });
  const openai = await postJson(server.base, '/tokenize', { messages: [{ role: 'system', content: 'Answer in one word.' }, ...question] });
  assert.equal(withSystem.usage.input_tokens, openai.json.count);
  assert.notEqual(withSystem.usage.input_tokens, message.usage.input_tokens);
});

test('messages.stream: text events add up to finalMessage, same as the whole answer', async () => {
  const body = { model: modelName, max_tokens: 40, temperature: 0, messages: question };
  const whole = await client.messages.create(body);
  const stream = client.messages.stream(body);
  let text = '';
  stream.on('text', (delta) => (text += delta));
  const final = await stream.finalMessage();
  assert.equal(text, final.content[0].text);
  assert.equal(text, whole.content[0].text);
  assert.equal(final.stop_reason, whole.stop_reason);
  assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
  assert.equal(final.usage.input_tokens, whole.usage.input_tokens);
});

test('the raw stream: named events in Anthropic order, each event name its data type', async () => {
  const r = await fetch(server.base + '/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    // Greedy: a sampled answer of the random model could end on its EOS inside the 12 tokens.
    body: JSON.stringify({ model: modelName, max_tokens: 12, temperature: 0, stream: true, messages: question }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/event-stream/);
  const events = namedEvents(await r.text());
  for (const e of events) assert.equal(e.name, e.data.type);
  const names = events.map((e) => e.name);
  assert.deepEqual(names.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
  assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.ok(names.slice(3, -3).every((n) => n === 'content_block_delta'));
  assert.equal(events[0].data.message.usage.input_tokens > 0, true);
  const delta = events.at(-2).data;
  assert.equal(delta.delta.stop_reason, 'max_tokens');
  assert.equal(delta.usage.output_tokens, 12);
});

test('stop_sequences: stop_reason stop_sequence, the text cut before it', async () => {
  const base = { model: modelName, max_tokens: 40, temperature: 0, messages: question };
  const full = (await client.messages.create(base)).content[0].text;
  const words = full.split(' ').filter((w) => w.length >= 3);
  assert.ok(words.length >= 2, full);
  const stop = ' ' + words[1];
  const cut = await client.messages.create({ ...base, stop_sequences: ['never-seen-zzz', stop] });
  assert.equal(cut.stop_reason, 'stop_sequence');
  assert.equal(cut.stop_sequence, stop);
  assert.equal(cut.content[0].text, full.slice(0, full.indexOf(stop)));
  // Streamed, the same stop reaches message_delta.
  const final = await client.messages.stream({ ...base, stop_sequences: [stop] }).finalMessage();
  assert.equal(final.stop_reason, 'stop_sequence');
  assert.equal(final.stop_sequence, stop);
  assert.equal(final.content[0].text, cut.content[0].text);
});

test('max_tokens: stop_reason max_tokens after exactly that many tokens', async () => {
  const message = await client.messages.create({ model: modelName, max_tokens: 3, messages: question });
  assert.equal(message.stop_reason, 'max_tokens');
  assert.equal(message.usage.output_tokens, 3);
});

// One call per answer (disable_parallel_tool_use): with parallel calls the model may go on calling
// until max_tokens cuts the last call short (it then stays text, stop_reason max_tokens).
test('a tool round trip: any and tool force a tool_use whose input fits the schema; the tool_result gets a text answer', async () => {
  for (const tool_choice of [{ type: 'any', disable_parallel_tool_use: true }, { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }]) {
    const message = await client.messages.create({
      model: modelName, max_tokens: 100, tools: [weatherTool], tool_choice,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    });
    assert.equal(message.stop_reason, 'tool_use', JSON.stringify(message));
    const calls = message.content.filter((b) => b.type === 'tool_use');
    assert.equal(calls.length, 1);
    for (const call of calls) {
      assert.match(call.id, /^toolu_/);
      assert.equal(call.name, 'get_weather');
      assertWeatherInput(call.input);
    }
  }
  // Streamed: the call arrives as input_json_delta and the SDK builds the same kind of input.
  const streamed = await client.messages.stream({
    model: modelName, max_tokens: 100, tools: [weatherTool], tool_choice: { type: 'any', disable_parallel_tool_use: true },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  }).finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  const call = streamed.content.find((b) => b.type === 'tool_use');
  assertWeatherInput(call.input);

  const history = [
    { role: 'user', content: 'What is the weather in Paris?' },
    { role: 'assistant', content: streamed.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'Sunny, 24 degrees' }] },
  ];
  const answer = await client.messages.create({
    model: modelName, max_tokens: 40, tools: [weatherTool], tool_choice: { type: 'none' }, messages: history,
  });
  assert.equal(answer.content[0].type, 'text');
  assert.ok(answer.content[0].text.length > 0);
  assert.ok(['end_turn', 'max_tokens'].includes(answer.stop_reason));
  // The call and its result are in the prompt the template rendered.
  const before = await client.messages.countTokens({ model: modelName, tools: [weatherTool], messages: history.slice(0, 1) });
  assert.ok(answer.usage.input_tokens > before.input_tokens + 10);
});

test('countTokens: the input_tokens messages.create reports, and what /tokenize counts for the same chat', async () => {
  const body = { model: modelName, system: 'Be brief.', messages: question };
  const counted = await client.messages.countTokens(body);
  const created = await client.messages.create({ ...body, max_tokens: 1 });
  assert.equal(counted.input_tokens, created.usage.input_tokens);
  const openai = await postJson(server.base, '/tokenize', { messages: [{ role: 'system', content: 'Be brief.' }, ...question] });
  assert.equal(counted.input_tokens, openai.json.count);
  // Tools go through the template as /v1/chat/completions sends them (SmolLM2's template does not
  // render them; tests/server/anthropic_request_test.cpp checks a template that does).
  const withTools = await client.messages.countTokens({ ...body, tools: [weatherTool] });
  const openaiTools = await postJson(server.base, '/tokenize', {
    messages: [{ role: 'system', content: 'Be brief.' }, ...question],
    tools: [{ type: 'function', function: { name: weatherTool.name, description: weatherTool.description, parameters: Weather } }],
  });
  assert.equal(withTools.input_tokens, openaiTools.json.count);
});

test('bad input: a 4xx in Anthropic error shape each, and the server keeps serving', async () => {
  const ok = { model: modelName, max_tokens: 4, messages: question };
  const cases = [
    [{ model: modelName, messages: question }, 400, 'invalid_request_error', /max_tokens/],
    [{ ...ok, messages: [] }, 400, 'invalid_request_error', /at least one message/],
    [{ ...ok, messages: [...question, { role: 'assistant', content: 'Paris' }] }, 400, 'invalid_request_error', /last message/],
    [{ ...ok, messages: [{ role: 'tool', content: 'x' }] }, 400, 'invalid_request_error', /role 'tool'/],
    [{ ...ok, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nope', content: 'x' }] }] },
      400, 'invalid_request_error', /toolu_nope/],
    [{ ...ok, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] },
      400, 'invalid_request_error', /'image'/],
    [{ ...ok, model: 'claude-not-here' }, 404, 'not_found_error', /claude-not-here/],
    [{ ...ok, tool_choice: { type: 'any' } }, 400, 'invalid_request_error', /needs 'tools'/],
    [{ ...ok, thinking: { type: 'enabled', budget_tokens: 1024 } }, 400, 'invalid_request_error', /thinking/],
    [{ ...ok, temperature: 1.5 }, 400, 'invalid_request_error', /temperature/],
    ['{"model": "x", "max_tokens": 4,', 400, 'invalid_request_error', /not valid JSON/],
  ];
  for (const [body, status, type, message] of cases) {
    const r = await postJson(server.base, '/v1/messages', body);
    assertAnthropicError(r, status, type);
    assert.match(r.json.error.message, message);
  }
  const count = await postJson(server.base, '/v1/messages/count_tokens', { model: modelName, messages: [] });
  assertAnthropicError(count, 400, 'invalid_request_error');
  // The SDK reads the shape: a typed error with the server's message.
  await assert.rejects(client.messages.create({ model: modelName, messages: question }), (e) =>
    e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error' && /max_tokens/.test(e.message));
  // OpenAI's routes keep OpenAI's shape.
  const openai = await postJson(server.base, '/v1/chat/completions', '{"messages": [');
  assert.equal(openai.status, 400);
  assert.equal(typeof openai.json.error.message, 'string');
  assert.equal(openai.json.type, undefined);
  const after = await client.messages.create(ok);
  assert.equal(after.usage.output_tokens > 0, true);
});

test('--api-key: x-api-key and Bearer accepted; a wrong key and the transport\'s own errors in Anthropic shape', async () => {
  const good = new Anthropic({ baseURL: keyed.base, apiKey: key, maxRetries: 0 });
  const message = await good.messages.create({ model: modelName, max_tokens: 2, messages: question });
  assert.equal(message.type, 'message');
  const bearer = new Anthropic({ baseURL: keyed.base, apiKey: null, authToken: key, maxRetries: 0 });
  assert.equal((await bearer.messages.countTokens({ model: modelName, messages: question })).input_tokens > 0, true);
  const wrong = new Anthropic({ baseURL: keyed.base, apiKey: key + 'x', maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: modelName, max_tokens: 2, messages: question }), (e) =>
    e instanceof Anthropic.AuthenticationError && e.status === 401 && e.error?.error?.type === 'authentication_error');
  const missing = await postJson(keyed.base, '/v1/messages', { model: modelName, max_tokens: 2, messages: question });
  assertAnthropicError(missing, 401, 'authentication_error');
  // Past --max-body-bytes the transport refuses before any handler: still Anthropic's shape here.
  const big = await postJson(keyed.base, '/v1/messages', { model: modelName, max_tokens: 2, messages: [{ role: 'user', content: 'x'.repeat(30000) }] },
    { headers: { 'content-type': 'application/json', 'x-api-key': key } });
  assertAnthropicError(big, 413, 'request_too_large');
  const bigOpenai = await postJson(keyed.base, '/v1/chat/completions', { messages: [{ role: 'user', content: 'x'.repeat(30000) }] },
    { headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` } });
  assert.equal(bigOpenai.status, 413);
  assert.equal(typeof bigOpenai.json.error.message, 'string');
  assert.equal(bigOpenai.json.type, undefined);
});

// The AI SDK as an app uses it: `ai`'s generateText / streamText over the @ai-sdk/anthropic provider
// (createAnthropic with our base URL), and a tool round trip run by the SDK's own step loop.
test('AI SDK @ai-sdk/anthropic: generateText, streamText and a tool round trip', async () => {
  const model = createAnthropic({ baseURL: server.base + '/v1', apiKey: 'unused' })(modelName);
  const asked = { model, prompt: 'What is the capital of France?', maxOutputTokens: 30, temperature: 0, maxRetries: 0 };
  const generated = await generateText(asked);
  assert.ok(generated.text.length > 0);
  assert.ok(['stop', 'length'].includes(generated.finishReason), generated.finishReason);
  assert.ok(generated.usage.inputTokens > 5 && generated.usage.outputTokens > 0, JSON.stringify(generated.usage));

  const streamed = streamText(asked);
  let text = '';
  for await (const part of streamed.fullStream) {
    assert.notEqual(part.type, 'error', JSON.stringify(part));
    if (part.type === 'text-delta') text += part.text;
  }
  assert.equal(text, generated.text);
  assert.equal(await streamed.finishReason, generated.finishReason);
  assert.equal((await streamed.usage).outputTokens, generated.usage.outputTokens);

  // Step one must call the tool; step two sends its result back (tool_use + tool_result blocks)
  // and answers in words.
  const cities = [];
  const round = await generateText({
    model, prompt: 'What is the weather in Paris?', maxOutputTokens: 100, temperature: 0, maxRetries: 0,
    tools: {
      get_weather: tool({
        description: 'The current weather in a city', inputSchema: jsonSchema(Weather),
        execute: async ({ city }) => { cities.push(city); return { temperature: 21, sky: 'sunny' }; },
      }),
    },
    prepareStep: ({ stepNumber }) => ({ toolChoice: stepNumber === 0 ? 'required' : 'none' }),
    stopWhen: stepCountIs(2),
    providerOptions: { anthropic: { disableParallelToolUse: true } },
    include: { requestBody: true },
  });
  assert.equal(round.steps.length, 2, JSON.stringify(round.steps.map((s) => s.finishReason)));
  const [call] = round.steps[0].toolCalls;
  assert.equal(round.steps[0].finishReason, 'tool-calls');
  assert.equal(call.toolName, 'get_weather');
  assertWeatherInput(call.input);
  assert.deepEqual(cities, [call.input.city]);
  const sent = round.steps[1].request.body;
  const blocks = (typeof sent === 'string' ? JSON.parse(sent) : sent).messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  assert.ok(blocks.some((b) => b.type === 'tool_use' && b.id === call.toolCallId), JSON.stringify(blocks));
  assert.ok(blocks.some((b) => b.type === 'tool_result' && b.tool_use_id === call.toolCallId), JSON.stringify(blocks));
  assert.ok(round.text.length > 0, JSON.stringify(round.steps[1].content));
  assert.ok(round.steps[1].usage.inputTokens > round.steps[0].usage.inputTokens, 'the call and its result are in the prompt');
});
