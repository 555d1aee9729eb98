#!/usr/bin/env python3
"""A scripted OpenAI-compatible SSE server for the load generator's tests.

Every stream follows a fixed timetable (milliseconds after the request body was read), so the
client's TTFT, ITL and E2E can be checked against known times. The path prefix picks the
behaviour: /ok/v1/..., /nousage/v1/..., /timings/v1/... (inferlab's `timings` in the finish and
usage chunks, usage.prompt_tokens_details.cached_tokens), /llamacpp/v1/... (llama.cpp's `timings`
in the finish chunk), /hang, /close, /drop, /http500, /http400, /errorevent,
/slow, /grow (each stream's timetable stretched by 1 + 0.5 x the /grow streams before it, so
repeated runs differ), /mix (cycles through ok, hang, close, drop, http500, http400, errorevent per request), and
/queue-S (a single-server FIFO queue with a fixed service time of S ms, for `bench capacity`:
each request waits for those before it, is served for S ms, and its whole answer is written when
its service ends; the queue runs on the loop clock, so a late wake-up does not slow the queue),
/prefixcache (a server with a prefix cache, for multi-turn runs: a prompt's tokens are the
whitespace-separated words of all its messages, and usage.prompt_tokens_details.cached_tokens is the
words of the longest run of leading messages that equals the start of an earlier request's messages
followed by the answer this server gave it, so a history that carries the real answers is cached
up to its last answer, and one that does not is cached only up to the answer it changed),
/sched (streams as /slow; GET /sched/metrics answers Prometheus text whose values follow a known
schedule from the first streamed request, see scripted_metrics; /metrics under any other prefix is 404).
GET .../props answers a small JSON (as llama.cpp's /props does), .../server_info 404.
GET /stats returns the request bodies received, the most streams open at once, and per timings
request the CSV cells its figures must become (server_csv).
Prints "PORT <n>" on stdout once listening on 127.0.0.1 (port 0 = any free port).
"""
import asyncio
import json
import sys
import time

ROLE_AT = 0.0
EMPTY_AT = 20.0  # a chunk with empty content: not the first token
CONTENT = [(40.0, "KV"), (55.0, " Cache"), (70.0, " 把"), (85.0, "注意力的键值"), (100.0, "存起来。")]
SPLIT_EARLY = 8.0  # the 70 ms chunk is written in two halves, the first this much earlier
USAGE_AT = 105.0
DONE_AT = 110.0
PROMPT_TOKENS = 7
MIX = ["ok", "hang", "close", "drop", "http500", "http400", "errorevent"]

# timelines: per streamed request (in arrival order), [before, after] the write of each content
# event and of [DONE] (ms after t0), so a test can tell server lateness from client error.
state = {"bodies": [], "timelines": [], "open_streams": 0, "max_open_streams": 0, "mix_counter": 0, "grow_counter": 0, "server_csv": [],
         "queue_free_at": 0.0, "queue_served": 0, "cached_sequences": [], "first_stream_at": None}


def words(text):
    return len(text.split())


def prefix_cache_usage(messages, answer):
    """/prefixcache: (prompt_tokens, cached_tokens) of this request's messages, counted in words, and
    remember them with the answer this server gives, for the requests after it."""
    def same(a, b):
        return a.get("role") == b.get("role") and a.get("content") == b.get("content")
    cached_messages = 0
    for seen in state["cached_sequences"]:
        n = 0
        while n < min(len(seen), len(messages)) and same(seen[n], messages[n]):
            n += 1
        cached_messages = max(cached_messages, n)
    state["cached_sequences"].append(list(messages) + [{"role": "assistant", "content": answer}])
    prompt = sum(words(m.get("content", "")) for m in messages)
    cached = sum(words(m.get("content", "")) for m in messages[:cached_messages])
    return prompt, min(cached, prompt)


