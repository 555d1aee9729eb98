#!/usr/bin/python3
"""The measurement tools keep their data, end to end against the real server on 127.0.0.1:
- an --output / --summary path that cannot be written fails before any request reaches the server;
- bench serve stopped with SIGTERM (as with Ctrl-C) writes the rows finished so far plus "cancelled"
  rows for the ones in flight, and a summary with "partial": true; a whole run says false;
- bench soak stopped with SIGTERM prints its counts marked PARTIAL and exits 1, promptly;
- a server SIGKILLed mid-stream: a streaming client sees the stream end without [DONE] (a clean
  error, no hang), bench serve records every open request as a failed row and finishes, and the
  server restarted on the same port serves again.

  keep_data_test.py CLI MODEL
"""
import csv
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from serve_helper import Server
from checks import check, failures


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def metric(base, name):
    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        m = re.search(rf"^{name} (\S+)$", r.read().decode(), re.M)
        return float(m.group(1)) if m else None


def wait_for_streams(base, at_least, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if (metric(base, "inferlab_active_streams") or 0) >= at_least:
            return True
        time.sleep(0.05)
    return False


def api_requests(log):
    return sum(1 for line in log.splitlines() if " -> " in line and "/v1/" in line)


def bench_serve(cli, base, out, summary, n, concurrency, output_len, extra=()):
    return subprocess.Popen([cli, "bench", "serve", "--base-url", base, "--num-requests", str(n), "--concurrency",
                             str(concurrency), "--output-len", str(output_len), "--input-len", "8", "--ignore-eos",
                             "--timeout", "120", "--output", out, "--summary", summary, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def main():
    cli, model = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d, Server(cli, model, ["--log-requests"]) as server:
        # Unwritable paths: refused before the first request (not even GET /v1/models).
        for flag, path in [("--output", os.path.join(d, "missing-dir", "r.csv")), ("--summary", d)]:
            args = {"--output": os.path.join(d, "ok.csv"), "--summary": os.path.join(d, "ok.json")}
            args[flag] = path
            # Only /v1/ requests count: the helper's /health probes may still be reaching the log.
            before = api_requests(server.log())
            r = subprocess.run([cli, "bench", "serve", "--base-url", server.base, "--num-requests", "2", "--concurrency",
                                "1", "--output", args["--output"], "--summary", args["--summary"]],
                               capture_output=True, text=True, timeout=60)
            time.sleep(0.3)
            check(r.returncode != 0 and flag in r.stderr and path in r.stderr,
                  f"{flag} {path}: fails with a message naming it (rc {r.returncode}, {r.stderr.strip()[:160]})")
            check(api_requests(server.log()) == before, f"{flag} unwritable: no request reached the server")
            check(not os.path.exists(os.path.join(d, "ok.csv")), f"{flag} unwritable: the probe left no file behind")

        # A whole run: partial false.
        out, summary = os.path.join(d, "whole.csv"), os.path.join(d, "whole.json")
        proc = bench_serve(cli, server.base, out, summary, 2, 2, 4)
        stdout, stderr = proc.communicate(timeout=120)
        s = json.load(open(summary))
        check(proc.returncode == 0 and s.get("partial") is False and "interrupted_by" not in s,
              f"a whole run: summary partial false (rc {proc.returncode}, {stderr[-200:]})")

        # SIGTERM mid-run: finished rows + cancelled rows for those in flight, summary partial.
        out, summary = os.path.join(d, "term.csv"), os.path.join(d, "term.json")
        proc = bench_serve(cli, server.base, out, summary, 40, 2, 6, ["--seed", "1"])
        deadline = time.time() + 60
        while time.time() < deadline and server.log().count("POST /v1/chat/completions -> 200") < 4:
            time.sleep(0.05)  # some requests finished, others in flight
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        rows = rows_of(out) if os.path.exists(out) else []
        statuses = [row["status"] for row in rows]
        s = json.load(open(summary)) if os.path.exists(summary) else {}
        check(proc.returncode == 0 and "interrupted (SIGTERM)" in stderr, f"SIGTERM: rc 0 and said so (rc {proc.returncode}, {stderr[-200:]})")
        check(0 < len(rows) < 40 and "ok" in statuses and set(statuses) <= {"ok", "cancelled"},
              f"SIGTERM: the finished rows and the cancelled ones are written ({statuses})")
        check(all("SIGTERM" in row["error"] for row in rows if row["status"] == "cancelled"), "cancelled rows name SIGTERM")
        check(s.get("partial") is True and s.get("interrupted_by") == "SIGTERM" and s.get("requests") == len(rows),
              f"SIGTERM: summary partial true over the rows written ({ {k: s.get(k) for k in ['partial', 'interrupted_by', 'requests']} })")
        check("PARTIAL" in stdout, "SIGTERM: the printed report says PARTIAL")

        # bench soak: SIGTERM during the load phase.
        soak = subprocess.Popen([cli, "bench", "soak", "--base-url", server.base, "--duration", "120", "--concurrency", "2",
                                 "--warmup", "0", "--progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and server.log().count("POST /v1/chat/completions") < 60:
            time.sleep(0.1)  # past the baseline (a few dozen sequential requests), into the load
        time.sleep(1.0)
        soak.send_signal(signal.SIGTERM)
        t0 = time.time()
        stdout, stderr = soak.communicate(timeout=30)
        check(soak.returncode == 1 and "PARTIAL: interrupted by SIGTERM" in stdout and "requests started" in stdout,
              f"bench soak SIGTERM: counts printed, PARTIAL, rc 1 (rc {soak.returncode}, {stdout[-300:]} {stderr[-200:]})")
        check(time.time() - t0 < 10, f"bench soak stopped promptly ({time.time() - t0:.1f} s)")

    # SIGKILL mid-stream.
    with tempfile.TemporaryDirectory() as d:
        server = Server(cli, model)
        port, base = server.port, server.base
        try:
            out, summary = os.path.join(d, "killed.csv"), os.path.join(d, "killed.json")
            proc = bench_serve(cli, base, out, summary, 4, 2, 3000)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            conn.request("POST", "/v1/chat/completions", json.dumps(
                {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3000, "stream": True, "ignore_eos": True}),
                {"Content-Type": "application/json"})
            resp = conn.getresponse()
            check(resp.status == 200, f"a raw streaming client: 200 (got {resp.status})")
            check(wait_for_streams(base, 3), "three streams open before the kill")
            server.proc.kill()
            server.proc.wait(timeout=10)
            t0 = time.time()
            raw_error, got = None, b""
            try:
                while True:
                    piece = resp.read1(65536)
                    if not piece:
                        break
                    got += piece
            except (http.client.HTTPException, OSError) as e:
                raw_error = type(e).__name__
            check(time.time() - t0 < 10 and b"[DONE]" not in got and (raw_error or got),
                  f"the raw client sees the stream cut off without [DONE], no hang ({raw_error}, {len(got)} bytes)")
            stdout, stderr = proc.communicate(timeout=60)
            rows = rows_of(out) if os.path.exists(out) else []
            check(proc.returncode == 0 and len(rows) == 4 and all(row["status"] == "error" and row["error"] for row in rows),
                  f"bench serve: every request a failed row ({[(r['status'], r['error'][:60]) for r in rows]}, rc {proc.returncode}, {stderr[-200:]})")
            check(time.time() - t0 < 30, f"bench serve finished promptly after the kill ({time.time() - t0:.1f} s)")
            s = json.load(open(summary)) if os.path.exists(summary) else {}
            check(s.get("failed") == 4 and s.get("partial") is False, f"summary: 4 failed, not partial ({s.get('failed')}, {s.get('partial')})")
        finally:
            server.stop()
        with Server(cli, model, port=port) as again:
            check(again.port == port, f"restarted on the same port {port}")
            out, summary = os.path.join(d, "again.csv"), os.path.join(d, "again.json")
            proc = bench_serve(cli, again.base, out, summary, 2, 2, 4)
            proc.communicate(timeout=120)
            rows = rows_of(out)
            check(proc.returncode == 0 and [r["status"] for r in rows] == ["ok", "ok"], f"the restarted server serves ({rows})")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all keep-data checks passed")


if __name__ == "__main__":
    main()
