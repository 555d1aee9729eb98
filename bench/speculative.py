#!/usr/bin/python3
"""Prompt-lookup speculative decoding, measured: greedy generation with and without
`--speculative ngram` on prompts whose answer repeats them, side by side in one run.

The workload is "continue a passage you have just read": each prompt is a passage of held-out
Brown-corpus text (assets/brown-heldout.txt, never trained on), a blank line, and the passage's
first words again — a language model that has learned to copy continues with the passage, as an
"edit / repeat this text" request does. A second set of prompts, fresh text without a repeat,
shows the cost when drafts find nothing. Every pair is checked token for token (greedy: the
outputs must be identical). Prints a table: decode tokens/s (after the first token, prefill
excluded), forward passes, drafted/accepted tokens.

With --llama-lookup (bench/build_llama_lookup.sh), llama.cpp's own prompt-lookup decoding runs the
same prompts on a GGUF BF16 conversion of the same weights (bench/hf_to_gguf.py), with
--spec-draft-n-max 0 (plain) and --draft-max: its n-gram cache drafts, its decode tokens/s.

  bench/speculative.py [--model models/demo] [--prompts 8] [--tokens 128] [--threads 1]
                       [--draft-max 8] [--repeats 3] [--llama-lookup BIN] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def passages(count, words):
    text = open(os.path.join(ROOT, "assets", "brown-heldout.txt"), encoding="utf-8").read().split()
    step = max(words, len(text) // (2 * count + 1))
    return [" ".join(text[i * step:i * step + words]) for i in range(2 * count)]


def generate(cli, model, prompt, tokens, threads, speculative):
    cmd = [cli, "generate", model, "--prompt", prompt, "--max-new-tokens", str(tokens), "--ignore-eos",
           "--threads", str(threads), "--json"] + speculative
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def llama_lookup(binary, gguf, prompt, tokens, threads, draft_max):
    cmd = [binary, "-m", gguf, "-p", prompt, "-n", str(tokens), "--spec-draft-n-max", str(draft_max), "-t", str(threads),
           "--temp", "0", "-c", "2048"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    log = r.stdout + r.stderr
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", log)
    if r.returncode != 0 or not m:
        sys.exit(f"llama-lookup failed ({r.returncode}): {log[-800:]}")
    drafted = re.search(r"n_drafted\s*=\s*(\d+)", log)
    accepted = re.search(r"n_accept\s*=\s*(\d+)", log)
    return {"tokens": int(m.group(1)), "seconds": float(m.group(2)),
            "drafted": int(drafted.group(1)) if drafted else 0, "accepted": int(accepted.group(1)) if accepted else 0}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default=os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "bin", "inferlab"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "demo"))
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--words", type=int, default=120, help="words per passage")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--draft-max", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per prompt and mode (the median is kept)")
    p.add_argument("--llama-lookup", help="llama.cpp's llama-lookup (bench/build_llama_lookup.sh) to run side by side")
    p.add_argument("--json", help="write the figures here too")
    a = p.parse_args()
    gguf = None
    if a.llama_lookup:
        gguf = os.path.join(ROOT, "out", "speculative", os.path.basename(os.path.normpath(a.model)) + "-bf16.gguf")
        os.makedirs(os.path.dirname(gguf), exist_ok=True)
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "hf_to_gguf.py"), a.model, "--type", "bf16",
                        "--out", gguf], check=True, capture_output=True)
    spec = ["--speculative", "ngram", "--draft-max", str(a.draft_max)]
    texts = passages(a.prompts, a.words)
    workloads = {
        "repeat (passage, then its first words)": [t + "\n\n" + " ".join(t.split()[:8]) for t in texts[:a.prompts]],
        "fresh text (nothing to copy)": texts[a.prompts:],
    }
    results = {}
    for name, prompts in workloads.items():
        rows = {"plain": [], "ngram": []}
        drafted = accepted = passes_plain = passes_spec = tokens = 0
        for prompt in prompts:
            runs = {"plain": [], "ngram": []}
            for _ in range(a.repeats):
                for mode, flags in (("plain", []), ("ngram", spec)):
                    runs[mode].append(generate(a.cli, a.model, prompt, a.tokens, a.threads, flags))
            plain, fast = runs["plain"][0], runs["ngram"][0]
            if plain["tokens"] != fast["tokens"]:
                sys.exit(f"greedy output differs with speculative decoding on prompt {prompt[:60]!r}")
            for mode in rows:
                rows[mode].append(statistics.median(r["decode_ms"] for r in runs[mode]))
            tokens += len(plain["tokens"]) - 1  # decoded after the first
            passes_plain += plain["forward_passes"]
            passes_spec += fast["forward_passes"]
            drafted += fast["speculative"]["drafted_tokens"]
            accepted += fast["speculative"]["accepted_tokens"]
        ms_plain, ms_spec = sum(rows["plain"]), sum(rows["ngram"])
        llama = {}
        if a.llama_lookup:
            for mode, n in (("plain", 0), ("lookup", a.draft_max)):
                runs = [[llama_lookup(a.llama_lookup, gguf, prompt, a.tokens, a.threads, n) for _ in range(a.repeats)]
                        for prompt in prompts]
                seconds = sum(statistics.median(r["seconds"] for r in per) for per in runs)
                decoded = sum(per[0]["tokens"] for per in runs)
                llama[mode] = {"tokens_per_s": decoded / seconds, "drafted": sum(per[0]["drafted"] for per in runs),
                               "accepted": sum(per[0]["accepted"] for per in runs)}
        results[name] = {
            "prompts": len(prompts), "tokens": tokens,
            "plain_tokens_per_s": 1000 * tokens / ms_plain, "ngram_tokens_per_s": 1000 * tokens / ms_spec,
            "speedup": ms_plain / ms_spec, "forward_passes_plain": passes_plain, "forward_passes_ngram": passes_spec,
            "drafted": drafted, "accepted": accepted, "acceptance": accepted / drafted if drafted else 0.0,
            "tokens_per_pass": tokens / passes_spec,
        }
        if llama:
            results[name]["llama_cpp"] = llama
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"model {a.model}, {a.prompts} prompts per workload, {a.tokens} greedy tokens each, --threads {a.threads}, "
          f"--draft-max {a.draft_max}, median of {a.repeats}; CPU: {cpu}, {os.cpu_count()} cores")
    print(f"{'workload':<40} {'plain tok/s':>11} {'ngram tok/s':>11} {'speed-up':>8} {'passes':>13} "
          f"{'drafted':>8} {'accepted':>8} {'accept %':>8} {'tok/pass':>8}")
    for name, r in results.items():
        print(f"{name:<40} {r['plain_tokens_per_s']:>11.1f} {r['ngram_tokens_per_s']:>11.1f} {r['speedup']:>7.2f}x "
              f"{r['forward_passes_plain']:>6}->{r['forward_passes_ngram']:<6} {r['drafted']:>8} {r['accepted']:>8} "
              f"{100 * r['acceptance']:>7.1f}% {r['tokens_per_pass']:>8.2f}")
    if a.llama_lookup:
        print(f"\nllama.cpp llama-lookup on {os.path.relpath(gguf, ROOT)} (same weights, BF16), --temp 0, same prompts:")
        print(f"{'workload':<40} {'plain tok/s':>11} {'lookup tok/s':>12} {'speed-up':>8} {'drafted':>8} {'accepted':>8} {'accept %':>8}")
        for name, r in results.items():
            l = r["llama_cpp"]
            d, acc = l["lookup"]["drafted"], l["lookup"]["accepted"]
            print(f"{name:<40} {l['plain']['tokens_per_s']:>11.1f} {l['lookup']['tokens_per_s']:>12.1f} "
                  f"{l['lookup']['tokens_per_s'] / l['plain']['tokens_per_s']:>7.2f}x {d:>8} {acc:>8} "
                  f"{100 * acc / d if d else 0:>7.1f}%")
    print("greedy outputs identical with and without speculation: yes (every prompt)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "cpu": cpu, "threads": a.threads, "draft_max": a.draft_max,
                       "workloads": results}, f, indent=2)


if __name__ == "__main__":
    main()
