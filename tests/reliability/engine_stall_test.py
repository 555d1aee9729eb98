#!/usr/bin/python3
"""A hung engine must not look healthy (issue 18, vLLM #19849): /health answers 503
{"status":"engine stalled","message":...} while the engine loop has made no step for
--engine-stall-timeout seconds with work waiting, and 200 again once it moves; /ready stays 200
{"status":"ready"} throughout (the server is still serving, only slowly).

  engine_stall_test.py CLI TOKENIZER_DIR WORKDIR

No fault injection: the engine genuinely does not advance. A random-weight model (make-model
--config, written in WORKDIR) computes a long prompt in one prefill step (--step-tokens above the
prompt) that takes several seconds, with --engine-stall-timeout 1 s, while a second request waits
behind it (--max-batch 1). The prompt length comes from steps measured on this machine now: two
calibration prompts fit time ~ length^p, the length aimed at a 5 s step; an attempt whose step came
out shorter than the timeout plus a margin (the machine sped up) is inconclusive and is run again
longer, at most three times and within a deadline.
"""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from checks import check, failures
from serve_helper import Server

STALL_S = 1.0        # --engine-stall-timeout
TARGET_STEP_S = 5.0  # what the long step is aimed at
# A step this long must show the 503: the stall is reported from STALL_S after the step began (the
# server notices steps on a 200 ms tick) until the step ends, so this leaves >= 1 s to see it.
CONCLUSIVE_S = STALL_S + 1.5
MAX_TOKENS = 30000   # prompt cap (the model's context is 32,768)


