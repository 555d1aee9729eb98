#!/usr/bin/python3
"""Hostile requests end to end (issue 20): each used to crash the server, burn a core or keep
generating for nobody; each now gets a bounded answer and the server keeps serving.

  hostile_test.py CLI MODEL

- a chat message whose content is 100,000 nested arrays: 400 naming --max-json-depth (it was a
  stack overflow, SIGSEGV); nesting inside the bound is still served;
- a 20 MB prompt: 400 naming --max-prompt-bytes before any tokenizing; the byte bound's boundary
  (one byte more is refused by bytes, exactly the bound goes on to the token check);
- a non-streaming request whose client hangs up: its sequence is cancelled, not run to max_tokens;
- with every worker busy /health and /metrics are answered; a malformed HTTP request gets 400 and
  the connection closed; the Bearer scheme in any case;
- the transport (issue 20 items 2, 5, 6, 7): 300 slowloris connections neither lock out a chat nor
  /metrics and are closed after --header-timeout; impossible Content-Lengths answered 400/413 at
  once; half-sent headers and short bodies 408 after their deadlines; pipelined requests answered
  in order; too many headers 431; Transfer-Encoding with Content-Length 400; each error closes.
"""
import json
import threading
import re
import socket
import sys
import time

from auth_test import request
from connections_test import read_until_closed, send_raw, split_response
from serve_helper import Server
from checks import check, failures


def error_of(body):
    try:
        return json.loads(body)["error"]
    except Exception:
        return {}


def metrics(base):
    _, body, _ = request(base, "GET", "/metrics")
    return {name: float(value) for name, _, value in
            (line.rpartition(" ") for line in body.splitlines() if line and not line.startswith("#"))}


def nested(levels):
    return "[" * levels + "]" * levels


def raw_post(base_port, path, raw_body):
    """POSTs bytes as they are (json.dumps would recurse on a deep value) and returns (status, body)."""
    sock = socket.create_connection(("127.0.0.1", base_port), timeout=60)
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(raw_body)}\r\nConnection: close\r\n\r\n")
    try:
        sock.sendall(head.encode() + raw_body.encode())
        status, _, body = split_response(read_until_closed(sock))
    except ConnectionError:  # the server died under the request
        status, body = 0, ""
    sock.close()
    return status, body


def alive(server):
    try:
        return request(server.base, "GET", "/health")[0] == 200
    except OSError:
        return False


def deep_json(server):
    p = server.port
    body = '{"max_tokens":2,"messages":[{"role":"user","content":' + nested(100_000) + '}]}'
    status, text = raw_post(p, "/v1/chat/completions", body)
    check(status == 400 and "--max-json-depth" in error_of(text).get("message", ""),
          f"100,000 nested arrays in messages[0].content: 400 naming --max-json-depth (got {status} {text[:160]})")
    if not alive(server):
        check(False, "the server still answers after the deep body")
        return
    for path in ("/tokenize", "/v1/completions"):
        status, text = raw_post(p, path, '{"prompt":"Hi","x":' + nested(100_000) + '}')
        check(status == 400 and "--max-json-depth" in error_of(text).get("message", ""),
              f"deep nesting in {path}: 400 (got {status} {text[:120]})")
    # The body's object, chat_template_kwargs and the arrays in it (default bound 64 levels).
    for arrays, expected in ((62, 200), (63, 400)):
        body = ('{"max_tokens":2,"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"deep":'
                + nested(arrays) + '}}')
        status, text = raw_post(p, "/v1/chat/completions", body)
        check(status == expected, f"{arrays + 2} levels of nesting: {expected} (got {status} {text[:120]})")
    check(alive(server), "/health after the deep bodies: 200")


