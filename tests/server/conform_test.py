#!/usr/bin/env python3
"""`inferlab conform` end to end.

  conform_test.py inferlab CLI MODEL [--api-key]   our server: every check passes, except the skips
                                                     named below (features not there), exit 0
  conform_test.py broken CLI SERVER_SCRIPT          a scripted server that breaks SSE framing and the
                                                     error shape: those checks fail, exit 1
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))
from serve_helper import Server  # noqa: E402

# Skips our server is allowed: no key given (auth.*), tool calls not parsed yet (issue 15), and
# sampling.min_tokens: the random-weight test model never ends on its own, so there is no early end
# for min_tokens to hold back (the check passes on trained models, see docs/conformance.md).
ALLOWED_SKIPS = {"finish.tool_calls", "tools.stream", "sampling.min_tokens"}


def run_conform(cli, base, *extra, timeout=60):
    started = time.time()
    proc = subprocess.run([cli, "conform", "--base-url", base, "--json", "--timeout", str(timeout), *extra],
                          capture_output=True, text=True, timeout=600)
    print(f"inferlab conform exited {proc.returncode} after {time.time() - started:.1f} s")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        sys.exit(f"no JSON report:\nstdout: {proc.stdout[-3000:]}\nstderr: {proc.stderr[-3000:]}")
    for c in report["checks"]:
        line = f"{c['status']:<5} {c['name']:<28} {c['detail']}"
        if c["status"] == "fail":
            line += f"\n      request: {c['request']}\n      got: {c['evidence']}"
        print(line)
    return proc.returncode, {c["name"]: c for c in report["checks"]}


def test_inferlab(cli, model, with_key):
    key = "conform-test-key"
    # The test model has Qwen3's thinking template and random weights: a forced tool call's first
    # token could be <think>, after which it never closes; the checks here are of a non-thinking chat.
    no_thinking = ["--chat-template-kwargs", '{"enable_thinking": false}']
    server = Server(cli, model, no_thinking + (["--api-key", key] if with_key else []))
    try:
        code, checks = run_conform(cli, server.base, *(["--api-key", key] if with_key else []))
    finally:
        server.stop()
    failures = []
    if len(checks) < 50:
        failures.append(f"only {len(checks)} checks ran (expected at least 50)")
    for name, c in checks.items():
        allowed = ALLOWED_SKIPS | (set() if with_key else {"auth.missing_key", "auth.wrong_key", "auth.valid_key", "messages.x_api_key"})
        if c["status"] == "fail" or (c["status"] == "skip" and name not in allowed):
            failures.append(f"{name}: {c['status']} ({c['detail']})")
    for name in ("auth.missing_key", "auth.wrong_key", "auth.valid_key", "messages.x_api_key"):
        want = "pass" if with_key else "skip"
        if checks.get(name, {}).get("status") != want:
            failures.append(f"{name}: expected {want}")
    if code != 0:
        failures.append(f"exit code {code} (expected 0)")
    return failures


def test_broken(cli, script):
    proc = subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline().split()[1])
        code, checks = run_conform(cli, f"http://127.0.0.1:{port}", timeout=10)
    finally:
        proc.kill()
        proc.wait()
    failures = []
    if code != 1:
        failures.append(f"exit code {code} (expected 1: checks failed)")
    for name in ("stream.separators", "stream.done", "stream.role_chunk_content", "stream.one_id", "errors.bad_json",
                 "errors.not_an_object", "errors.unknown_route", "models.retrieve", "completions.stream",
                 "responses.stream", "responses.unknown_previous",
                 # it answers /v1/messages with a chat.completion, streams data-only events, accepts anything
                 "messages.plain", "messages.stream_events", "messages.missing_max_tokens", "messages.count_tokens"):
        if checks.get(name, {}).get("status") != "fail":
            failures.append(f"{name}: {checks.get(name, {}).get('status')} (the broken server must fail it)")
        elif not checks[name]["request"]:
            failures.append(f"{name}: a failure without its request as evidence")
    for name in ("models.list", "responses.create"):
        if checks.get(name, {}).get("status") != "pass":
            failures.append(f"{name}: {checks.get(name, {}).get('status')} (the broken server does this right)")
    return failures


def main():
    mode, cli = sys.argv[1], sys.argv[2]
    if mode == "inferlab":
        failures = test_inferlab(cli, sys.argv[3], "--api-key" in sys.argv[4:])
    elif mode == "broken":
        failures = test_broken(cli, sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
