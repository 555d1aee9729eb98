"""LLM.generate / chat / stream on the default model (SmolLM2-135M-Instruct Q4_1), through the
engine and scheduler `inferlab serve` runs, checked against the CLI and against themselves."""
import json

import jsonschema
import pytest

from conftest import SMOLLM2, THREADS, cli_json
from inferlab import SamplingParams

PROMPT = "The capital of France is"
GREEDY = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)


def test_greedy_ids_equal_the_clis(smollm2):
    cli = cli_json("generate", SMOLLM2, "--prompt", PROMPT, "--max-new-tokens", "24", "--ignore-eos",
                   "--threads", str(THREADS))
    # The CLI's text keeps special tokens (an EOS passed under --ignore-eos shows); so does this one.
    [out] = smollm2.generate(PROMPT, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True,
                                                    skip_special_tokens=False))
    assert out.prompt == PROMPT
    assert out.prompt_token_ids == cli["prompt_ids"]
    assert out.outputs[0].token_ids == cli["tokens"]
    assert out.outputs[0].text == cli["text"]
    assert out.outputs[0].finish_reason == "length"
    assert out.finished


def test_prompts_batched_together_answer_as_alone(smollm2):
    prompts = [PROMPT, "Water boils at", {"prompt_token_ids": smollm2.get_tokenizer().encode("Once upon a time")}]
    together = smollm2.generate(prompts, GREEDY)
    assert [o.prompt for o in together] == [PROMPT, "Water boils at", None]
    for prompt, out in zip(prompts, together):
        [alone] = smollm2.generate(prompt, GREEDY)
        assert out.outputs[0].token_ids == alone.outputs[0].token_ids


def test_sampling_is_reproducible_by_seed(smollm2):
    params = SamplingParams(temperature=1.0, top_p=0.95, top_k=50, seed=7, max_tokens=24, ignore_eos=True)
    first = smollm2.generate(PROMPT, params)[0].outputs[0]
    again = smollm2.generate(PROMPT, params)[0].outputs[0]
    other = smollm2.generate(PROMPT, SamplingParams(temperature=1.0, top_p=0.95, top_k=50, seed=8, max_tokens=24,
                                                     ignore_eos=True))[0].outputs[0]
    assert first.token_ids == again.token_ids and first.text == again.text
    assert first.token_ids != other.token_ids


def test_n_choices_each_seeded_by_its_index(smollm2):
    [out] = smollm2.generate(PROMPT, SamplingParams(n=3, temperature=1.0, seed=1, max_tokens=16, ignore_eos=True))
    assert [c.index for c in out.outputs] == [0, 1, 2]
    assert len({tuple(c.token_ids) for c in out.outputs}) > 1
    # The engine seeds choice i with seed + i (as the server does): choice 2 is seed 3's only choice.
    [alone] = smollm2.generate(PROMPT, SamplingParams(temperature=1.0, seed=3, max_tokens=16, ignore_eos=True))
    assert out.outputs[2].token_ids == alone.outputs[0].token_ids


def test_stop_string_ends_the_text_before_it(smollm2):
    whole = smollm2.generate(PROMPT, GREEDY)[0].outputs[0].text
    words = whole.split()
    assert len(words) > 4, whole
    stop = words[3]
    out = smollm2.generate(PROMPT, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]))
    c = out[0].outputs[0]
    assert c.text == whole[:whole.index(stop)]
    assert c.finish_reason == "stop" and c.stop_reason == stop


def test_logprobs_in_vllms_shape(smollm2):
    c = smollm2.generate(PROMPT, SamplingParams(temperature=0, max_tokens=8, logprobs=2))[0].outputs[0]
    assert len(c.logprobs) == len(c.token_ids)
    for token, alternatives in zip(c.token_ids, c.logprobs):
        assert alternatives[token].rank == 1  # greedy: the most likely
        assert len(alternatives) == 2 and all(lp.logprob <= 0 for lp in alternatives.values())
    assert c.cumulative_logprob == pytest.approx(sum(lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs)))


def test_streamed_text_is_the_whole_answer(smollm2):
    pieces = list(smollm2.stream(PROMPT, GREEDY))
    assert len(pieces) > 1
    assert "".join(pieces) == smollm2.generate(PROMPT, GREEDY)[0].outputs[0].text
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    params = SamplingParams(temperature=0, max_tokens=24)
    assert "".join(smollm2.stream_chat(messages, params)) == smollm2.chat(messages, params)[0].outputs[0].text


def test_chat_uses_the_models_template(smollm2):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    [out] = smollm2.chat(messages, SamplingParams(temperature=0, max_tokens=16))
    tokenizer = smollm2.get_tokenizer()
    assert out.prompt_token_ids == tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    assert out.outputs[0].text and out.outputs[0].finish_reason == "length"


def test_json_schema_output_validates(smollm2):
    schema = {"type": "object",
              "properties": {"city": {"type": "string", "maxLength": 24},
                             "country": {"type": "string", "enum": ["France", "Germany", "Spain"]},
                             "population_millions": {"type": "integer", "minimum": 0, "maximum": 100}},
              "required": ["city", "country", "population_millions"], "additionalProperties": False}
    messages = [{"role": "user", "content": "Describe the capital of France as JSON."}]
    [out] = smollm2.chat(messages, SamplingParams(temperature=0, max_tokens=120),
                         response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": schema}})
    answer = json.loads(out.outputs[0].text)
    jsonschema.validate(answer, schema)
    assert out.outputs[0].finish_reason == "stop"


def test_forced_tool_call(smollm2):
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}},
                       "required": ["city"], "additionalProperties": False}}}]
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    [out] = smollm2.chat(messages, SamplingParams(temperature=0, max_tokens=80), tools=tools, tool_choice="required",
                         parallel_tool_calls=False)
    c = out.outputs[0]
    assert c.finish_reason == "tool_calls"
    assert [call["name"] for call in c.tool_calls] == ["get_weather"]
    assert json.loads(c.tool_calls[0]["arguments"]) == {"city": "Paris"}


def test_several_conversations_batched(smollm2):
    conversations = [[{"role": "user", "content": "What is the capital of France?"}],
                     [{"role": "user", "content": "Name a colour."}]]
    params = SamplingParams(temperature=0, max_tokens=12)
    together = smollm2.chat(conversations, params)
    assert [o.outputs[0].text for o in together] == [smollm2.chat(c, params)[0].outputs[0].text for c in conversations]