def cell(value):
    """A number as requests.csv writes it (three decimals at most, trailing zeros dropped)."""
    return ("%.3f" % value).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def scripted_timings(mode):
    """The k-th timings request's figures (different per request, so each must land in its own row),
    the usage details to send, and the CSV cells they must become."""
    k = len(state["server_csv"])
    if mode == "timings":  # inferlab's object; usage's cached_tokens must win over cache_n
        queue, prefill, decode = 1.5 + k, 20.25 + k, 60.125
        timings = {"cache_n": 3, "prompt_n": PROMPT_TOKENS - 3, "prompt_ms": prefill, "prompt_per_second": 1.0,
                   "predicted_n": len(CONTENT), "predicted_ms": decode, "predicted_per_second": 1.0,
                   "queue_ms": queue, "prefill_ms": prefill, "decode_ms": decode, "ttft_ms": queue + prefill,
                   "e2e_ms": queue + prefill + decode, "preemptions": k % 2, "arrival_unix_ms": 1,
                   "token_ms": [queue + prefill + 10 * i for i in range(len(CONTENT))]}
        details = {"cached_tokens": 4 + k}
        csv_cells = {"server_queue_ms": cell(queue), "server_prefill_ms": cell(prefill), "server_decode_ms": cell(decode),
                     "server_ttft_ms": cell(queue + prefill), "cached_tokens": cell(4 + k), "preemptions": cell(k % 2)}
    else:  # llama.cpp's: no queue, so no server TTFT; prompt_ms is the prefill, predicted_ms the decode
        timings = {"cache_n": 2 + k, "prompt_n": PROMPT_TOKENS - 2 - k, "prompt_ms": 12.5 + k, "prompt_per_second": 400.0,
                   "predicted_n": len(CONTENT), "predicted_ms": 55.75, "predicted_per_second": 89.7}
        details = None
        csv_cells = {"server_queue_ms": "", "server_prefill_ms": cell(12.5 + k), "server_decode_ms": "55.75",
                     "server_ttft_ms": "", "cached_tokens": cell(2 + k), "preemptions": ""}
    state["server_csv"].append(csv_cells)
    return timings, details


def scripted_metrics():
    """/sched/metrics: every value a function of c, the seconds since the first streamed request
    (0 before it), which the text also carries (scripted_clock_seconds), so a test can check each
    scraped value exactly and the scrape's time against c: running 1, 2, 3, 1, ... and waiting 0, 1,
    0, ... each 0.4 s; KV use 0, 0.25, 0.5, 0.75, 0, ... each 0.4 s; 200 generated tokens a second;
    a TTFT histogram observing 0.05 s ten times a second; a NaN gauge whose label needs escapes."""
    first = state["first_stream_at"]
    c = 0.0 if first is None else asyncio.get_running_loop().time() - first
    step = int(c / 0.4)
    started = first is not None
    n = int(10 * c)
    lines = ["# HELP scripted_clock_seconds seconds since the first streamed request",
             "# TYPE scripted_clock_seconds gauge", f"scripted_clock_seconds {c!r}",
             "# TYPE inferlab_running_requests gauge", f"inferlab_running_requests {1 + step % 3 if started else 0}",
             "# TYPE inferlab_queue_length gauge", f"inferlab_queue_length {step % 2 if started else 0}",
             "# TYPE inferlab_kv_cache_usage_ratio gauge", f"inferlab_kv_cache_usage_ratio {0.25 * (step % 4)!r}",
             "# TYPE inferlab_generation_tokens_total counter", f"inferlab_generation_tokens_total {200 * c!r}",
             "# TYPE inferlab_time_to_first_token_seconds histogram",
             'inferlab_time_to_first_token_seconds_bucket{le="0.01"} 0',
             f'inferlab_time_to_first_token_seconds_bucket{{le="0.1"}} {n}',
             f'inferlab_time_to_first_token_seconds_bucket{{le="1"}} {n}',
             f'inferlab_time_to_first_token_seconds_bucket{{le="+Inf"}} {n}',
             f"inferlab_time_to_first_token_seconds_sum {0.05 * n!r}",
             f"inferlab_time_to_first_token_seconds_count {n}",
             "# TYPE scripted_note gauge", 'scripted_note{text="a \\"quoted\\", \\\\ value"} NaN', ""]
    return "\n".join(lines)


def chunk_json(content=None, role=None, finish=None, usage=None, completions=False):
    if usage is not None:
        return {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted-model",
                "choices": [], "usage": usage}
    if completions:
        choice = {"index": 0, "text": content or "", "finish_reason": finish}
    else:
        delta = {}
        if role:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "cmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "scripted-model",
            "choices": [choice]}


