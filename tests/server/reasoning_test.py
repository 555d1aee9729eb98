"""Reasoning output of a thinking model (Qwen3's template) through the official openai Python SDK.

`template`: Qwen3's chat template rendered by inferlab byte-identically to transformers'
apply_chat_template (thinking on and off, tools, tool results, multi-turn with earlier reasoning
dropped as the template drops it, reasoning given back as reasoning_content or inside content).

`sdk`: `inferlab serve --test-hooks` on a random-weight Qwen3 model with the real Qwen3 tokenizer.
A random model never closes </think> by itself, so each request names the tokens the sampler picks
(`test_forced_output`, honoured only while a grammar allows them): what is under test is the
server's parsing, the grammar's start at </think> and the streaming, not the model.
"""
import argparse
import json
import os
import sys

from reasoning_helpers import check, compare_chat_template, forced_chat, read_reasoning_stream, token_count

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))
from serve_helper import serve  # noqa: E402

MODEL_NAME = "thinker"  # inferlab serve --served-model-name
FORCED = "<think>\nThe user asks 2 + 2.\nThat is 4.\n</think>\n\nIt is 4.<|im_end|>"
THOUGHTS = "The user asks 2 + 2.\nThat is 4."
USER = [{"role": "user", "content": "What is 2 + 2?"}]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                   "required": ["city"], "additionalProperties": False}}}


# ---- the chat template against transformers -----------------------------------------------------
def template_cases():
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    earlier = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "reasoning_content": "I should call the tool.", "tool_calls": [call]},
        {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"},
    ]
    multi_turn = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nGreet back.\n</think>\n\nHello!"},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
    ]
    cases = []
    for thinking in (None, True, False):
        kwargs = {} if thinking is None else {"enable_thinking": thinking}
        cases += [
            {"messages": USER, "add_generation_prompt": True, "kwargs": kwargs},
            {"messages": multi_turn, "add_generation_prompt": True, "kwargs": kwargs},
            {"messages": earlier, "add_generation_prompt": True, "kwargs": dict(kwargs, tools=[WEATHER_TOOL])},
            {"messages": earlier + [{"role": "assistant", "content": "It is 21 degrees."}], "add_generation_prompt": False,
             "kwargs": dict(kwargs, tools=[WEATHER_TOOL])},
            {"messages": multi_turn[:-1], "add_generation_prompt": False, "kwargs": kwargs},
        ]
    return cases


def run_template(args):
    ours = compare_chat_template(args.cli, args.tokenizer, template_cases(), "Qwen3")
    # The cases do what they claim: thinking off writes an empty span, the earlier turn's thoughts go.
    check(ours[2 * 5].endswith("<think>\n\n</think>\n\n"), "enable_thinking false closes an empty span")
    check("Greet back" not in ours[1] and "Add them" not in ours[1], "reasoning before the last query is dropped")


