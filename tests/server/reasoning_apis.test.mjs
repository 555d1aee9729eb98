// A thinking model's thoughts through /v1/responses and Anthropic's /v1/messages, driven by the
// official npm clients, unmodified: `openai` (a reasoning item before the message, its streamed
// events, reasoning items given back in input and kept by previous_response_id, reasoning.effort)
// and `@anthropic-ai/sdk` (thinking blocks whole and streamed, thinking disabled, thinking blocks
// given back). The model has random weights and Qwen3's thinking template: `inferlab serve
// --test-hooks` lets each request name the tokens to pick (test_forced_output, sent as an extra
// body property), so under test are the server's parsing, its writers and the streaming.
import test from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { startServer } from './helpers.mjs';

const server = await startServer(['--test-hooks']);
test.after(() => server.stop());
const openai = new OpenAI({ baseURL: server.base + '/v1', apiKey: 'unused', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: server.base, apiKey: 'unused', maxRetries: 0 });
const model = 'model';
const question = 'What is 2 + 2?';
const thoughts = 'Two and two.\nFour.';
const forced = `<think>\n${thoughts}\n</think>\n\nIt is 4.<|im_end|>`;
const weatherTool = {
  type: 'function', name: 'get_weather', description: 'Weather of a city', strict: false,
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const toolThoughts = 'I should look it up.';
const forcedCall = `<think>\n${toolThoughts}\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>`;

// ---- /v1/responses ------------------------------------------------------------------------------

test('responses: a reasoning item with the thoughts, then the message; reasoning_tokens counted', async () => {
  const r = await openai.responses.create({ model, input: question, max_output_tokens: 64, temperature: 0, test_forced_output: forced });
  assert.deepEqual(r.output.map((item) => item.type), ['reasoning', 'message']);
  const [reasoning, message] = r.output;
  assert.match(reasoning.id, /^rs_/);
  assert.deepEqual(reasoning.summary, []);
  assert.deepEqual(reasoning.content, [{ type: 'reasoning_text', text: thoughts }]);
  assert.equal(message.content[0].text, 'It is 4.');
  assert.equal(r.output_text, 'It is 4.');
  const details = r.usage.output_tokens_details;
  assert.ok(details.reasoning_tokens > 5 && details.reasoning_tokens < r.usage.output_tokens, JSON.stringify(r.usage));
  assert.deepEqual(r.reasoning, { effort: null, summary: null });
});

test('responses streamed: the reasoning item\'s events, then the message\'s, sequence numbers in order', async () => {
  const stream = await openai.responses.create({ model, input: question, max_output_tokens: 64, temperature: 0, stream: true,
    test_forced_output: forced });
  const kinds = [];
  let reasoningText = '', outputText = '', seq = 0, completed = null;
  for await (const event of stream) {
    assert.equal(event.sequence_number, seq++, event.type);
    if (event.type === 'response.reasoning_text.delta') {
      assert.equal(event.output_index, 0);
      reasoningText += event.delta;
    }
    if (event.type === 'response.output_text.delta') {
      assert.equal(event.output_index, 1);
      outputText += event.delta;
    }
    if (event.type === 'response.reasoning_text.done') assert.equal(event.text, thoughts);
    if (event.type === 'response.completed') completed = event.response;
    const kind = event.type + (event.item ? ' ' + event.item.type : '') + (event.part ? ' ' + event.part.type : '');
    if (kinds.at(-1) !== kind) kinds.push(kind);  // runs of deltas as one
  }
  assert.deepEqual(kinds, [
    'response.created', 'response.in_progress',
    'response.output_item.added reasoning', 'response.content_part.added reasoning_text', 'response.reasoning_text.delta',
    'response.reasoning_text.done', 'response.content_part.done reasoning_text', 'response.output_item.done reasoning',
    'response.output_item.added message', 'response.content_part.added output_text', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done output_text', 'response.output_item.done message',
    'response.completed',
  ]);
  assert.equal(reasoningText, thoughts);
  assert.equal(outputText, 'It is 4.');
  assert.ok(completed.usage.output_tokens_details.reasoning_tokens > 5);

  // The SDK's own accumulator (responses.stream) builds the same reasoning item from the events.
  const sdkStream = openai.responses.stream({ model, input: question, max_output_tokens: 64, temperature: 0, test_forced_output: forced });
  const final = await sdkStream.finalResponse();
  assert.deepEqual(final.output[0].content, [{ type: 'reasoning_text', text: thoughts }]);
  assert.equal(final.output_text, 'It is 4.');
});

test('responses: reasoning items given back in input reach the template; previous_response_id keeps them', async () => {
  const first = await openai.responses.create({ model, input: 'Weather in Paris?', tools: [weatherTool], max_output_tokens: 200,
    temperature: 0, test_forced_output: forcedCall });
  assert.deepEqual(first.output.map((item) => item.type), ['reasoning', 'function_call']);
  assert.equal(first.output[0].content[0].text, toolThoughts);
  const call = first.output[1];
  const result = { type: 'function_call_output', call_id: call.call_id, output: '{"sky": "clear"}' };
  const user = { role: 'user', content: 'Weather in Paris?' };
  const next = { model, tools: [weatherTool], max_output_tokens: 16, temperature: 0, test_forced_output: 'Clear.<|im_end|>' };
  const withThoughts = await openai.responses.create({ ...next, input: [user, ...first.output, result] });
  const without = await openai.responses.create({ ...next, input: [user, call, result] });
  // Qwen3's template renders the thoughts of the turn after the last user query: more input tokens.
  assert.ok(withThoughts.usage.input_tokens > without.usage.input_tokens + 3,
    `${withThoughts.usage.input_tokens} vs ${without.usage.input_tokens}`);
  const continued = await openai.responses.create({ ...next, previous_response_id: first.id, input: [result] });
  assert.equal(continued.usage.input_tokens, withThoughts.usage.input_tokens);
  assert.equal(continued.output_text, 'Clear.');
});

test('responses: reasoning.effort is echoed; none turns thinking off (no reasoning item)', async () => {
  const off = await openai.responses.create({ model, input: question, max_output_tokens: 16, temperature: 0, reasoning: { effort: 'none' },
    test_forced_output: 'It is 4.<|im_end|>' });
  assert.deepEqual(off.output.map((item) => item.type), ['message']);
  assert.equal(off.output_text, 'It is 4.');
  assert.equal(off.usage.output_tokens_details.reasoning_tokens, 0);
  assert.equal(off.reasoning.effort, 'none');
  const high = await openai.responses.create({ model, input: question, max_output_tokens: 64, temperature: 0, reasoning: { effort: 'high' },
    test_forced_output: forced });
  assert.equal(high.reasoning.effort, 'high');
  assert.equal(high.output[0].type, 'reasoning');
  await assert.rejects(openai.responses.create({ model, input: question, reasoning: { effort: 'enormous' } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'reasoning.effort');
});

// ---- Anthropic /v1/messages ---------------------------------------------------------------------

const thinkingOn = { type: 'enabled', budget_tokens: 1024 };

test('messages: a thinking block (with its signature field) before the text block', async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 2048, thinking: thinkingOn, temperature: 0,
    messages: [{ role: 'user', content: question }], test_forced_output: forced });
  assert.deepEqual(m.content, [{ type: 'thinking', thinking: thoughts, signature: '' }, { type: 'text', text: 'It is 4.' }]);
  assert.equal(m.stop_reason, 'end_turn');
  const thinkingTokens = m.usage.output_tokens_details.thinking_tokens;
  assert.ok(thinkingTokens > 5 && thinkingTokens < m.usage.output_tokens, JSON.stringify(m.usage));
});

