#!/usr/bin/env python3
"""The load generator's workloads through the real CLI: the dataset formats and multi-turn
conversations.

usage: workloads_test.py CASE INFERLAB_CLI SOURCE_DIR
  datasets_cli         bench serve with each file format and generator against the scripted SSE
                       server: the prompts and max_tokens the server received; bad files and
                       misplaced flags refused by name (file, line, field), exit 1, nothing sent
  multi_turn_scripted  random-multi-turn against the scripted server's /prefixcache (it counts a
                       prompt in words and caches what earlier requests and its own answers held):
                       each turn sent after the answer before it with the whole history, the
                       history lengths and cache hits per turn in requests.csv, the per-turn table
                       and hit rate in the report, --concurrency as conversations in flight, a
                       failed turn's later turns as skipped rows
  multi_turn_demo      a short multi-turn run against `inferlab serve` on the demo model
                       (SOURCE_DIR/assets/demo-model) on 127.0.0.1: turn 2's cached_tokens > 0;
                       and a short bench soak on the same server with its prompts from a JSONL file
Exit 77 = skipped.
"""
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from scripted_server import ScriptedServer

HERE = os.path.dirname(os.path.abspath(__file__))
CASE, CLI, SOURCE = sys.argv[1], sys.argv[2], sys.argv[3]
ANSWER = "KV Cache 把注意力的键值存起来。"  # what the scripted server streams: 3 words
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(args, timeout=120):
    return subprocess.run([CLI] + args, capture_output=True, text=True, timeout=timeout)


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# ------------------------------------------------------------------ the formats