def sse(obj):
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return ("data: " + data + "\n\n").encode()


class Stream:
    def __init__(self, writer, t0):
        self.writer, self.t0 = writer, t0
        self.loop = asyncio.get_running_loop()
        self.timeline = {"content": [], "done": None}
        self.scale = 1.0  # /grow: the timetable stretched
        state["timelines"].append(self.timeline)

    def now_ms(self):
        return (self.loop.time() - self.t0) * 1000

    async def at(self, ms):
        target = self.t0 + ms * self.scale / 1000
        # The event loop wakes with millisecond granularity; with few streams, sleep the last
        # 2 ms in short blocking naps (not a spin: the client needs the CPU on a 2-core machine).
        if target - self.loop.time() > 0.002:
            await asyncio.sleep(target - self.loop.time() - 0.002)
        if state["open_streams"] <= 4:
            while (left := target - self.loop.time()) > 0:
                time.sleep(min(left, 0.0002))
        elif target > self.loop.time():
            await asyncio.sleep(target - self.loop.time())

    async def chunk(self, payload):  # one HTTP/1.1 chunk
        self.writer.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
        await self.writer.drain()


def head(status, reason, content_type, length=None):
    lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def send_json(writer, status, reason, obj):
    body = json.dumps(obj).encode()
    writer.write(head(status, reason, "application/json", len(body)) + body)
    await writer.drain()


async def scripted_stream(writer, t0, mode, request):
    completions = "prompt" in request
    include_usage = (request.get("stream_options") or {}).get("include_usage") and mode != "nousage"
    s = Stream(writer, t0)
    if mode == "grow":
        s.scale = 1 + 0.5 * state["grow_counter"]
        state["grow_counter"] += 1
    writer.write(head(200, "OK", "text/event-stream"))
    if not completions:
        await s.at(ROLE_AT)
        await s.chunk(sse(chunk_json(content="", role="assistant")))
        await s.at(EMPTY_AT)
        await s.chunk(sse(chunk_json(content="")))
    if mode.startswith("queue-"):  # the answer's four pieces at the end of its service
        service = float(mode[len("queue-"):]) / 1000
        departure = max(t0, state["queue_free_at"]) + service
        state["queue_free_at"] = departure
        state["queue_served"] += 1
        await s.at((departure - t0) * 1000)
        for i, (_, piece) in enumerate(CONTENT[:4]):
            await s.chunk(sse(chunk_json(content=piece, completions=completions, finish="length" if i == 3 else None)))
        if include_usage:
            await s.chunk(sse(chunk_json(usage={"prompt_tokens": PROMPT_TOKENS, "completion_tokens": 4,
                                                "total_tokens": PROMPT_TOKENS + 4})))
        await s.chunk(sse("[DONE]"))
        await s.chunk(b"")
        return
    if mode == "errorevent":
        await s.chunk(sse({"error": {"message": "scripted stream error", "type": "server_error"}}))
        await s.chunk(sse("[DONE]"))
        await s.chunk(b"")
        return
    timings, details = scripted_timings(mode) if mode in ("timings", "llamacpp") else (None, None)
    content = CONTENT
    prompt_tokens = PROMPT_TOKENS
    if mode == "prefixcache":
        prompt_tokens, cached = prefix_cache_usage(request.get("messages", []), "".join(p for _, p in CONTENT))
        details = {"cached_tokens": cached}
    if mode in ("slow", "sched"):  # ten pieces 100 ms apart: ~1 s per stream
        content = [(100.0 * (i + 1), f" p{i}") for i in range(10)]
    for i, (ms, piece) in enumerate(content):
        last = i == len(content) - 1
        payload = chunk_json(content=piece, completions=completions, finish="length" if last else None)
        if last and timings:
            payload["timings"] = timings
        event = sse(payload)
        if mode == "close" and i == 1:
            writer.transport.abort()  # reset mid-stream, the chunked body never terminated
            return
        if mode in ("ok", "nousage", "timings", "llamacpp") and ms == 70.0:
            await s.at(ms - SPLIT_EARLY)
            await s.chunk(event[:9])  # the event arrives in two pieces; it counts when whole
            await s.at(ms)
            before = s.now_ms()
            await s.chunk(event[9:])
            s.timeline["content"].append([before, s.now_ms()])
            continue
        await s.at(ms)
        before = s.now_ms()
        await s.chunk(event)
        s.timeline["content"].append([before, s.now_ms()])
    end = content[-1][0]
    if include_usage:
        await s.at(end + USAGE_AT - CONTENT[-1][0])
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(content), "total_tokens": prompt_tokens + len(content)}
        if details:
            usage["prompt_tokens_details"] = details
        payload = chunk_json(usage=usage)
        if mode == "timings":
            payload["timings"] = timings
        await s.chunk(sse(payload))
    await s.at(end + DONE_AT - CONTENT[-1][0])
    before = s.now_ms()
    await s.chunk(sse("[DONE]"))
    s.timeline["done"] = [before, s.now_ms()]
    await s.chunk(b"")  # the terminating zero-length chunk