test('messages streamed: thinking_delta and signature_delta in block 0, the text in block 1', async () => {
  const stream = anthropic.messages.stream({ model, max_tokens: 2048, thinking: thinkingOn, temperature: 0,
    messages: [{ role: 'user', content: question }], test_forced_output: forced });
  const kinds = [];
  let thinking = '';
  for await (const event of stream) {
    if (event.type === 'content_block_delta' && event.delta.type === 'thinking_delta') thinking += event.delta.thinking;
    const kind = [event.type, event.index, event.content_block?.type ?? event.delta?.type].filter((x) => x !== undefined).join(' ');
    if (kinds.at(-1) !== kind) kinds.push(kind);
  }
  assert.deepEqual(kinds, [
    'message_start',  // the SDK drops pings
    'content_block_start 0 thinking', 'content_block_delta 0 thinking_delta', 'content_block_delta 0 signature_delta', 'content_block_stop 0',
    'content_block_start 1 text', 'content_block_delta 1 text_delta', 'content_block_stop 1',
    'message_delta', 'message_stop',
  ]);
  assert.equal(thinking, thoughts);
  const final = await stream.finalMessage();
  assert.deepEqual(final.content, [{ type: 'thinking', thinking: thoughts, signature: '' }, { type: 'text', text: 'It is 4.' }]);
  assert.ok(final.usage.output_tokens_details.thinking_tokens > 5);
});

test('messages: thinking disabled gives no thinking block; a budget under 1024 is refused', async () => {
  const m = await anthropic.messages.create({ model, max_tokens: 16, thinking: { type: 'disabled' }, temperature: 0,
    messages: [{ role: 'user', content: question }], test_forced_output: 'It is 4.<|im_end|>' });
  assert.deepEqual(m.content, [{ type: 'text', text: 'It is 4.' }]);
  assert.equal(m.usage.output_tokens_details.thinking_tokens, 0);
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 2048, thinking: { type: 'enabled', budget_tokens: 1000 },
    messages: [{ role: 'user', content: question }] }),
  (e) => e instanceof Anthropic.BadRequestError && e.error.error.type === 'invalid_request_error' && /1024/.test(e.error.error.message));
});

test('messages: thinking blocks given back reach the template (count_tokens)', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather of a city', input_schema: weatherTool.parameters }];
  const first = await anthropic.messages.create({ model, max_tokens: 2048, thinking: thinkingOn, temperature: 0, tools,
    messages: [{ role: 'user', content: 'Weather in Paris?' }], test_forced_output: forcedCall });
  assert.deepEqual(first.content.map((block) => block.type), ['thinking', 'tool_use']);
  assert.equal(first.content[0].thinking, toolThoughts);
  const result = { role: 'user', content: [{ type: 'tool_result', tool_use_id: first.content[1].id, content: '{"sky": "clear"}' }] };
  const history = (content) => [{ role: 'user', content: 'Weather in Paris?' }, { role: 'assistant', content }, result];
  const withThoughts = await anthropic.messages.countTokens({ model, tools, messages: history(first.content) });
  const without = await anthropic.messages.countTokens({ model, tools, messages: history(first.content.slice(1)) });
  assert.ok(withThoughts.input_tokens > without.input_tokens + 3, `${withThoughts.input_tokens} vs ${without.input_tokens}`);
  const answer = await anthropic.messages.create({ model, max_tokens: 16, temperature: 0, tools, messages: history(first.content),
    test_forced_output: '<think>\n\n</think>\n\nClear.<|im_end|>' });
  assert.equal(answer.usage.input_tokens, withThoughts.input_tokens);
  assert.equal(answer.content.at(-1).text, 'Clear.');
});