def test_datasets_cli():
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as d:
        def serve(args, n, concurrency="1"):
            before = len(server.stats()["bodies"])
            r = run(["bench", "serve", "--base-url", server.url + "/ok", "--model", "m", "--num-requests", str(n),
                     "--concurrency", concurrency, "--seed", "3", "--output", os.path.join(d, "requests.csv")] + args)
            return r, server.stats()["bodies"][before:]

        def user_text(body):
            return body["messages"][-1]["content"]

        # vLLM's custom JSONL: each line's prompt and output_tokens as sent.
        custom = os.path.join(d, "data.jsonl")
        with open(custom, "w") as f:
            f.write('{"prompt": "What is the capital of India?", "output_tokens": 7}\n\n'
                    '{"prompt": "What is the capital of Iran?", "output_tokens": 3}\n')
        r, sent = serve(["--dataset-name", "custom", "--dataset-path", custom], 4)
        check(r.returncode == 0 and r.stdout.startswith("Success: 4/4"), f"custom: {r.stdout} {r.stderr}")
        pairs = sorted((user_text(b), b["max_tokens"]) for b in sent)
        check(pairs == sorted([("What is the capital of India?", 7), ("What is the capital of Iran?", 3)] * 2),
              f"custom prompts and max_tokens: {pairs}")
        r, sent = serve(["--dataset", "custom", "--dataset-path", custom, "--custom-output-len", "2"], 2)
        check(r.returncode == 0 and all(b["max_tokens"] == 2 for b in sent), f"--custom-output-len: {sent}")

        # Bad files: refused by file, line and field before anything is sent; exit 1, no crash.
        bad = os.path.join(d, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"prompt": "ok", "output_tokens": 3}\n\n{"prompt": 42, "output_tokens": 3}\n')
        broken = os.path.join(d, "broken.json")
        with open(broken, "w") as f:
            f.write('[\n {"conversations": [{"from": "human", "value": "q"},\n  {"from": "gpt"}]}\n]\n')
        for args, needle in [
                (["--dataset", "custom", "--dataset-path", bad], f'error: {bad}:3: "prompt" must be a string'),
                (["--dataset", "sharegpt", "--dataset-path", broken, "--output-len", "4"],
                 f'error: {broken}:2: entry 1: "conversations"[1]["value"] is missing'),
                (["--dataset", "multi-turn", "--dataset-path", broken, "--output-len", "4"],
                 f'error: {broken}:2: entry 1: "conversations"[1]["value"] is missing'),
                (["--dataset", "custom", "--dataset-path", os.path.join(d, "none.jsonl")], "none.jsonl: cannot open"),
                (["--dataset", "random", "--gsp-num-groups", "3"],
                 "--gsp-num-groups shapes --dataset generated-shared-prefix, not random"),
                (["--dataset", "random", "--dataset-path", custom], "--dataset random reads no file"),
                (["--dataset", "random-multi-turn", "--endpoint", "completions"],
                 "multi-turn conversations need --endpoint chat")]:
            r, sent = serve(args, 2)
            check(r.returncode == 1 and needle in r.stderr and not sent,
                  f"{args}: exit {r.returncode}, {len(sent)} sent, stderr {r.stderr!r} (wanted {needle!r})")
        # The same refusal from bench capacity, which takes its prompts from the same registry.
        r = run(["bench", "capacity", "--base-url", server.url + "/ok", "--model", "m", "--slo", "ttft_p95_ms=100",
                 "--concurrency-levels", "1:2", "--no-files", "--dataset", "custom", "--dataset-path", bad])
        check(r.returncode == 1 and f'{bad}:3: "prompt" must be a string' in r.stderr, f"capacity: {r.stderr}")

        # ... and from bench soak, whose prompts may come from it too (single requests only).
        for args, needle in [(["--dataset", "custom", "--dataset-path", bad], f'{bad}:3: "prompt" must be a string'),
                             (["--dataset", "random-multi-turn"], "bench soak sends single requests")]:
            before = len(server.stats()["bodies"])
            r = run(["bench", "soak", "--base-url", server.url + "/ok", "--model", "m", "--duration", "1"] + args)
            check(r.returncode == 1 and needle in r.stderr and len(server.stats()["bodies"]) == before, f"soak {args}: {r.stderr}")

        # Sonnet: the instruction, the first lines shared (20 words' worth: 2 lines), random lines up to 40.
        poem = os.path.join(d, "poem.txt")
        with open(poem, "w") as f:
            f.write("".join(f"line{i} of the poem here\n" for i in range(1, 21)))
        r, sent = serve(["--dataset", "sonnet", "--dataset-path", poem, "--sonnet-input-len", "40",
                         "--sonnet-prefix-len", "20", "--output-len", "4"], 3)
        check(r.returncode == 0 and len(sent) == 3, f"sonnet: {r.stdout} {r.stderr}")
        for b in sent:
            text = user_text(b)
            check(text.startswith("Pick as many lines as you can from these poem lines:\nline1 of the poem here\n"
                                  "line2 of the poem here\n") and text.count("\n") == 7 and b["max_tokens"] == 4,
                  f"sonnet prompt: {text!r}")

        # prefix_repetition: 2 prefixes of 4 words, each request 3 words of its own.
        r, sent = serve(["--dataset", "prefix_repetition", "--prefix-repetition-num-prefixes", "2",
                         "--prefix-repetition-prefix-len", "4", "--prefix-repetition-suffix-len", "3",
                         "--prefix-repetition-output-len", "5"], 6)
        prefixes = sorted(" ".join(user_text(b).split()[:4]) for b in sent)
        check(r.returncode == 0 and len(set(prefixes)) == 2 and prefixes.count(prefixes[0]) == 3
              and all(len(user_text(b).split()) == 7 and b["max_tokens"] == 5 for b in sent),
              f"prefix_repetition: {[user_text(b) for b in sent]}")

        # generated-shared-prefix: 2 groups x 2 questions, "system\n\nquestion".
        r, sent = serve(["--dataset", "generated-shared-prefix", "--gsp-num-groups", "2", "--gsp-prompts-per-group", "2",
                         "--gsp-system-prompt-len", "5", "--gsp-question-len", "2", "--gsp-output-len", "3"], 4)
        systems = [user_text(b).split("\n\n")[0] for b in sent]
        check(r.returncode == 0 and len(set(systems)) == 2 and all(systems.count(s) == 2 for s in systems)
              and len({user_text(b) for b in sent}) == 4 and all(b["max_tokens"] == 3 for b in sent),
              f"generated-shared-prefix: {[user_text(b) for b in sent]}")

        # random with a range: max_tokens in [5, 15], not all the same.
        r, sent = serve(["--dataset", "random", "--input-len", "10", "--output-len", "10", "--random-range-ratio", "0.5"],
                        12, "4")
        lengths = [b["max_tokens"] for b in sent]
        check(r.returncode == 0 and all(5 <= n <= 15 for n in lengths) and len(set(lengths)) > 1,
              f"--random-range-ratio: {lengths}")

        helptext = run(["bench", "serve", "--help"]).stdout
        for name in ["sharegpt-json", "custom", "sonnet", "prefix_repetition", "generated-shared-prefix", "multi-turn",
                     "random-multi-turn", "--dataset-name", "--random-range-ratio", "--num-turns"]:
            check(name in helptext, f"bench serve --help does not mention {name}")


# ------------------------------------------------------------------ multi-turn

