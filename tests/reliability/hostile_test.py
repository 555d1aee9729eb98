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
  the connection closed; the Bearer scheme in any case.
"""
import json
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
        holder = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        data = json.dumps({"prompt": "Once", "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
        holder.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sk-hostile\r\n"
                        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data)
        check(holder.recv(12).startswith(b"HTTP/1.1 200"), "the holder's stream started")
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


def main():
    cli, model = sys.argv[1], sys.argv[2]
    with Server(cli, model) as server:
        deep_json(server)
    with Server(cli, model) as server:
        prompt_bytes(server)
        abandoned_non_stream(server)
        malformed_request(server)
        check(alive(server), "the server survived every hostile request")
    prompt_byte_boundary(cli, model)
    bearer_scheme(cli, model)
    busy_server(cli, model)
    if failures:
        sys.exit(f"{len(failures)} hostile-request checks failed")
    print("hostile: all checks passed")


if __name__ == "__main__":
    main()