def deep_grammars(server):
    """Constrained decoding input that made the parsers recurse or the automaton explode (found by
    fuzz_openai_request and by hand): each is a quick error, and the server goes on."""
    user = [{"role": "user", "content": "Hi"}]
    deep = "(" * 30_000 + '"a"' + ")" * 30_000  # 60 KB: under --max-grammar-bytes
    status, text, _ = request(server.base, "POST", "/v1/chat/completions", {"messages": user, "max_tokens": 2, "grammar": "root ::= " + deep})
    check(status == 400 and "nested deeper than" in error_of(text).get("message", ""),
          f"30,000 nested parentheses in a grammar: 400 (got {status} {text[:160]})")
    check(alive(server), "/health after the deep grammar: 200")
    for field, value in (("regex", "(" * 2000 + "a" + ")" * 2000),
                         ("response_format", {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "string", "pattern": "(" * 2000 + "a" + ")" * 2000}}})):
        status, text, _ = request(server.base, "POST", "/v1/chat/completions", {"messages": user, "max_tokens": 2, field: value})
        check(status == 400 and "nested deeper than" in error_of(text).get("message", ""),
              f"2,000 nested groups in {field}: 400 (got {status} {text[:160]})")
    started = time.monotonic()
    status, text, _ = request(server.base, "POST", "/v1/chat/completions",
                              {"messages": user, "max_tokens": 50, "grammar": 'root ::= ((("a"{0,40}){0,40}){0,40})'})
    seconds = time.monotonic() - started
    e = error_of(text)
    check(status == 400 and e.get("code") == "invalid_grammar" and "too ambiguous" in e.get("message", "") and seconds < 30,
          f"nested optional repetitions: an error naming the ambiguity, not gigabytes and minutes (got {status} after {seconds:.1f} s {text[:160]})")
    status, text, _ = request(server.base, "POST", "/v1/chat/completions", {"messages": user, "max_tokens": 2})
    check(status == 200, f"a plain chat after them: 200 (got {status} {text[:120]})")


def prompt_bytes(server):
    b = server.base
    status, text, _ = request(b, "POST", "/v1/completions", {"prompt": "word " * 4_000_000, "max_tokens": 2})
    e = error_of(text)
    check(status == 400 and e.get("code") == "context_length_exceeded" and "--max-prompt-bytes" in e.get("message", ""),
          f"a 20 MB prompt: 400 naming --max-prompt-bytes, before tokenizing (got {status} {text[:200]})")
    status, text, _ = request(b, "POST", "/tokenize", {"prompt": "word " * 4_000_000})
    check(status == 400 and "--max-prompt-bytes" in error_of(text).get("message", ""),
          f"a 20 MB prompt to /tokenize: 400 (got {status} {text[:160]})")
    status, text, _ = request(b, "POST", "/v1/chat/completions",
                              {"messages": [{"role": "user", "content": "word " * 4_000_000}], "max_tokens": 2})
    check(status == 400 and "--max-prompt-bytes" in error_of(text).get("message", ""),
          f"a 20 MB chat message: 400 (got {status} {text[:160]})")


def prompt_byte_boundary(cli, model):
    with Server(cli, model, ["--max-prompt-tokens", "64"]) as server:
        status, text, _ = request(server.base, "POST", "/v1/completions", {"prompt": "x" * 100_000, "max_tokens": 2})
        m = re.search(r"accepts at most (\d+) \(--max-prompt-bytes", error_of(text).get("message", ""))
        check(status == 400 and m is not None, f"the byte bound follows --max-prompt-tokens 64 (got {status} {text[:200]})")
        if not m:
            return
        limit = int(m.group(1))
        status, text, _ = request(server.base, "POST", "/v1/completions", {"prompt": "x" * (limit + 1), "max_tokens": 2})
        check(status == 400 and "--max-prompt-bytes" in error_of(text).get("message", ""),
              f"{limit + 1} bytes: refused by bytes (got {status} {text[:120]})")
        status, text, _ = request(server.base, "POST", "/v1/completions", {"prompt": "x" * limit, "max_tokens": 2})
        check(status == 400 and "--max-prompt-tokens" in error_of(text).get("message", ""),
              f"exactly {limit} bytes: tokenized, then refused by tokens (got {status} {text[:120]})")


def abandoned_non_stream(server):
    before = metrics(server.base)
    sock = send_raw(server.port, "POST", "/v1/completions",
                    {"prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": True, "temperature": 0})
    time.sleep(0.3)
    sock.close()  # the client gives up without reading anything
    deadline = time.time() + 60
    while time.time() < deadline and metrics(server.base).get("inferlab_running_requests", 1) > 0:
        time.sleep(0.05)
    after = metrics(server.base)
    key = 'inferlab_requests_finished_total{reason="%s"}'
    cancelled = after.get(key % "cancelled", 0) - before.get(key % "cancelled", 0)
    length = after.get(key % "length", 0) - before.get(key % "length", 0)
    generated = after.get("inferlab_generation_tokens_total", 0) - before.get("inferlab_generation_tokens_total", 0)
    check(cancelled == 1 and length == 0 and generated < 2000,
          f"a non-streaming client that hangs up: its sequence cancelled (cancelled +{cancelled:g}, "
          f"length +{length:g}, {generated:g} of 2000 tokens generated)")