def test_multi_turn_scripted():
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as d:
        out, summary = os.path.join(d, "mt.csv"), os.path.join(d, "mt.json")
        r = run(["bench", "serve", "--base-url", server.url + "/prefixcache", "--model", "m", "--dataset",
                 "random-multi-turn", "--num-requests", "3", "--num-turns", "3", "--input-len", "6", "--output-len", "5",
                 "--concurrency", "2", "--seed", "7", "--output", out, "--summary", summary])
        print(r.stdout, r.stderr)
        check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
        rows = read_rows(out)
        check(len(rows) == 9 and all(row["status"] == "ok" for row in rows), f"rows: {rows}")
        check(list(rows[0].keys())[-2:] == ["conversation_id", "turn"], f"columns: {list(rows[0].keys())}")
        by_conversation = {}
        for row in rows:
            by_conversation.setdefault(row["conversation_id"], []).append(row)
        check(sorted(by_conversation) == ["c01", "c02", "c03"], f"conversations: {sorted(by_conversation)}")
        for cid, turns in by_conversation.items():
            check([int(t["turn"]) for t in turns] == [1, 2, 3], f"{cid} turns: {turns}")
            for k, t in enumerate(turns, 1):
                # Words: the user turns (6 each) and the answers (3 each) so far; cached: all but the last user turn.
                check(int(t["input_tokens"]) == 9 * k - 3, f"{cid} turn {k}: input_tokens {t['input_tokens']}, want {9 * k - 3}")
                check(int(t["cached_tokens"]) == 9 * (k - 1), f"{cid} turn {k}: cached {t['cached_tokens']}, want {9 * (k - 1)}")
                check(float(t["ttft_ms"]) >= 38, f"{cid} turn {k}: TTFT {t['ttft_ms']} before the scripted 40 ms")
                if k > 1:
                    check(float(t["start_ms"]) >= float(turns[k - 2]["end_ms"]),
                          f"{cid} turn {k} started at {t['start_ms']}, before turn {k - 1} ended at {turns[k - 2]['end_ms']}")
        # --concurrency 2 counts conversations: the third starts only when one of the first two has ended.
        first_end = min(float(by_conversation[c][-1]["end_ms"]) for c in ("c01", "c02"))
        check(float(by_conversation["c03"][0]["start_ms"]) >= first_end,
              f"c03 started at {by_conversation['c03'][0]['start_ms']} before a conversation ended ({first_end})")
        check(server.stats()["max_open_streams"] <= 2, f"{server.stats()['max_open_streams']} streams open at once")

        # What the server received: each turn the whole history, with the answers as streamed.
        bodies = server.stats()["bodies"]
        conversations = {}
        for b in bodies:
            conversations.setdefault(b["messages"][0]["content"], []).append(b["messages"])
        check(len(conversations) == 3 and all(len(c) == 3 for c in conversations.values()), f"bodies: {bodies}")
        for turns in conversations.values():
            for k, messages in enumerate(turns, 1):
                check([m["role"] for m in messages] == ["user", "assistant"] * (k - 1) + ["user"], f"roles: {messages}")
                check(all(m["content"] == ANSWER for m in messages if m["role"] == "assistant"), f"answers: {messages}")
                check(all(len(m["content"].split()) == 6 for m in messages if m["role"] == "user"), f"user turns: {messages}")
                if k > 1:  # turn k = turn k-1's messages, the answer it got, the next user turn
                    check(messages[:-2] == turns[k - 2] and messages[-2] == {"role": "assistant", "content": ANSWER},
                          f"turn {k} does not extend turn {k - 1}: {messages} vs {turns[k - 2]}")

        # The report: per turn the TTFT and the prefix-cache hit rate; overall 81 of 135 words cached.
        check("Multi-turn: 3 conversations" in r.stdout, r.stdout)
        check(re.search(r"^2\s+3\s+3\s+[\d.]+\s+[\d.]+\s+15\.0\s+60\.0%$", r.stdout, re.M), f"turn 2 row: {r.stdout}")
        check(re.search(r"^3\s+3\s+3\s+[\d.]+\s+[\d.]+\s+24\.0\s+75\.0%$", r.stdout, re.M), f"turn 3 row: {r.stdout}")
        check("Prefix cache: 81 of 135 prompt tokens (60.0%) were cached" in r.stdout, r.stdout)
        s = json.load(open(summary))
        turns = s["multi_turn"]["turns"]
        check(s["multi_turn"]["conversations"] == 3 and [t["turn"] for t in turns] == [1, 2, 3], f"summary: {s['multi_turn']}")
        check([t["prefix_cache"]["cached_tokens"] for t in turns] == [0, 27, 54], f"summary cache: {turns}")
        check(abs(s["prefix_cache"]["hit_rate"] - 0.6) < 1e-12, f"hit rate: {s['prefix_cache']}")
        check(s["run"]["dataset"] == "random-multi-turn" and s["run"]["num_turns"] == 3, f"run: {s['run']}")
        # inferlab report of the CSV says the same.
        again = json.loads(run(["report", out, "--json"]).stdout)
        check(again["multi_turn"] == s["multi_turn"], f"report --json: {again.get('multi_turn')} vs {s['multi_turn']}")

        # A turn that fails ends its conversation: its later turns are rows marked skipped, never sent.
        before = len(server.stats()["bodies"])
        failed_csv = os.path.join(d, "failed.csv")
        r = run(["bench", "serve", "--base-url", server.url + "/http500", "--model", "m", "--dataset",
                 "random-multi-turn", "--num-requests", "2", "--num-turns", "3", "--concurrency", "2",
                 "--output", failed_csv])
        rows = read_rows(failed_csv)
        check(r.returncode == 0 and len(server.stats()["bodies"]) - before == 2, f"failed run: {r.stderr}, sent {len(server.stats()['bodies']) - before}")
        check([(row["turn"], row["status"]) for row in rows] == [("1", "http_500"), ("2", "skipped"), ("3", "skipped")] * 2,
              f"failed rows: {rows}")
        check(all(row["error"] == "not sent: turn 1 of this conversation ended with http_500"
                  for row in rows if row["status"] == "skipped"), f"skipped rows: {rows}")
        check("Failed: 6 (http_500 2, skipped 4)" in r.stdout, r.stdout)