# ---- the server through the openai SDK ----------------------------------------------------------
def run_sdk(args):
    import openai
    from openai import OpenAI

    with serve(args.cli, args.model, ["--test-hooks", "--served-model-name", MODEL_NAME]) as base:
        client = OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        chat = forced_chat(client, MODEL_NAME, USER, FORCED, max_tokens=64)

        # Whole answer: the thoughts apart, counted in usage.
        r = chat()
        m = r.choices[0].message
        check(m.reasoning_content == THOUGHTS, f"reasoning_content: {m.model_extra}")
        check(m.content == "It is 4.", f"content: {m.content!r}")
        check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
        thought_tokens = token_count(base, "<think>\nThe user asks 2 + 2.\nThat is 4.\n</think>")
        check(r.usage.completion_tokens_details.reasoning_tokens == thought_tokens,
              f"reasoning_tokens {r.usage.completion_tokens_details.reasoning_tokens}, the thoughts are {thought_tokens} tokens")
        print(f"whole: reasoning {m.reasoning_content!r}, content {m.content!r}, reasoning_tokens {thought_tokens}")

        # Streamed: reasoning deltas first, then content deltas; the same texts.
        reasoning, content, order = read_reasoning_stream(chat(stream=True, stream_options={"include_usage": True}),
                                                          thought_tokens)
        check(reasoning == THOUGHTS and content == "It is 4.", f"streamed: {reasoning!r} / {content!r}")
        check(order == sorted(order, key=lambda k: k != "r") and "r" in order and "c" in order, f"delta order {order}")
        print(f"streamed: {order.count('r')} reasoning deltas, then {order.count('c')} content deltas")

        # json_schema: free thoughts, then JSON by the schema (the forced answer after </think> is not JSON).
        schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 9}},
                  "required": ["answer"], "additionalProperties": False}
        r = chat(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}},
                 forced="<think>\nNot JSON {{ here.\n</think>\n\nIt is 4.", max_tokens=400)
        m = r.choices[0].message
        check(m.reasoning_content == "Not JSON {{ here.", f"thoughts under a schema: {m.model_extra}")
        answer = json.loads(m.content)
        check(set(answer) == {"answer"} and isinstance(answer["answer"], int) and 0 <= answer["answer"] <= 9, m.content)
        check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
        print(f"json_schema: thoughts {m.reasoning_content!r}, then {json.dumps(answer)}")

        # A tool call written while thinking is not a call; one after the thoughts is.
        inside = "<think>\nI could write <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n</think>\n\n"
        r = chat(tools=[WEATHER_TOOL], forced=inside + "No call needed.<|im_end|>")
        m = r.choices[0].message
        check(not m.tool_calls and m.content == "No call needed." and "<tool_call>" in m.reasoning_content,
              f"a call inside the thoughts: {m}")
        check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
        r = chat(tools=[WEATHER_TOOL], forced=inside + "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>")
        m = r.choices[0].message
        check(len(m.tool_calls) == 1 and json.loads(m.tool_calls[0].function.arguments) == {"city": "Rome"}, f"{m}")
        check(r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason)
        # tool_choice required with a strict tool: the forced call grammar starts after </think>.
        r = chat(tools=[dict(WEATHER_TOOL, function=dict(WEATHER_TOOL["function"], strict=True))], tool_choice="required",
                 parallel_tool_calls=False, forced=inside + "I will not call.", max_tokens=400)
        m = r.choices[0].message
        check(len(m.tool_calls) == 1 and json.loads(m.tool_calls[0].function.arguments)["city"] in ("Paris", "Rome"), f"{m}")
        check("<tool_call>" in m.reasoning_content, m.reasoning_content)
        print("tools: a call inside the thoughts is not a call; after them it is; required forces one after </think>")

        # enable_thinking false: the template closes an empty span; nothing is reasoning.
        r = chat(extra_body={"chat_template_kwargs": {"enable_thinking": False}}, forced="It is 4.<|im_end|>")
        m = r.choices[0].message
        check(m.content == "It is 4." and m.reasoning_content is None, f"{m}")
        check(r.usage.completion_tokens_details.reasoning_tokens == 0, "no reasoning tokens")

        # max_tokens inside the thoughts: length, no half answer.
        r = chat(max_tokens=5)
        m = r.choices[0].message
        check(r.choices[0].finish_reason == "length" and not m.content and m.reasoning_content, f"cut short: {m}")
        check(r.usage.completion_tokens_details.reasoning_tokens == 5, f"{r.usage}")

        # Raw text on request; thoughts not returned on request.
        r = chat(extra_body={"reasoning_format": "none"})
        check(r.choices[0].message.content == FORCED.removesuffix("<|im_end|>"), f"raw: {r.choices[0].message.content!r}")
        r = chat(extra_body={"include_reasoning": False})
        check(r.choices[0].message.content == "It is 4." and "reasoning_content" not in (r.choices[0].message.model_extra or {}),
              f"include_reasoning false: {r.choices[0].message}")

        # Earlier thoughts given back (reasoning_content, or vLLM's newer `reasoning`) are accepted.
        back = USER + [{"role": "assistant", "content": "It is 4.", "reasoning": "Add."}, {"role": "user", "content": "Sure?"}]
        r = chat(messages=back)
        check(r.choices[0].message.content == "It is 4.", "a multi-turn chat with earlier reasoning")

        for body, field in [({"reasoning_format": "loud"}, "reasoning_format"),
                            ({"messages": USER + [{"role": "assistant", "content": "x", "reasoning_content": 3}]}, "messages")]:
            try:
                client.chat.completions.create(model=MODEL_NAME, messages=body.pop("messages", USER), max_tokens=4, extra_body=body)
                raise AssertionError(f"{body} was accepted")
            except openai.BadRequestError as e:
                check(e.body.get("param") == field, f"{body}: {e.body}")

    with serve(args.cli, args.model, ["--reasoning-format", "none", "--served-model-name", MODEL_NAME]) as base:
        client = OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        try:
            client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=4, extra_body={"test_forced_output": "x"})
            raise AssertionError("test_forced_output was accepted without --test-hooks")
        except openai.BadRequestError as e:
            check("--test-hooks" in e.message, e.message)
        r = client.chat.completions.create(model=MODEL_NAME, messages=USER, max_tokens=4)
        check("reasoning_content" not in (r.choices[0].message.model_extra or {}), "--reasoning-format none: no field")
    print("reasoning through the openai Python SDK: every check passed")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["template", "sdk"])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model")
    parser.add_argument("--tokenizer")
    args = parser.parse_args()
    run_template(args) if args.what == "template" else run_sdk(args)


if __name__ == "__main__":
    main()
