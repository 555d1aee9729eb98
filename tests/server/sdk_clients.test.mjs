// Structured outputs and tool calls through two more real clients from npm: the Vercel AI SDK
// (`ai` + `@ai-sdk/openai-compatible`: generateObject, streamText with tools) and LangChain
// (`@langchain/openai` ChatOpenAI: withStructuredOutput, bindTools). Calls are forced by
// tool_choice (constrained decoding), so they happen whatever the random weights say; one call per
// answer (parallel_tool_calls false): with parallel calls the random model made 1-6 calls and in
// 5 of 200 answers max_tokens cut the last one short (finish_reason length).
import test from 'node:test';
import assert from 'node:assert/strict';
import { z } from 'zod';
import { generateObject, streamText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI } from '@langchain/openai';
import { tool as lcTool } from '@langchain/core/tools';
import { startServer } from './helpers.mjs';

const NO_THINKING = ['--chat-template-kwargs', '{"enable_thinking": false}'];

// The test model has Qwen3's thinking template; these answers are steered as a non-thinking model's.
const server = await startServer(NO_THINKING);
test.after(() => server.stop());

const Recipe = z.object({ title: z.string().max(20), servings: z.number().int(), vegan: z.boolean() });
const Weather = z.object({ city: z.string().max(12), unit: z.enum(['c', 'f']) });

test('AI SDK generateObject: the object validates against the zod schema', async () => {
  const provider = createOpenAICompatible({ name: 'inferlab', baseURL: server.base + '/v1', supportsStructuredOutputs: true });
  for (const seed of [1, 2]) {
    const { object } = await generateObject({ model: provider.chatModel('model'), schema: Recipe, prompt: 'A recipe', seed, maxOutputTokens: 300, maxRetries: 0 });
    Recipe.parse(object);
  }
});

test('AI SDK streamText with a required tool: the call arrives with typed input', async () => {
  const provider = createOpenAICompatible({ name: 'inferlab', baseURL: server.base + '/v1' });
  const result = streamText({
    model: provider.chatModel('model'), prompt: 'Weather?', toolChoice: 'required', maxOutputTokens: 300, maxRetries: 0,
    providerOptions: { inferlab: { parallel_tool_calls: false } },
    tools: { get_weather: tool({ description: 'Weather for a city', inputSchema: Weather }) },
  });
  const calls = await result.toolCalls;
  assert.ok(calls.length >= 1, 'at least one tool call');
  for (const call of calls) {
    assert.equal(call.toolName, 'get_weather');
    Weather.parse(call.input);
  }
  assert.equal(await result.finishReason, 'tool-calls');
});

test('LangChain ChatOpenAI: withStructuredOutput and bindTools', async () => {
  const llm = new ChatOpenAI({ model: 'model', apiKey: 'unused', maxTokens: 300, maxRetries: 0, configuration: { baseURL: server.base + '/v1' } });
  const structured = llm.withStructuredOutput(Recipe, { name: 'recipe' });
  Recipe.parse(await structured.invoke('A recipe'));
  const weather = lcTool(async () => 'sunny', { name: 'get_weather', description: 'Weather for a city', schema: Weather });
  const message = await llm.bindTools([weather], { tool_choice: 'required', parallel_tool_calls: false }).invoke('Weather?');
  assert.equal(message.tool_calls.length, 1, JSON.stringify(message));
  assert.equal(message.tool_calls[0].name, 'get_weather');
  Weather.parse(message.tool_calls[0].args);
});