def test_multi_turn_demo():
    model = os.path.join(SOURCE, "assets", "demo-model")
    if not os.path.exists(os.path.join(model, "config.json")):
        print("skipped: no", model)
        return 77
    proc = subprocess.Popen([CLI, "serve", model, "--host", "127.0.0.1", "--port", "0", "--threads", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        for line in proc.stdout:
            m = re.search(r"listening on http://[^:\s]+:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
        check(port is not None, "inferlab serve printed its port")
        if port is None:
            return
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.2)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "demo.csv")
            # 40-token user turns: turn 1's prompt fills whole 16-token blocks the prefix cache keeps.
            r = run(["bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--tokenizer", model,
                     "--dataset", "random-multi-turn", "--num-requests", "2", "--num-turns", "2", "--input-len", "40",
                     "--output-len", "8", "--ignore-eos", "--concurrency", "1", "--seed", "1", "--output", out], timeout=170)
            print(r.stdout, r.stderr)
            check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
            rows = read_rows(out) if os.path.exists(out) else []
            check(len(rows) == 4 and all(row["status"] == "ok" for row in rows), f"rows: {rows}")
            for first, second in zip(rows[0::2], rows[1::2]):
                check(first["conversation_id"] == second["conversation_id"] and (first["turn"], second["turn"]) == ("1", "2"),
                      f"turn order: {first} {second}")
                check(int(second["input_tokens"]) > int(first["input_tokens"]) + 40 + int(first["output_tokens"]) - 1,
                      f"turn 2's prompt ({second['input_tokens']}) should hold turn 1's ({first['input_tokens']}), "
                      f"its answer and 40 more")
                check(int(second["cached_tokens"]) > 0, f"turn 2 of {second['conversation_id']}: cached_tokens {second['cached_tokens']}")
                check(int(second["cached_tokens"]) >= 32, f"turn 2 should find turn 1's whole blocks cached: {second}")
            check("Multi-turn: 2 conversations" in r.stdout and "Prefix cache:" in r.stdout, r.stdout)

            # bench soak with its prompts from a dataset file: three prompts, baselines, answers checked.
            prompts = os.path.join(d, "prompts.jsonl")
            with open(prompts, "w") as f:
                for text in ["The capital of France is", "Once upon a time", "The history of the city"]:
                    f.write(json.dumps({"prompt": text, "output_tokens": 8}) + "\n")
            r = run(["bench", "soak", "--base-url", f"http://127.0.0.1:{port}", "--dataset", "custom", "--dataset-path",
                     prompts, "--num-prompts", "3", "--duration", "4", "--concurrency", "2", "--max-tokens", "8",
                     "--tool-call-rate", "0", "--json-schema-rate", "0", "--cancel-rate", "0", "--malformed-rate", "0",
                     "--rss-tolerance", "1.0", "--seed", "1"], timeout=170)
            print(r.stdout, r.stderr)
            check(r.returncode == 0 and "3 prompts (greedy baselines taken first)" in r.stdout,
                  f"soak with --dataset custom: exit {r.returncode}: {r.stdout} {r.stderr}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    result = {"datasets_cli": test_datasets_cli, "multi_turn_scripted": test_multi_turn_scripted,
              "multi_turn_demo": test_multi_turn_demo}[CASE]()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    sys.exit(result or 0)
