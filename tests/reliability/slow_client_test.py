#!/usr/bin/python3
"""Slow clients end to end: a streaming client that sends its request and never reads (small
receive buffer, long max_tokens) fills the server's socket buffers; while it is stalled, other
streaming clients get their whole, correct answers (equal to a sequential greedy baseline); then
the server drops the stalled one after --slow-client-timeout, its sequence ends as cancelled, its
KV blocks are freed (/metrics) and its stream is cut off without [DONE]. The others sample with
fixed seeds, so each prompt has its own text (greedy text of the random demo model is the same
for every prompt) and a mixed-up answer would show.

Stalled is observed, not assumed: the server side of its TCP connection (/proc/net/tcp) holds
unsent bytes that stop changing while the engine keeps generating tokens.

  slow_client_test.py CLI MODEL
"""
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

from auth_test import request
from serve_helper import Server
from checks import check, failures

TIMEOUT_S = 8
# The slow client's answer must outlast TIMEOUT_S on any machine: the random demo model writes
# 3,500 tokens in under 2 s on a Zen 5, so it runs on a copy of the model with a 32,768-position
# context and asks for 30,000 (about 20 s there, far more under ASan).
SLOW_MAX_TOKENS = 30000


def long_context_copy(model, into):
    """The model folder copied with max_position_embeddings raised to 32,768 (RoPE: the weights
    do not change)."""
    copy = os.path.join(into, "model")
    shutil.copytree(model, copy)
    path = os.path.join(copy, "config.json")
    config = json.load(open(path))
    config["max_position_embeddings"] = 32768
    json.dump(config, open(path, "w"))
    return copy
PROMPTS = ["Write a haiku about rivers", "List three prime numbers", "What is a tokenizer?"]


def metrics(base):
    _, body, _ = request(base, "GET", "/metrics")
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def tcp_entry(local_port, remote_port):
    """(state, tx_queue) of the IPv4 socket local_port -> remote_port on 127.0.0.1, or None."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, remote, state, queues = fields[1], fields[2], fields[3], fields[4]
            if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
                return int(state, 16), int(queues.split(":")[0], 16)
    return None


ESTABLISHED = 1


def chat_body(prompt, seed, stream):
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": 24, "temperature": 1.0, "seed": seed,
            "stream": stream}


def stream_chat(port, prompt, seed, result):
    """A well-behaved streaming client: reads every event to [DONE]."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", "/v1/chat/completions",
                     json.dumps(chat_body(prompt, seed, True)), {"Content-Type": "application/json"})
        r = conn.getresponse()
        result["status"] = r.status
        text, ids, finish, done = "", set(), None, False
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                done = True
                break
            event = json.loads(line[6:])
            ids.add(event.get("id"))
            for choice in event.get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
                finish = choice.get("finish_reason") or finish
        result.update(text=text, ids=ids, finish=finish, done=done)
        conn.close()
    except Exception as e:
        result["error"] = repr(e)


