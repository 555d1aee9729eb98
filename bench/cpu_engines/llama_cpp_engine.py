#!/usr/bin/env python3
"""llama.cpp, driven for bench/cpu_engines.sh (run with any Python 3 that has numpy: it calls node).

The llama.cpp build is node-llama-cpp's prebuilt CPU one (npm, pinned in package.json), as in
bench/speed.sh. The formats are GGUF files written from the same HF weights by bench/hf_to_gguf.py,
llama.cpp's own tensor types: BF16, Q8_0, Q4_0 (with a Q8_0 output matrix, as llama-quantize's Q4_0
mix keeps it higher; our q4 keeps its lm_head int8). Timed by bench/llama_cpp_bench.mjs,
llama-bench's method: pp P into an empty cache, and tg N after P cached positions (-d P), one
warm-up then -r runs each. Greedy tokens: bench/llama_cpp_greedy.mjs.
"""
import json
import os
import subprocess
import sys

import driver  # this folder's driver.py (the script's folder comes first on sys.path)

ENGINE = "llama.cpp"
VARIANTS = {"bf16": ["BF16"], "int8": ["Q8_0"], "q4": ["Q4_0"]}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_seen = {}


def version():
    package = os.path.join(ROOT, "node_modules", "node-llama-cpp", "package.json")
    if not os.path.exists(package):
        raise FileNotFoundError("node-llama-cpp is not installed (scripts/setup installs it from package.json)")
    with open(package) as f:
        return f"node-llama-cpp {json.load(f)['version']}"


def prepare(hf_dir, variant, cache):
    gguf = os.path.join(cache, f"{variant.lower()}.gguf")
    converter = os.path.join(ROOT, "bench", "hf_to_gguf.py")
    if os.path.exists(gguf) and os.path.getmtime(gguf) >= os.path.getmtime(os.path.join(hf_dir, "config.json")):
        return gguf
    os.makedirs(cache, exist_ok=True)
    r = subprocess.run([sys.executable, converter, hf_dir, "--type", variant.lower(), "--out", gguf + ".part"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"hf_to_gguf.py exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
    os.replace(gguf + ".part", gguf)
    return gguf


def _bench(path, threads, args):
    doc = driver.run_json(["node", os.path.join(ROOT, "bench", "llama_cpp_bench.mjs"), path, "-t", str(threads), "--json", *args])
    (test,) = doc["results"]
    return doc, test


def measure(path, variant, threads, prompt, gen, reps):
    doc, pp = _bench(path, threads, ["-p", str(prompt), "-n", "0", "-r", str(reps)])
    _, tg = _bench(path, threads, ["-p", "0", "-n", str(gen), "-d", str(prompt), "-r", str(reps)])
    _seen["version"] = f"node-llama-cpp {doc['node_llama_cpp_version']} (llama.cpp {doc['llama_cpp_release']}, ggml-cpu-{doc['cpu_backend']})"
    return {"pp_ts": pp["avg_ts"], "tg_ts": tg["avg_ts"], "pp_samples_ts": pp["samples_ts"], "tg_samples_ts": tg["samples_ts"],
            "format_detail": f"GGUF {doc['model_type']}", "method": f"llama_cpp_bench.mjs: {pp['test']} and {tg['test']}, one warm-up then -r runs, mean"}


def greedy(path, variant, threads, prompt_ids, k):
    doc = driver.run_json(["node", os.path.join(ROOT, "bench", "llama_cpp_greedy.mjs"), path,
                           "--prompt-ids", ",".join(map(str, prompt_ids)), "-n", str(k), "-t", str(threads)])
    return doc["tokens"]


def extra():
    return {"version": _seen["version"]} if "version" in _seen else {}


if __name__ == "__main__":
    driver.main(globals())
