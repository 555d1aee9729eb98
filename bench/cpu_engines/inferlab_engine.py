#!/usr/bin/env python3
"""inferlab, driven for bench/cpu_engines.sh (run with any Python 3: it calls the CLI).

Timed by the engine's own harness, as bench/speed.sh does: `inferlab bench engine HF -p P -n 0`
(prefill: one forward of the P-token prompt into an empty cache, logits of its last token) and
`-p 0 -n N -d P` (decode: N single-token steps after P cached positions, where the peers' decode
runs), one warm-up then -r runs each. The formats are the engine's own, made from the same HF weights
at load: --weights bf16 / int8 / q4 (q4 keeps the lm_head int8). Greedy tokens: `inferlab generate
--ignore-eos`. The binary: $CPU_ENGINES_INFERLAB (default build/bin/inferlab).
"""
import os
import subprocess
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "inferlab"
VARIANTS = {"bf16": ["bf16"], "int8": ["int8"], "q4": ["q4"]}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("CPU_ENGINES_INFERLAB", os.path.join(ROOT, "build", "bin", "inferlab"))


def version():
    if not os.access(BINARY, os.X_OK):
        raise FileNotFoundError(f"{BINARY}: no inferlab binary (build it, or set CPU_ENGINES_INFERLAB)")
    text = subprocess.run([BINARY, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return f"{text} ({commit}{'+changes' if dirty else ''})" if commit else text


def prepare(hf_dir, variant, cache):
    return hf_dir  # the engine converts the HF weights itself at load


def _bench(path, variant, threads, args):
    doc = driver.run_json([BINARY, "bench", "engine", path, "--weights", variant, "-t", str(threads), "--json", *args])
    (test,) = doc["results"]
    return doc, test


def measure(path, variant, threads, prompt, gen, reps):
    doc, pp = _bench(path, variant, threads, ["-p", str(prompt), "-n", "0", "-r", str(reps)])
    _, tg = _bench(path, variant, threads, ["-p", "0", "-n", str(gen), "-d", str(prompt), "-r", str(reps)])
    return {"pp_ts": pp["avg_ts"], "tg_ts": tg["avg_ts"], "pp_samples_ts": pp["samples_ts"], "tg_samples_ts": tg["samples_ts"],
            "load_s": doc["load_seconds"], "format_detail": f"--weights {variant} (lm_head {doc['output_weights']})",
            "method": f"bench engine: {pp['test']} and {tg['test']}, one warm-up then -r runs, mean"}


def greedy(path, variant, threads, prompt_ids, k):
    doc = driver.run_json([BINARY, "generate", path, "--prompt-ids", ",".join(map(str, prompt_ids)), "--max-new-tokens", str(k),
                           "--ignore-eos", "--json", "-t", str(threads), "--weights", variant])
    return doc["tokens"]


if __name__ == "__main__":
    driver.main(globals())