def bearer_scheme(cli, model):
    # Its own server: on the one-connection server below, a request right after another can meet
    # the previous connection not yet released by the worker (503), which is not what this checks.
    with Server(cli, model, ["--api-key", "sk-hostile"]) as server:
        for scheme in ("bearer", "BEARER", "bEaReR"):
            status, _, _ = request(server.base, "GET", "/v1/models", raw_auth=f"{scheme} sk-hostile")
            check(status == 200, f"'{scheme} KEY': 200 (got {status})")
        for auth in ("Basic sk-hostile", "Token sk-hostile", "Bearersk-hostile", "sk-hostile"):
            status, _, _ = request(server.base, "GET", "/v1/models", raw_auth=auth)
            check(status == 401, f"'{auth}': 401 (got {status})")


def busy_server(cli, model):
    with Server(cli, model, ["--http-threads", "1", "--max-connections", "1", "--api-key", "sk-hostile"]) as server:
        # A long stream on the only worker (the kernel buffers what it writes; nothing is read).
        # The fixture's own /health connection may not have left the one admitted slot yet (the
        # loop releases a closed connection asynchronously): a 503 then is right, so try again.
        data = json.dumps({"prompt": "Once", "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
        deadline = time.time() + 10
        while True:
            holder = socket.create_connection(("127.0.0.1", server.port), timeout=60)
            holder.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-hostile\r\n"
                            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data)
            head = holder.recv(12)
            if head.startswith(b"HTTP/1.1 200") or time.time() > deadline:
                break
            holder.close()
            time.sleep(0.2)
        check(head.startswith(b"HTTP/1.1 200"), f"the holder's stream started (got {head!r})")
        try:
            for path in ("/health", "/metrics"):
                status, body, headers = request(server.base, "GET", path, key="sk-hostile")
                check(status == 200 and headers.get("Connection") == "close",
                      f"{path} while the only worker streams: 200, connection closed (got {status} {body[:80]})")
            status, _, headers = request(server.base, "GET", "/metrics")
            check(status == 401 and headers.get("Connection") == "close",
                  f"/metrics on the overflow pool still needs the key: 401, connection closed (got {status})")
            status, body, _ = request(server.base, "GET", "/v1/models", key="sk-hostile")
            check(status == 503, f"/v1/models while full: 503 (got {status})")
        finally:
            holder.close()


def malformed_request(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=3)  # keep-alive waits 5 s
    sock.sendall(b"NOT A REQUEST LINE\r\nbroken header\r\n\r\n")
    try:
        raw = read_until_closed(sock)
        closed = True
    except socket.timeout:
        raw, closed = b"", False
    sock.close()
    status, headers, body = split_response(raw)
    check(status == 400 and closed and headers.get("connection") == "close" and "message" in error_of(body),
          f"a malformed HTTP request: 400 in OpenAI's shape and the connection closed (got {status}, closed {closed})")


def raw_exchange(port, data, timeout=10):
    """Sends bytes as they are; returns (everything read until the server closed, closed?)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(data)
    raw, closed = b"", False
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                closed = True
                break
            raw += chunk
    except socket.timeout:
        pass
    sock.close()
    return raw, closed


def parse_responses(raw):
    """Consecutive HTTP/1.1 responses with Content-Length bodies: [(status, headers, body)]."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        if not sep:
            break
        status, headers, _ = split_response(head + b"\r\n\r\n")
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n].decode("utf-8", "replace")))
        raw = rest[n:]
    return out


def slowloris(cli, model):
    """Item 2: 300 connections that send one header line a second hold nothing: a chat and /metrics
    are answered while they trickle, and the server closes each after --header-timeout."""
    with Server(cli, model, ["--header-timeout", "3"]) as server:
        slow = []
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(sock)
        stop = threading.Event()
        closed = set()

        def trickle():
            line = 0
            while not stop.is_set():
                for i, sock in enumerate(slow):
                    if i in closed:
                        continue
                    try:
                        sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
                    except OSError:
                        closed.add(i)
                line += 1
                stop.wait(1.0)

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            time.sleep(1.0)
            status, text, _ = request(server.base, "POST", "/v1/chat/completions",
                                      {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4})
            check(status == 200, f"a chat while 300 slowloris connections trickle headers: 200 (got {status} {text[:120]})")
            status, _, _ = request(server.base, "GET", "/metrics")
            check(status == 200, f"/metrics while they trickle: 200 (got {status})")
            # Each is answered 408 and closed once --header-timeout (3 s) has passed; bounded wait.
            answered_408 = 0
            deadline = time.time() + 30
            for i, sock in enumerate(slow):
                sock.settimeout(max(0.1, deadline - time.time()))
                data = b""
                try:
                    while True:
                        chunk = sock.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except (socket.timeout, ConnectionResetError):
                    continue
                if data.startswith(b"HTTP/1.1 408"):
                    answered_408 += 1
            check(answered_408 == 300, f"all 300 slow connections answered 408 and closed by the server ({answered_408})")
        finally:
            stop.set()
            t.join(timeout=5)
            for sock in slow:
                sock.close()
        check(alive(server), "/health after the slowloris connections")


