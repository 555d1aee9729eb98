"""A thinking model's thoughts through /v1/responses and Anthropic's /v1/messages, driven by the
official Python SDKs, unmodified: `openai` (a reasoning item before the message, streamed events
and the SDK's own accumulation, the output given back as input) and `anthropic` (thinking blocks
whole and streamed, thinking disabled, a budget Anthropic would refuse).

`inferlab serve --test-hooks` on a random-weight model with Qwen3's thinking template: each request
names the tokens to pick (`test_forced_output`, sent as extra_body), so what is under test is the
server's parsing, its writers and the streaming, not the model.

usage: reasoning_apis_test.py --cli INFERLAB_CLI --model MODEL_DIR
"""
import argparse
import os
import sys

from reasoning_helpers import check

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))
from serve_helper import serve  # noqa: E402

import anthropic  # noqa: E402
import openai  # noqa: E402

MODEL_NAME = "thinker"  # inferlab serve --served-model-name
THOUGHTS = "The user asks 2 + 2.\nThat is 4."
FORCED = f"<think>\n{THOUGHTS}\n</think>\n\nIt is 4.<|im_end|>"
QUESTION = "What is 2 + 2?"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL_THOUGHTS = "I should look it up."
FORCED_CALL = (f"<think>\n{TOOL_THOUGHTS}\n</think>\n\n"
               "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>")


