#!/usr/bin/python3
"""Connection limit end to end: with --max-connections N, N streaming clients hold the server;
one more connection (a chat POST, a GET) is answered 503 in OpenAI's error shape with Retry-After
and closed by the server while the N streams are still running (it does not wait for a worker);
once the holders hang up, new connections are served again and /metrics counts the refusals.

  connections_test.py CLI MODEL
"""
import json
import socket
import sys
import threading
import time

from auth_test import request
from serve_helper import Server
from checks import check, failures

LIMIT = 2


def send_raw(port, method, path, body=None):
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    data = json.dumps(body).encode() if body is not None else b""
    if body is not None:
        head += f"Content-Length: {len(data)}\r\n"
    sock.sendall(head.encode() + b"\r\n" + data)
    return sock


def read_until_closed(sock):
    """Everything the server sends until it closes the connection (socket timeout: 60 s)."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def split_response(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and len(lines[0].split()) > 1 else 0
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
    return status, headers, body.decode("utf-8", "replace")


def admitted_holder(port):
    """A Holder that got its 200: the fixture's own /health connection may not have left the
    admitted slots yet (the event loop releases a closed connection asynchronously), and the 503 it
    then gets is right, so try again for a while."""
    deadline = time.time() + 10
    while True:
        h = Holder(port)
        wait_until = time.time() + 5
        while len(h.first) < 12 and not h.ended and time.time() < wait_until:
            time.sleep(0.02)
        if h.first.startswith(b"HTTP/1.1 200") or time.time() > deadline:
            return h
        h.close()
        time.sleep(0.2)


class Holder:
    """A streaming chat request that keeps its connection busy; counts the SSE bytes it reads."""

    def __init__(self, port):
        body = {"messages": [{"role": "user", "content": "Tell me a long story"}], "max_tokens": 3000,
                "ignore_eos": True, "stream": True}
        self.sock = send_raw(port, "POST", "/v1/chat/completions", body)
        self.received = 0
        self.first = b""
        self.ended = False  # the server finished or closed the stream
        self.stop = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            while not self.stop:
                chunk = self.sock.recv(4096)
                if not chunk:
                    break
                if len(self.first) < 512:
                    self.first += chunk
                self.received += len(chunk)
                if b"data: [DONE]" in chunk:
                    break
        except OSError:
            pass
        self.ended = True

    def close(self):
        self.stop = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=10)


def metric(base, name):
    status, body, _ = request(base, "GET", "/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def refused_answer(port, method, path, body, what):
    sock = send_raw(port, method, path, body)
    status, headers, text = split_response(read_until_closed(sock))  # returns only if the server closes
    sock.close()
    try:
        error = json.loads(text)["error"]
    except Exception:
        error = None
    check(status == 503, f"{what}: 503 (got {status} {text[:160]})")
    check(headers.get("retry-after") == "1", f"{what}: Retry-After: 1 (got {headers.get('retry-after')})")
    check(headers.get("connection") == "close", f"{what}: Connection: close, and the server closed it")
    check(error is not None and error.get("code") == "overloaded" and error.get("type") == "server_error"
          and "param" in error and "--max-connections" in error.get("message", ""),
          f"{what}: OpenAI error body naming --max-connections (got {text[:200]})")


def main():
    cli, model = sys.argv[1], sys.argv[2]
    with Server(cli, model, ["--max-connections", str(LIMIT), "--http-threads", str(LIMIT), "--max-batch", "4"]) as server:
        port, base = server.port, server.base
        holders = [admitted_holder(port) for _ in range(LIMIT)]
        deadline = time.time() + 60
        while time.time() < deadline and not all(h.received > 2000 for h in holders):
            time.sleep(0.05)
        check(all(h.first.startswith(b"HTTP/1.1 200") and h.received > 2000 for h in holders),
              f"{LIMIT} holders are streaming ({[h.received for h in holders]} bytes)")
        before = [h.received for h in holders]

        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        refused_answer(port, "POST", "/v1/chat/completions", chat, "chat POST beyond the limit")
        refused_answer(port, "GET", "/v1/models", None, "GET beyond the limit")
        refused_answer(port, "POST", "/v1/completions", {"prompt": "x" * 20000, "max_tokens": 1},
                       "POST with a 20 kB body beyond the limit")
        # The refusals did not wait for a worker: the holders were streaming throughout.
        time.sleep(0.3)
        check(not any(h.ended for h in holders) and all(h.received > b for h, b in zip(holders, before)),
              "the holders were still streaming when the extra connections were refused")

        for h in holders:
            h.close()
        served, last = False, None
        deadline = time.time() + 60
        while time.time() < deadline and not served:
            try:
                last = request(base, "POST", "/v1/chat/completions", {**chat, "temperature": 0})
                served = last[0] == 200
            except Exception as e:
                last = (repr(e),)
            if not served:
                time.sleep(0.2)
        check(served, f"after the holders closed, a new connection is served (last {str(last)[:200]})")
        refused = metric(base, "inferlab_http_connections_refused_total")
        check(refused is not None and refused >= 3, f"/metrics counts the refused connections (got {refused})")
        # A closed connection leaves the count when the event loop has finished with it (a refused
        # one lingers up to 2 s reading what its client still sends, so the 503 is not lost to a reset).
        deadline = time.time() + 10
        connections = metric(base, "inferlab_http_connections")
        while time.time() < deadline and connections != 1:
            time.sleep(0.2)
            connections = metric(base, "inferlab_http_connections")
        check(connections == 1, f"/metrics: only the /metrics connection is admitted now (got {connections})")
        running = None
        deadline = time.time() + 30
        while time.time() < deadline and running != 0:
            running = metric(base, "inferlab_running_requests")
            time.sleep(0.1)
        check(running == 0, "the holders' sequences were cancelled when they hung up")
    if failures:
        sys.exit(f"{len(failures)} connection-limit checks failed")
    print("connection limit: all checks passed")


if __name__ == "__main__":
    main()