def transport_limits(cli, model):
    """Items 5, 6, 7: impossible lengths, deadlines, pipelining, header count, both framings."""
    with Server(cli, model, ["--header-timeout", "2", "--body-timeout", "2"]) as server:
        p = server.port
        head = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        for length, expected in (("-5", 400), ("1e20", 400), (str(2**63 - 1), 413), (str(40 << 20), 413)):
            raw, closed = raw_exchange(p, (head + f"Content-Length: {length}\r\n\r\n").encode(), timeout=5)
            status, headers, body = split_response(raw)
            check(status == expected and closed and "message" in error_of(body),
                  f"Content-Length: {length} with no body sent: {expected} at once and closed (got {status}, closed {closed})")

        raw, closed = raw_exchange(p, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ", timeout=10)
        status, _, body = split_response(raw)
        check(status == 408 and closed and "--header-timeout" in error_of(body).get("message", ""),
              f"half-sent headers: 408 naming --header-timeout and closed (got {status}, closed {closed})")
        raw, closed = raw_exchange(p, (head + "Content-Length: 100\r\n\r\n{\"prompt\"").encode(), timeout=10)
        status, _, body = split_response(raw)
        check(status == 408 and closed and "--body-timeout" in error_of(body).get("message", ""),
              f"a short body: 408 naming --body-timeout and closed (got {status}, closed {closed})")

        for count in (3, 6):
            reqs = b""
            for i in range(count):
                data = json.dumps({"prompt": " ".join(["word"] * (i + 1))}).encode()
                last = "Connection: close\r\n" if i == count - 1 else ""
                reqs += (head + f"Content-Length: {len(data)}\r\n{last}\r\n").encode() + data
            raw, closed = raw_exchange(p, reqs)
            answers = parse_responses(raw)
            counts = [json.loads(b).get("count") if st == 200 else st for st, _, b in answers]
            check(len(answers) == count and counts == sorted(counts) and len(set(counts)) == count,
                  f"{count} pipelined requests: {count} answers in order (got token counts {counts})")

        many = "".join(f"X-H{i}: 1\r\n" for i in range(10_000))
        raw, closed = raw_exchange(p, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n{many}\r\n".encode())
        status, _, _ = split_response(raw)
        check(status == 431 and closed, f"10,000 headers: 431 and closed (got {status}, closed {closed})")
        some = "".join(f"X{i}: 1\r\n" for i in range(150))
        raw, closed = raw_exchange(p, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n{some}\r\n".encode())
        status, _, body = split_response(raw)
        check(status == 431 and closed and "--max-header-count" in error_of(body).get("message", ""),
              f"150 short headers: 431 naming --max-header-count (got {status}, closed {closed})")
        few = "".join(f"X{i}: 1\r\n" for i in range(50))
        raw, _ = raw_exchange(p, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{few}\r\n".encode())
        check(split_response(raw)[0] == 200, "50 headers: served")

        for order in ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"):
            raw, closed = raw_exchange(p, (head + order + "\r\n0\r\n\r\n").encode())
            status, _, body = split_response(raw)
            check(status == 400 and closed and "RFC 9112" in error_of(body).get("message", ""),
                  f"Transfer-Encoding with Content-Length ({order.split(':')[0]} first): 400 and closed (got {status}, closed {closed})")
        check(alive(server), "/health after the transport checks")


def main():
    cli, model = sys.argv[1], sys.argv[2]
    with Server(cli, model) as server:
        deep_json(server)
        deep_grammars(server)
    with Server(cli, model) as server:
        prompt_bytes(server)
        abandoned_non_stream(server)
        malformed_request(server)
        check(alive(server), "the server survived every hostile request")
    prompt_byte_boundary(cli, model)
    bearer_scheme(cli, model)
    busy_server(cli, model)
    transport_limits(cli, model)
    slowloris(cli, model)
    if failures:
        sys.exit(f"{len(failures)} hostile-request checks failed")
    print("hostile: all checks passed")


if __name__ == "__main__":
    main()