def check_responses(base):
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)

    def create(**kw):
        forced = kw.pop("forced", FORCED)
        kw.setdefault("input", QUESTION)
        kw.setdefault("max_output_tokens", 64)
        return client.responses.create(model=MODEL_NAME, temperature=0, extra_body={"test_forced_output": forced}, **kw)

    r = create()
    check([item.type for item in r.output] == ["reasoning", "message"], f"output items: {r.output}")
    reasoning = r.output[0]
    check(reasoning.id.startswith("rs_") and reasoning.summary == [], f"reasoning item: {reasoning}")
    check(len(reasoning.content) == 1 and reasoning.content[0].type == "reasoning_text" and reasoning.content[0].text == THOUGHTS,
          f"reasoning content: {reasoning.content}")
    check(r.output_text == "It is 4.", f"output_text {r.output_text!r}")
    details = r.usage.output_tokens_details
    check(0 < details.reasoning_tokens < r.usage.output_tokens, f"usage {r.usage}")
    print(f"responses: reasoning item {reasoning.content[0].text!r}, then {r.output_text!r}; "
          f"{details.reasoning_tokens} of {r.usage.output_tokens} output tokens are reasoning")

    # Streamed through the SDK's helper: the raw events in order, and the response it accumulates.
    types, reasoning_text = [], ""
    with client.responses.stream(model=MODEL_NAME, input=QUESTION, max_output_tokens=64, temperature=0,
                                 extra_body={"test_forced_output": FORCED}) as stream:
        for i, event in enumerate(stream):
            check(event.sequence_number == i, f"sequence_number {event.sequence_number} at event {i}")
            if event.type == "response.reasoning_text.delta":
                check(event.output_index == 0 and event.content_index == 0, f"{event}")
                reasoning_text += event.delta
            if not types or types[-1] != event.type:
                types.append(event.type)
        final = stream.get_final_response()
    reasoning_events = [t for t in types if "reasoning_text" in t]
    check(reasoning_events == ["response.reasoning_text.delta", "response.reasoning_text.done"], f"events {types}")
    check(types.index("response.reasoning_text.done") < types.index("response.output_text.delta"), f"event order {types}")
    check(reasoning_text == THOUGHTS, f"streamed thoughts {reasoning_text!r}")
    check(final.output[0].type == "reasoning" and final.output[0].content[0].text == THOUGHTS and final.output_text == "It is 4.",
          f"final response {final.output}")
    print(f"responses streamed: {len(types)} event kinds in order, the SDK's final response has the reasoning item")

    # The output given back as input: the reasoning item reaches the template (Qwen3 renders the
    # thoughts of the turn after the last user query).
    tools = [{"type": "function", "name": "get_weather", "description": "Weather of a city", "parameters": WEATHER, "strict": False}]
    first = create(input="Weather in Paris?", tools=tools, forced=FORCED_CALL, max_output_tokens=200)
    check([item.type for item in first.output] == ["reasoning", "function_call"], f"{first.output}")
    result = {"type": "function_call_output", "call_id": first.output[1].call_id, "output": "{\"sky\": \"clear\"}"}
    user = {"role": "user", "content": "Weather in Paris?"}
    kept = create(input=[user, *first.output, result], tools=tools, forced="Clear.<|im_end|>", max_output_tokens=16)
    dropped = create(input=[user, first.output[1], result], tools=tools, forced="Clear.<|im_end|>", max_output_tokens=16)
    check(kept.usage.input_tokens > dropped.usage.input_tokens + 3, f"{kept.usage.input_tokens} vs {dropped.usage.input_tokens}")
    continued = create(previous_response_id=first.id, input=[result], tools=tools, forced="Clear.<|im_end|>", max_output_tokens=16)
    check(continued.usage.input_tokens == kept.usage.input_tokens and continued.output_text == "Clear.", f"{continued}")
    print(f"responses: reasoning given back: {kept.usage.input_tokens} input tokens, {dropped.usage.input_tokens} without it; "
          "previous_response_id keeps it")

    off = create(reasoning={"effort": "none"}, forced="It is 4.<|im_end|>")
    check([item.type for item in off.output] == ["message"] and off.reasoning.effort == "none", f"effort none: {off}")
    try:
        create(reasoning={"effort": "enormous"})
        raise AssertionError("reasoning.effort 'enormous' was accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "reasoning.effort", f"{e.body}")


def check_messages(base):
    client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0)
    on = {"type": "enabled", "budget_tokens": 1024}
    question = [{"role": "user", "content": QUESTION}]

    m = client.messages.create(model=MODEL_NAME, max_tokens=2048, thinking=on, messages=question,
                               extra_body={"temperature": 0, "test_forced_output": FORCED})
    check([block.type for block in m.content] == ["thinking", "text"], f"blocks {m.content}")
    check(m.content[0].thinking == THOUGHTS and m.content[0].signature == "" and m.content[1].text == "It is 4.", f"{m.content}")
    check(m.stop_reason == "end_turn", m.stop_reason)
    thinking_tokens = m.usage.output_tokens_details.thinking_tokens
    check(0 < thinking_tokens < m.usage.output_tokens, f"usage {m.usage}")
    print(f"messages: thinking block {m.content[0].thinking!r}, then text {m.content[1].text!r}; {thinking_tokens} thinking tokens")

    thinking, kinds = "", []
    with client.messages.stream(model=MODEL_NAME, max_tokens=2048, thinking=on, messages=question,
                                extra_body={"temperature": 0, "test_forced_output": FORCED}) as stream:
        for event in stream:
            if event.type == "thinking":  # the SDK's own event, with the snapshot so far
                thinking += event.thinking
            kinds.append(event.type)
        final = stream.get_final_message()
    check(thinking == THOUGHTS, f"streamed thinking {thinking!r}")
    check("signature" in kinds and kinds.index("signature") < kinds.index("text"), f"events {kinds}")
    check([block.type for block in final.content] == ["thinking", "text"] and final.content[0].thinking == THOUGHTS
          and final.content[1].text == "It is 4.", f"final {final.content}")
    print("messages streamed: thinking events, the signature, then text; the final message has both blocks")

    m = client.messages.create(model=MODEL_NAME, max_tokens=16, thinking={"type": "disabled"}, messages=question,
                               extra_body={"temperature": 0, "test_forced_output": "It is 4.<|im_end|>"})
    check([block.type for block in m.content] == ["text"] and m.content[0].text == "It is 4.", f"thinking disabled: {m.content}")
    try:
        client.messages.create(model=MODEL_NAME, max_tokens=1024, thinking=on, messages=question)
        raise AssertionError("budget_tokens equal to max_tokens was accepted")
    except anthropic.BadRequestError as e:
        check(e.body["error"]["type"] == "invalid_request_error" and "max_tokens" in e.body["error"]["message"], f"{e.body}")
    print("messages: thinking disabled gives no thinking block; a budget not under max_tokens is a 400")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cli", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    with serve(args.cli, args.model, ["--test-hooks", "--served-model-name", MODEL_NAME]) as base:
        check_responses(base)
        check_messages(base)
    print("reasoning through /v1/responses and /v1/messages with the openai and anthropic Python SDKs: every check passed")


if __name__ == "__main__":
    main()