async def handle(reader, writer):
    try:
        while True:
            header = await reader.readuntil(b"\r\n\r\n")
            lines = header.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            t0 = asyncio.get_running_loop().time()
            parts = path.strip("/").split("/")
            mode = parts[0] if parts and parts[0] != "v1" else "ok"
            if path.endswith("/models"):
                await send_json(writer, 200, "OK", {"object": "list", "data": [
                    {"id": "scripted-model", "object": "model", "owned_by": "test"}]})
                continue
            if path.endswith("/props"):
                await send_json(writer, 200, "OK", {"scripted": True, "total_slots": 4})
                continue
            if path.endswith("/server_info"):
                await send_json(writer, 404, "Not Found", {"error": {"message": "no such route"}})
                continue
            if path.endswith("/metrics"):
                if mode != "sched":
                    await send_json(writer, 404, "Not Found", {"error": {"message": "no /metrics here"}})
                    continue
                text = scripted_metrics().encode()
                writer.write(head(200, "OK", "text/plain; version=0.0.4", len(text)) + text)
                await writer.drain()
                continue
            if path == "/stats":
                await send_json(writer, 200, "OK", {k: state[k] for k in ("bodies", "timelines", "max_open_streams", "server_csv", "queue_served")})
                continue
            request = json.loads(body or b"{}")
            state["bodies"].append(request)
            one_shot = mode == "mix"
            if mode == "mix":
                mode = MIX[state["mix_counter"] % len(MIX)]
                state["mix_counter"] += 1
            if mode == "drop":
                writer.close()
                return
            if mode == "http500":
                await send_json(writer, 500, "Internal Server Error",
                                {"error": {"message": "scripted internal error", "type": "server_error",
                                           "param": None, "code": None}})
                if one_shot:
                    return
                continue
            if mode == "http400":
                await send_json(writer, 400, "Bad Request",
                                {"error": {"message": "max_tokens must be at least 1",
                                           "type": "invalid_request_error", "param": "max_tokens", "code": None}})
                if one_shot:
                    return
                continue
            if mode == "hang":
                writer.write(head(200, "OK", "text/event-stream"))
                writer.write(b"%x\r\n%s\r\n" % (len(sse(chunk_json(content="", role="assistant"))),
                                                sse(chunk_json(content="", role="assistant"))))
                await writer.drain()
                await reader.read()  # until the client gives up and closes
                return
            if not request.get("stream"):
                text = "".join(p for _, p in CONTENT)
                await asyncio.sleep(DONE_AT / 1000)
                await send_json(writer, 200, "OK", {
                    "id": "cmpl-1", "object": "chat.completion", "created": 1, "model": "scripted-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "length"}],
                    "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": len(CONTENT),
                              "total_tokens": PROMPT_TOKENS + len(CONTENT)}})
                continue
            if state["first_stream_at"] is None:
                state["first_stream_at"] = t0
            state["open_streams"] += 1
            state["max_open_streams"] = max(state["max_open_streams"], state["open_streams"])
            try:
                await scripted_stream(writer, t0, mode, request)
            finally:
                state["open_streams"] -= 1
            if mode == "close" or one_shot:
                return
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                                        backlog=4096)
    print("PORT", server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
