"""POST /v1/responses through the official Python clients, unmodified, against `inferlab serve` on
the trained SmolLM2-135M-Instruct: the openai SDK's client.responses.create (plain and streamed),
client.responses.input_items.list (a previous_response_id chain's items, both orders, paged by the
SDK's own cursor, 404 for an unknown or deleted id) and the OpenAI Agents SDK (openai-agents) running
one tool-using agent turn with OpenAIResponsesModel.

usage: responses_sdk_test.py INFERLAB_CLI MODEL
"""
import asyncio
import re
import subprocess
import sys
import threading
import time
import urllib.request

from openai import AsyncOpenAI, NotFoundError, OpenAI
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled


def start_server(cli: str, model: str):
    proc = subprocess.Popen([cli, "serve", model, "--host", "127.0.0.1", "--port", "0", "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    port = None
    while time.time() < deadline and port is None:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise SystemExit(f"inferlab serve exited early ({proc.returncode})")
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
    if port is None:
        raise SystemExit("inferlab serve did not start")
    # Keep reading its log, or a full pipe would stall the server.
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
    base = f"http://127.0.0.1:{port}"
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(base + "/health").status == 200:
                return proc, base
        except Exception:
            time.sleep(0.1)
    raise SystemExit("inferlab serve did not become ready")


def check_openai_sdk(base: str, model: str) -> None:
    client = OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    r = client.responses.create(model=model, input="What is the capital of France?", max_output_tokens=30, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_"), r
    assert r.output_text.strip(), r
    assert r.usage.input_tokens > 0 and r.usage.output_tokens > 0, r.usage

    types, sequence, deltas, final = [], [], [], None
    with client.responses.stream(model=model, input="Name three colors.", max_output_tokens=30, temperature=0) as stream:
        for event in stream:
            types.append(event.type)
            sequence.append(event.sequence_number)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert types[:2] == ["response.created", "response.in_progress"], types
    assert types[-1] in ("response.completed", "response.incomplete"), types
    assert sequence == list(range(len(sequence))), sequence
    assert deltas and final.output_text == "".join(deltas), (final.output_text, deltas)

    # The plain stream=True iterator too (the SDK types each event).
    events = list(client.responses.create(model=model, input="Hi", max_output_tokens=10, stream=True))
    assert events[0].type == "response.created" and events[-1].type in ("response.completed", "response.incomplete")
    print("openai SDK: plain and streamed responses ok")


def check_input_items(base: str, model: str) -> None:
    client = OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    first = client.responses.create(model=model, input=[{"role": "user", "content": "My name is Ada."}],
                                    instructions="Answer briefly.", max_output_tokens=10, temperature=0)
    second = client.responses.create(model=model, input="What is my name?", previous_response_id=first.id,
                                     max_output_tokens=10, temperature=0)
    # The second's prompt: the first's input and output, then its own input (instructions are no item).
    page = client.responses.input_items.list(second.id)
    newest_first = page.data
    assert len(newest_first) == 2 + len(first.output), [item.type for item in newest_first]
    assert newest_first[0].type == "message" and newest_first[0].role == "user"
    assert newest_first[0].content[0].type == "input_text" and newest_first[0].content[0].text == "What is my name?"
    assert [item.id for item in newest_first[1:-1]] == [item.id for item in reversed(first.output)]
    assert newest_first[-1].content[0].text == "My name is Ada." and newest_first[-1].status == "completed"
    ids = [item.id for item in newest_first]
    assert len(set(ids)) == len(ids) and all(ids), ids
    assert (page.first_id, page.last_id, page.has_more) == (ids[0], ids[-1], False), page
    # The first response's own list: its input alone, with the same id it has in the chain.
    assert [item.id for item in client.responses.input_items.list(first.id).data] == ids[-1:]

    assert [item.id for item in client.responses.input_items.list(second.id, order="asc").data] == ids[::-1]
    one = client.responses.input_items.list(second.id, limit=1)
    assert [item.id for item in one.data] == ids[:1] and one.has_more
    # The SDK's auto-pagination follows `after` = the page's last id, one item a page.
    assert [item.id for item in client.responses.input_items.list(second.id, limit=1)] == ids
    assert [item.id for item in client.responses.input_items.list(second.id, after=ids[0], order="desc").data] == ids[1:]

    for gone in ("resp_unknown", first.id):
        if gone == first.id:
            client.responses.delete(first.id)
        try:
            client.responses.input_items.list(gone)
            raise AssertionError(f"input_items of {gone} answered")
        except NotFoundError as e:
            assert e.status_code == 404 and gone in e.message and e.code == "response_not_found", (e.status_code, e.body)
    print(f"openai SDK: input_items.list of a {len(ids)}-item chain ok, paged and in both orders")


async def check_agent(base: str, model: str) -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    cities = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        cities.append(city)
        return f"It is sunny and 21 degrees in {city}."

    # The first turn must call the tool (tool_choice required); the SDK resets the choice after a
    # tool use (reset_tool_choice), so the next turn answers with the tool's output in its prompt.
    agent = Agent(name="weather", instructions="You answer questions about the weather using the get_weather tool.",
                  tools=[get_weather], model=OpenAIResponsesModel(model=model, openai_client=client),
                  model_settings=ModelSettings(tool_choice="required", max_tokens=80, temperature=0,
                                               parallel_tool_calls=False))
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=4)
    assert cities, "the agent did not call get_weather"
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.final_output
    print(f"agents SDK: the tool ran for {cities!r}; final output {result.final_output!r}")


def main() -> None:
    cli, model_path = sys.argv[1], sys.argv[2]
    proc, base = start_server(cli, model_path)
    try:
        model = OpenAI(base_url=base + "/v1", api_key="unused").models.list().data[0].id
        check_openai_sdk(base, model)
        check_input_items(base, model)
        asyncio.run(check_agent(base, model))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