def get(base, path):
    try:
        with urllib.request.urlopen(base + path, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def complete(base, prompt_ids, max_tokens):
    data = json.dumps({"prompt": prompt_ids, "max_tokens": max_tokens, "ignore_eos": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def metric(base, name):
    _, body = get(base, "/metrics")
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


rng = random.Random(18)


def ids(n):
    """Fresh random token ids (no prefix of an earlier prompt: every prompt is computed whole)."""
    return [rng.randrange(10, 4000) for _ in range(n)]


def prefill_s(base, n):
    return complete(base, ids(n), 1)["timings"]["prefill_ms"] / 1000


def stall_attempt(base, length):
    """A long prompt (one step of `length` tokens) and a short one queued behind it, /health and
    /ready polled every 50 ms until both are answered."""
    answers = {}

    def send(key, prompt, max_tokens):
        try:
            answers[key] = complete(base, prompt, max_tokens)
        except Exception as e:  # an error is a finding, reported by the checks
            answers[key] = {"error": f"{type(e).__name__}: {e}"}

    picked_before = metric(base, "inferlab_engine_steps_total")
    sent = time.monotonic()
    long_request = threading.Thread(target=send, args=("long", ids(length), 2))
    long_request.start()
    # The engine took it (it counts as waiting from the moment the loop picks it up until the step
    # ends): the second request now queues behind a step in progress.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and metric(base, "inferlab_queue_length") < 1 and long_request.is_alive():
        time.sleep(0.02)
    short_request = threading.Thread(target=send, args=("short", ids(8), 2))
    short_request.start()
    polls = []  # (seconds since the long request was sent, path, status, body)
    deadline = time.monotonic() + 240
    while (long_request.is_alive() or short_request.is_alive()) and time.monotonic() < deadline:
        for path in ("/health", "/ready"):
            status, body = get(base, path)
            polls.append((time.monotonic() - sent, path, status, body))
        time.sleep(0.05)
    long_request.join(timeout=60)
    short_request.join(timeout=60)
    after = [get(base, "/health") for _ in range(3)]
    steps = metric(base, "inferlab_engine_steps_total") - picked_before
    return answers, polls, after, steps


def main():
    cli, tokenizer, workdir = sys.argv[1], sys.argv[2], sys.argv[3]
    started = time.monotonic()
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    # Qwen2-shaped, deep and narrow: attention over a long prompt makes one step slow while the
    # weights stay small (56 MB, quick to write and load). The vocabulary is cut to 4,096 ids; the
    # prompts are token ids below it.
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 256,
              "intermediate_size": 512, "num_hidden_layers": 16, "num_attention_heads": 4,
              "num_key_value_heads": 4, "vocab_size": 4096, "max_position_embeddings": 32768,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "hidden_act": "silu", "tie_word_embeddings": True,
              "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32", "use_sliding_window": False}
    config_path = os.path.join(workdir, "config.json")
    json.dump(config, open(config_path, "w"))
    model = os.path.join(workdir, "model")
    r = subprocess.run([cli, "make-model", "--config", config_path, "--out", model, "--tokenizer", tokenizer],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"make-model failed: {r.stderr}")

    with Server(cli, model, ["--max-batch", "1", "--step-tokens", "65536", "--kv-tokens", "32768",
                             "--no-prefix-caching", "--engine-stall-timeout", str(STALL_S)], threads=1) as s:
        base = s.base
        check(get(base, "/health") == (200, '{"status":"ok"}'), "idle: /health 200 {\"status\":\"ok\"}")

        # Calibration: time ~ length^p between two measured steps (p in [1, 2]: linear layers,
        # quadratic attention), the first run once to warm up.
        prefill_s(base, 256)
        l1, l2 = 512, 1024
        t1, t2 = prefill_s(base, l1), prefill_s(base, l2)
        p = min(2.0, max(1.0, math.log(max(t2, 1e-3) / max(t1, 1e-3)) / math.log(l2 / l1)))
        length = min(MAX_TOKENS, max(l2, int(l2 * (TARGET_STEP_S / max(t2, 1e-3)) ** (1 / p))))
        print(f"calibration: {l1} tokens {t1:.3f} s, {l2} tokens {t2:.3f} s, exponent {p:.2f} -> {length} tokens")

        for attempt in range(1, 4):
            answers, polls, after, steps = stall_attempt(base, length)
            long_answer, short_answer = answers.get("long", {}), answers.get("short", {})
            if "timings" not in long_answer or "timings" not in short_answer:
                check(False, f"both requests answered ({long_answer.get('error')}, {short_answer.get('error')})")
                break
            step_s = long_answer["timings"]["prefill_ms"] / 1000
            print(f"attempt {attempt}: {length} tokens in one step of {step_s:.2f} s, {len(polls)} polls, "
                  f"short request queued {short_answer['timings']['queue_ms'] / 1000:.2f} s")
            if step_s < CONCLUSIVE_S:
                if attempt == 3 or time.monotonic() - started > 200 or length >= MAX_TOKENS:
                    check(False, f"a step of at least {CONCLUSIVE_S} s could be made ({step_s:.2f} s at {length} tokens)")
                    break
                # Longer by the square root of the shortfall (attention is quadratic), at least 1.5x.
                length = min(MAX_TOKENS, int(length * max(1.5, (TARGET_STEP_S / max(step_s, 0.05)) ** 0.5)))
                continue
            health = [(t, st, b) for t, path, st, b in polls if path == "/health"]
            ready = [(t, st, b) for t, path, st, b in polls if path == "/ready"]
            stalled = [(t, b) for t, st, b in health if st == 503]
            bodies = [json.loads(b) for _, b in stalled]
            check(stalled and all(j.get("status") == "engine stalled" and "--engine-stall-timeout" in j.get("message", "")
                                  for j in bodies),
                  f"during a {step_s:.1f} s step with a request queued behind it /health answered 503 "
                  f"{{\"status\":\"engine stalled\",\"message\":…}} ({len(stalled)} of {len(health)} polls; "
                  f"{bodies[:1]})")
            check(not stalled or stalled[0][0] >= STALL_S - 0.25,
                  f"not before --engine-stall-timeout {STALL_S} s of no step (first 503 at "
                  f"{stalled[0][0] if stalled else None} s after the long request was sent)")
            codes = [st for _, st, _ in health]
            runs = []  # run lengths: [[200, 21], [503, 114], [200, 0]]
            for c in codes:
                if runs and runs[-1][0] == c:
                    runs[-1][1] += 1
                else:
                    runs.append([c, 1])
            first = codes.index(503) if 503 in codes else len(codes)
            last = len(codes) - 1 - codes[::-1].index(503) if 503 in codes else -1
            check(all(c == 503 for c in codes[first:last + 1]) and all(c == 200 for c in codes[:first] + codes[last + 1:]),
                  f"/health: 200, then 503 for the whole stall, then 200 ({', '.join(f'{c} x{n}' for c, n in runs)})")
            check(short_answer["timings"]["queue_ms"] / 1000 >= STALL_S,
                  f"the second request waited through the stall ({short_answer['timings']['queue_ms']:.0f} ms queued)")
            check(all(st == 200 and json.loads(b) == {"status": "ready"} for _, st, b in ready) and ready,
                  f"/ready stayed 200 {{\"status\":\"ready\"}} throughout ({sorted(set(st for _, st, _ in ready))})")
            check(after == [(200, '{"status":"ok"}')] * 3, f"the engine moved on: /health 200 again ({after})")
            check(steps >= 2, f"the engine made steps again after the stall ({steps:.0f})")
            break
        check(s.proc.poll() is None, "the server is still running")
    shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        sys.exit(f"{len(failures)} engine-stall checks failed")
    print(f"engine stall: all checks passed in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
