"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) through Anthropic's own
Python client (PyPI `anthropic`, unmodified, from the project's .venv) against `inferlab serve`
with the default model: messages.create, messages.stream, a tool round trip, count_tokens, and a
refused request in Anthropic's error shape.

usage: anthropic_sdk_test.py CLI MODEL"""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reliability"))

import anthropic  # noqa: E402
from serve_helper import Server  # noqa: E402

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOL = {"name": "get_weather", "description": "The current weather in a city", "input_schema": WEATHER}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        failures.append(what)


def check_weather_input(value, what):
    check(isinstance(value, dict) and sorted(value) == ["city", "unit"] and isinstance(value["city"], str)
          and len(value["city"]) <= 20 and value["unit"] in ("celsius", "fahrenheit"), f"{what}: input fits the schema ({value})")


def main():
    cli, model_path = sys.argv[1], sys.argv[2]
    server = Server(cli, model_path)
    try:
        client = anthropic.Anthropic(base_url=server.base, api_key="unused", max_retries=0)
        # The served name from /v1/models (OpenAI's shape: Anthropic's models.list reads another).
        with urllib.request.urlopen(server.base + "/v1/models") as r:
            model = json.load(r)["data"][0]["id"]

        # This SDK's create() has no temperature parameter (the API still takes it): sent as extra_body.
        greedy = {"temperature": 0}
        message = client.messages.create(model=model, max_tokens=40, extra_body=greedy, messages=QUESTION)
        check(message.type == "message" and message.role == "assistant" and message.id.startswith("msg_"), "create: a message")
        check(len(message.content) == 1 and message.content[0].type == "text" and message.content[0].text, "create: one text block")
        check(message.stop_reason in ("end_turn", "max_tokens") and 0 < message.usage.output_tokens <= 40, "create: stop_reason, usage")

        with client.messages.stream(model=model, max_tokens=40, extra_body=greedy, messages=QUESTION) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        check(text == final.content[0].text == message.content[0].text, "stream: text_stream == final message == create's text")
        check(final.usage.output_tokens == message.usage.output_tokens, "stream: the same output_tokens")

        forced = client.messages.create(model=model, max_tokens=100, tools=[TOOL], tool_choice={"type": "any", "disable_parallel_tool_use": True},
                                        messages=[{"role": "user", "content": "What is the weather in Paris?"}])
        calls = [b for b in forced.content if b.type == "tool_use"]
        check(forced.stop_reason == "tool_use" and len(calls) == 1, "tool_choice any: a tool_use block, stop_reason tool_use")
        for call in calls:
            check(call.name == "get_weather" and call.id.startswith("toolu_"), "tool_use: name and id")
            check_weather_input(call.input, "tool_use")
        history = [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [c.model_dump(exclude_none=True) for c in forced.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": c.id, "content": "Sunny, 24 degrees"} for c in calls]},
        ]
        answer = client.messages.create(model=model, max_tokens=40, tools=[TOOL], tool_choice={"type": "none"}, messages=history)
        check(answer.content and answer.content[0].type == "text" and answer.content[0].text, "tool_result: a text answer")

        counted = client.messages.count_tokens(model=model, messages=QUESTION, system="Be brief.")
        created = client.messages.create(model=model, max_tokens=1, messages=QUESTION, system="Be brief.")
        check(counted.input_tokens == created.usage.input_tokens > 0, "count_tokens: create's input_tokens")

        try:
            client.messages.create(model=model, max_tokens=10, messages=[
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_missing", "content": "x"}]}])
            check(False, "an unmatched tool_result is refused")
        except anthropic.BadRequestError as e:
            check(e.status_code == 400 and e.body["error"]["type"] == "invalid_request_error" and "toolu_missing" in e.message,
                  "an unmatched tool_result: BadRequestError in Anthropic's shape")
        try:
            client.messages.create(model="no-such-model", max_tokens=10, messages=QUESTION)
            check(False, "an unknown model is refused")
        except anthropic.NotFoundError as e:
            check(e.body["error"]["type"] == "not_found_error", "an unknown model: NotFoundError, not_found_error")
        again = client.messages.create(model=model, max_tokens=2, messages=QUESTION)
        check(again.usage.output_tokens > 0, "the server keeps serving")
    finally:
        server.stop()
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
