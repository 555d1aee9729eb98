#!/usr/bin/python3
"""End-to-end: a short `inferlab bench soak` against the real server on a small model. Passes only
when the soak reports 0 lost, 0 mixed-up, 0 unexpected 5xx, the server back to idle and its RSS
within tolerance (the soak's own exit code), and when the counts show that every kind of request
really happened (completions streamed and not, forced tool calls and json_schema answers, each
checked against its schema, cancellations, malformed requests answered 4xx).

  soak_e2e.py CLI MODEL [--duration S] [--concurrency C]
"""
import argparse
import os
import re
import subprocess
import sys

from serve_helper import Server


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cli")
    p.add_argument("model")
    p.add_argument("--duration", default="20")
    p.add_argument("--concurrency", default="8")
    p.add_argument("--cancel-rate", default="0.1")
    a = p.parse_args()
    # Under scripts/sanitize, ASan keeps freed memory in its quarantine (up to 256 MiB) instead of
    # reusing it, so RSS grows by design (+30 % measured); leaks are LeakSanitizer's job there.
    rss = ["--rss-tolerance", "0.5"] if os.environ.get("INFERLAB_SANITIZED") else []
    with Server(a.cli, a.model, ["--max-batch", "8"]) as server:
        r = subprocess.run([a.cli, "bench", "soak", "--base-url", server.base, "--duration", a.duration,
                            "--concurrency", a.concurrency, "--cancel-rate", a.cancel_rate, "--malformed-rate", "0.1",
                            "--tool-call-rate", "0.2", "--json-schema-rate", "0.2",
                            "--server-pid", str(server.proc.pid), "--seed", "1"] + rss,
                           capture_output=True, text=True, timeout=600)
        print(r.stdout)
        print(r.stderr, file=sys.stderr)
        if r.returncode != 0:
            print("server log (tail):\n" + server.log()[-3000:], file=sys.stderr)
            sys.exit(f"soak failed with exit code {r.returncode}")

    def count(label):
        m = re.search(r"^" + re.escape(label) + r"\s+(\d+)", r.stdout, re.M)
        if not m:
            sys.exit(f"soak output has no '{label}' line")
        return int(m.group(1))

    streamed = re.search(r"\((\d+) streamed, (\d+) not; (\d+) tool calls, (\d+) json_schema\)", r.stdout)
    checks = {"completed": count("completed (whole, matched)"), "cancelled": count("cancelled by the client"),
              "malformed 4xx": count("malformed -> 4xx"),
              "streamed": int(streamed.group(1)) if streamed else 0, "not streamed": int(streamed.group(2)) if streamed else 0,
              "tool calls": int(streamed.group(3)) if streamed else 0, "json_schema": int(streamed.group(4)) if streamed else 0}
    missing = [k for k, v in checks.items() if v == 0]
    if missing:
        sys.exit(f"the soak never exercised: {', '.join(missing)} ({checks})")
    for label in ("lost", "mixed-up", "5xx (not overload)", "schema broken"):
        if count(label) != 0:
            sys.exit(f"{label} = {count(label)}")
    if "[/proc/" not in r.stdout:
        sys.exit("the server's RSS was not read")
    print("soak e2e: ok", checks)


if __name__ == "__main__":
    main()