def main():
    cli, model = sys.argv[1], sys.argv[2]
    workdir = tempfile.mkdtemp(prefix="inferlab-slow-client-")
    try:
        run(cli, long_context_copy(model, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run(cli, model):
    # A fixed 16 KiB send buffer: the OS would autotune it past the whole answer (megabytes of SSE).
    with Server(cli, model, ["--slow-client-timeout", str(TIMEOUT_S), "--send-buffer-bytes", "16384",
                             "--max-batch", "8"]) as server:
        port, base = server.port, server.base
        baseline = {}
        for seed, prompt in enumerate(PROMPTS):
            status, body, _ = request(base, "POST", "/v1/chat/completions", chat_body(prompt, seed, False))
            check(status == 200, f"baseline for {prompt!r}: 200")
            baseline[prompt] = json.loads(body)["choices"][0]["message"]["content"]
        check(len(set(baseline.values())) == len(PROMPTS), "the baselines differ from each other")
        m0 = metrics(base)
        cancelled_before = m0['inferlab_requests_finished_total{reason="cancelled"}']

        # The slow client: a tiny receive buffer, a long answer, and it never reads.
        slow = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.connect(("127.0.0.1", port))
        slow_port = slow.getsockname()[1]
        body = json.dumps({"messages": [{"role": "user", "content": "Tell me everything"}], "max_tokens": SLOW_MAX_TOKENS,
                           "ignore_eos": True, "temperature": 0, "stream": True}).encode()
        slow.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        started = time.time()

        stalled, last, samples = False, None, []
        deadline = time.time() + 60
        while time.time() < deadline and not stalled:
            entry = tcp_entry(port, slow_port)
            tokens = metrics(base)["inferlab_generation_tokens_total"]
            if entry and entry[0] == ESTABLISHED and entry[1] > 0:
                samples.append((entry[1], tokens))
                # unsent bytes unchanged over the last 5 samples (~0.5 s) while tokens were generated
                recent = samples[-5:]
                stalled = len(recent) == 5 and len({q for q, _ in recent}) == 1 and recent[-1][1] > recent[0][1]
            time.sleep(0.1)
        stalled_at = time.time()
        check(stalled, f"the slow client is stalled: the server holds {samples[-1][0] if samples else 0} unsent bytes "
                       f"that no longer change while tokens are generated")

        results = [{} for _ in PROMPTS]
        threads = [threading.Thread(target=stream_chat, args=(port, p, seed, r))
                   for seed, (p, r) in enumerate(zip(PROMPTS, results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for prompt, r in zip(PROMPTS, results):
            check(r.get("status") == 200 and r.get("done") and r.get("finish") in ("stop", "length")
                  and len(r.get("ids", ())) == 1 and r.get("text") == baseline[prompt],
                  f"stream {prompt!r} whole and equal to its baseline while the slow client is stalled "
                  f"(got {str({k: v for k, v in r.items() if k != 'ids'})[:200]})")

        # The others are done; the slow client is still connected, stalled, and its sequence alive.
        entry = tcp_entry(port, slow_port)
        m = metrics(base)
        for _ in range(20):  # the others' responses release their stream count just after [DONE]
            if m["inferlab_active_streams"] == 1:
                break
            time.sleep(0.05)
            m = metrics(base)
        check(entry is not None and entry[0] == ESTABLISHED and entry[1] > 0,
              f"when the others finished, the slow connection was still open with unsent bytes (entry {entry})")
        check(m["inferlab_active_streams"] == 1 and m['inferlab_requests_finished_total{reason="cancelled"}'] == cancelled_before,
              f"... and its stream not yet dropped (active streams {m['inferlab_active_streams']})")

        dropped_at, m = None, None
        deadline = time.time() + TIMEOUT_S + 60
        while time.time() < deadline:
            m = metrics(base)
            entry = tcp_entry(port, slow_port)
            if (m["inferlab_active_streams"] == 0 and m["inferlab_running_requests"] == 0
                    and m["inferlab_kv_cache_blocks_used"] == 0 and (entry is None or entry[0] != ESTABLISHED)):
                dropped_at = time.time()
                break
            time.sleep(0.1)
        check(dropped_at is not None, f"the slow client was dropped: no stream, nothing running, 0 KV blocks used, "
                                      f"its connection closed by the server (metrics {m and {k: v for k, v in m.items() if 'stream' in k or 'blocks_used' in k or 'running' in k}})")
        if dropped_at:
            print(f"     stalled after {stalled_at - started:.1f} s, others done, dropped {dropped_at - started:.1f} s "
                  f"after its request (--slow-client-timeout {TIMEOUT_S})")
            check(dropped_at - started >= TIMEOUT_S, "not dropped before --slow-client-timeout")
        check(m['inferlab_requests_finished_total{reason="cancelled"}'] == cancelled_before + 1,
              "its sequence ended as cancelled (it was still generating), not by length")

        # What reached the client is a cut-off stream: the server closed without [DONE].
        slow.settimeout(30)
        received = b""
        try:
            while True:
                chunk = slow.recv(65536)
                if not chunk:
                    break
                received += chunk
        except socket.timeout:
            pass
        slow.close()
        check(received.startswith(b"HTTP/1.1 200") and b"data: [DONE]" not in received
              and received.count(b"chat.completion.chunk") < SLOW_MAX_TOKENS,
              f"the slow client got a cut-off stream ({received.count(b'chat.completion.chunk')} chunks, no [DONE])")
        status, _, _ = request(base, "POST", "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 24, "temperature": 0})
        check(status == 200, "the server keeps serving afterwards")
    if failures:
        sys.exit(f"{len(failures)} slow-client checks failed")
    print("slow clients: all checks passed")


if __name__ == "__main__":
    main()
