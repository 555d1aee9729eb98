#!/usr/bin/python3
"""Replicas behind nginx (issue 18): scripts/replicas 2 starts two servers and Debian's nginx with
deploy/nginx/inferlab.conf.template, all on loopback.

  nginx_test.py CLI MODEL         (exit 77, skipped, when nginx is not installed)

- a greedy stream through nginx says the same as one straight from a replica (text, finish reason,
  usage, [DONE]; the per-request id, created time and timings differ), and its first event arrives while the
  replica is still generating (no buffering);
- one replica SIGKILLed while four streams run: streams on the other replica finish with [DONE],
  and every request sent afterwards is answered 200 (nginx skips the dead replica: a request that
  never reached a replica is retried on the other, never one that did).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

from auth_test import request
from checks import check, failures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port_block(n):
    for base in range(32100, 60000, 50):
        ok = True
        for p in range(base, base + n + 1):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free ports")


def stream_events(base, body, first_event_hook=None):
    data = json.dumps(dict(body, stream=True)).encode()
    req = urllib.request.Request(base + "/v1/completions", data=data, headers={"Content-Type": "application/json"})
    events = []
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            for line in r:
                line = line.decode().rstrip("\n")
                if not line.startswith("data: "):
                    continue
                events.append(line[6:])
                if len(events) == 1 and first_event_hook:
                    first_event_hook()
    except Exception as e:  # cut off by a killed replica
        events.append(f"ERROR {type(e).__name__}")
    return events


def content(events):
    """What a stream says, whatever its chunking: the text, the finish reasons, the usage, the end.
    (A server whose HTTP side falls behind sends the tokens that are ready in one chunk, so the
    number of events may differ between two identical generations.)"""
    text, finish, usage = "", [], None
    for e in events:
        if e == "[DONE]" or e.startswith("ERROR"):
            continue
        j = json.loads(e)
        for c in j.get("choices", []):
            text += c.get("text", "")
            if c.get("finish_reason"):
                finish.append(c["finish_reason"])
        if j.get("usage"):
            usage = {k: v for k, v in j["usage"].items() if k != "prompt_tokens_details"}  # prefix cache hits differ
    return text, finish, usage, events[-1] if events else None


def metrics(base):
    _, body, _ = request(base, "GET", "/metrics")
    return {n: float(v) for n, _, v in (l.rpartition(" ") for l in body.splitlines() if l and not l.startswith("#"))}


def main():
    cli, model = sys.argv[1], sys.argv[2]
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        print("SKIPPED: nginx is not installed (apt-get install nginx)")
        sys.exit(77)
    port = free_port_block(2)
    env = dict(os.environ, PORT=str(port), CLI=os.path.abspath(cli))
    proc = subprocess.Popen([os.path.join(ROOT, "scripts", "replicas"), "2", os.path.abspath(model), "--", "--threads", "1"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines, pids = [], {}
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("replica "):
                pids[int(line.split()[1].rstrip(":"))] = int(line.split()[3])
            if line.startswith("nginx:"):
                break
        threading.Thread(target=lambda: [lines.append(l) for l in proc.stdout], daemon=True).start()
        front = f"http://127.0.0.1:{port}"
        replica1, replica2 = f"http://127.0.0.1:{port + 1}", f"http://127.0.0.1:{port + 2}"
        check(len(pids) == 2 and request(front, "GET", "/ready")[0] == 200,
              f"scripts/replicas 2: two replicas and nginx up ({''.join(lines)[-300:]})")

        body = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        direct = content(stream_events(replica1, body))
        proxied = content(stream_events(front, body))
        check(direct[3] == "[DONE]" and direct[1] == ["length"] and direct == proxied,
              f"a stream through nginx says what one straight from a replica says: text, finish, usage, [DONE] "
              f"({direct} / {proxied})")

        running_at_first = []
        stream_events(front, {"prompt": "Once", "max_tokens": 600, "ignore_eos": True},
                      lambda: running_at_first.append(metrics(replica1).get("inferlab_running_requests", 0)
                                                      + metrics(replica2).get("inferlab_running_requests", 0)))
        check(running_at_first == [1], f"the first event came through while the replica was still generating "
                                       f"(running then: {running_at_first})")

        results = [None] * 4
        threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, stream_events(
            front, {"prompt": "Once", "max_tokens": 300, "ignore_eos": True}))) for i in range(4)]
        for t in threads:
            t.start()
        deadline = time.time() + 60
        while time.time() < deadline and (metrics(replica1).get("inferlab_running_requests", 0) < 1
                                          or metrics(replica2).get("inferlab_running_requests", 0) < 1):
            time.sleep(0.05)
        os.kill(pids[1], signal.SIGKILL)
        for t in threads:
            t.join(timeout=120)
        done = sum(1 for r in results if r and r[-1] == "[DONE]")
        # cut: ended with an error, or without [DONE] (a stream whose replica died after its SSE head but
        # before its first event ends with no event at all)
        cut = sum(1 for r in results if r is not None and (not r or r[-1] != "[DONE]"))
        check(done >= 1 and done + cut == 4, f"replica 1 killed mid-run: the streams on replica 2 finish ({done} done, {cut} cut off)")
        statuses = [request(front, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 2})[0] for _ in range(10)]
        check(statuses == [200] * 10, f"after the kill every new request is answered by the live replica ({statuses})")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    if failures:
        sys.exit(f"{len(failures)} nginx checks failed")
    print("nginx: all checks passed")


if __name__ == "__main__":
    main()
