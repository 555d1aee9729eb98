#!/usr/bin/env python3
"""bench/cpu_engines.sh without its engines (no virtual environment, no build needed):
- --help exits 0 and names every engine, model and option;
- each bad argument exits 2 with a message naming it, before anything is installed or converted;
- every driver in bench/cpu_engines/ lists its variants without importing its engine;
- table.py on records written here: medians of the rounds, ours / the best peer computed from them,
  a failed run and a format an engine does not offer kept as rows with their reason.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "bench", "cpu_engines.sh")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(args, **kw):
    return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, **kw)


def test_help():
    r = run(["--help"])
    check(r.returncode == 0, f"--help exit {r.returncode}: {r.stderr}")
    for word in ["inferlab", "llama.cpp", "vllm", "openvino", "ctranslate2", "transformers", "qwen2.5-0.5b", "smollm2-135m",
                 "--setup-only", "--no-setup", "--quick", "--threads", "--rounds", "--engines"]:
        check(word in r.stdout, f"--help mentions {word}")
    check(not r.stdout.startswith("#") and "set -euo" not in r.stdout, f"--help prints the comment block only: {r.stdout[:200]}")


def test_bad_arguments():
    # Each is refused by name with exit 2, and nothing is made: the --out folder stays absent.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        cases = [
            (["--engines", "bogus"], "unknown engine 'bogus'"),
            (["--engines", "inferlab,vllm-gpu"], "unknown engine 'vllm-gpu'"),
            (["--models", "llama-70b"], "unknown model 'llama-70b'"),
            (["--formats", "bf16,q3"], "unknown format 'q3'"),
            (["--threads", "0"], "--threads takes a whole number >= 1, not '0'"),
            (["--threads", "1,x"], "--threads takes a whole number >= 1, not 'x'"),
            (["--threads", "100000"], "--threads 100000: this machine has"),
            (["-p", "-5"], "-p needs a value"),
            (["-p", "abc"], "-p takes a whole number >= 1, not 'abc'"),
            (["-n", "0"], "-n takes a whole number >= 1, not '0'"),
            (["-r", "1.5"], "-r takes a whole number >= 1, not '1.5'"),
            (["--rounds", "0"], "--rounds takes a whole number >= 1, not '0'"),
            (["-p", "4000"], "past the 4000 positions"),
            (["--engines"], "--engines needs a value"),
            (["--frobnicate"], "unknown argument '--frobnicate'"),
        ]
        for args, needle in cases:
            r = run([*args, "--out", out, "--venvs", os.path.join(tmp, "venvs")])
            check(r.returncode == 2, f"{args}: exit {r.returncode} (want 2): {r.stderr}")
            check(needle in r.stderr, f"{args}: stderr names the problem ({needle!r}): {r.stderr!r}")
            check(not os.path.exists(out) and not os.path.exists(os.path.join(tmp, "venvs")), f"{args}: made nothing")
        # --no-setup with --setup-only: every Python engine reports its missing environment, exit 1.
        r = run(["--setup-only", "--no-setup", "--engines", "vllm,transformers", "--out", out, "--venvs", os.path.join(tmp, "venvs")])
        check(r.returncode == 1, f"--setup-only --no-setup without environments: exit {r.returncode}: {r.stdout} {r.stderr}")


def test_driver_variants():
    engines = {"inferlab": "inferlab", "llama_cpp": "llama.cpp", "vllm": "vLLM CPU", "openvino": "OpenVINO GenAI",
               "ctranslate2": "CTranslate2", "transformers": "transformers"}
    for driver, name in engines.items():
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cpu_engines", f"{driver}_engine.py"), "variants"],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"{driver}_engine.py variants: exit {r.returncode}: {r.stderr}")
        if r.returncode:
            continue
        doc = json.loads(r.stdout)
        check(doc["engine"] == name, f"{driver}_engine.py names its engine {name}: {doc}")
        for f in ("bf16", "int8", "q4"):
            check(isinstance(doc[f], list), f"{driver}_engine.py lists its {f} variants: {doc}")
            check(bool(doc[f]) != bool(doc["not_offered"].get(f)), f"{driver}.py: {f} has variants or a reason, not both: {doc}")


def table_of(records, threads):
    """table.py's output for these records, written as a results.jsonl (exit 0 checked)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "results.jsonl")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in records))
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "cpu_engines", "table.py"), path, "--threads", threads],
                           capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, f"table.py exit {r.returncode}: {r.stderr}")
    print(r.stdout)
    return r.stdout


def test_table():
    def run_record(engine, variant, fmt, threads, rnd, pp, tg, version, **extra):
        result = {"engine": engine, "variant": variant, "version": version, "pp_ts": pp, "tg_ts": tg, "p": 512, "n": 128, **extra}
        return {"stage": "run", "model": "m", "format": fmt, "engine_key": engine, "variant": variant, "threads": threads,
                "round": rnd, "rc": 0, "log": "", "result": result}

    records = []
    # Three rounds: ours 100/110/90 pp (median 100), 20/22/21 tg (median 21); the peers' medians 80 and 25 / 10 and 30.
    for rnd, (pp, tg) in enumerate([(100, 20), (110, 22), (90, 21)], 1):
        records.append(run_record("inferlab", "int8", "int8", 1, rnd, pp, tg, "inferlab 0.1.0 (abc)"))
    for rnd, (pp, tg) in enumerate([(80, 25), (70, 26), (85, 24)], 1):
        records.append(run_record("llama.cpp", "Q8_0", "int8", 1, rnd, pp, tg, "node-llama-cpp 3.21.1"))
    for rnd, (pp, tg) in enumerate([(10, 30), (12, 30), (11, 30)], 1):
        records.append(run_record("ctranslate2", "int8_float32", "int8", 1, rnd, pp, tg, "ctranslate2 4.8.5"))
    records.append({"stage": "run", "model": "m", "format": "int8", "engine_key": "openvino", "variant": "int8", "threads": 1,
                    "round": 1, "rc": 1, "log": "x.log", "result": {"engine": "OpenVINO GenAI", "error": "RuntimeError: no CPU plugin"}})
    records.append({"stage": "not-offered", "model": "m", "format": "int8", "engine_key": "vllm", "variant": "", "threads": None,
                    "round": None, "rc": 0, "log": "", "result": {"engine": "vLLM CPU", "not_offered": "needs a quantized checkpoint"}})
    records[0]["result"]["smoke_tokens"] = [1, 2, 3, 4]
    records[3]["result"]["smoke_tokens"] = [1, 2, 9, 4]
    out = table_of(records, "1")
    check(re.search(r"^\| 1 \| int8 \| inferlab \| int8 \| 100\.0 \(90\.0-110\.0\) \| 21\.00 \(20\.00-22\.00\) \| - \|", out, re.M),
          "our row: the median of the rounds and their range")
    # ours / this row: pp 100/80 = 1.25, tg 21/25 = 0.84
    check(re.search(r"^\| 1 \| int8 \| llama\.cpp \| Q8_0 \| 80\.00 .*\| 1\.25x, 0\.84x \|", out, re.M), "ours / llama.cpp per row")
    # best peer: pp llama.cpp 80 (1.25x), tg CTranslate2 30 (0.70x)
    check(re.search(r"^\| 1 \| int8 \| 100\.0 .*\| 80\.00 .*\(llama\.cpp Q8_0\) \| 1\.25x \| 21\.00 .*\| 30\.00 .*\(ctranslate2 int8_float32\) \| 0\.70x \|",
                    out, re.M), "ours / the best peer, each test's best")
    check("RuntimeError: no CPU plugin" in out, "a failed run keeps its row and error")
    check("not offered: needs a quantized checkpoint" in out, "a format not offered keeps its row and reason")
    check("node-llama-cpp 3.21.1" in out and "ctranslate2 4.8.5" in out, "each engine's version")
    check(re.search(r"^\| int8 \| llama\.cpp \| Q8_0 \| 1 2 9 4 \| .* \| first 2 of 4 \|", out, re.M),
          "smoke tokens beside the reference's: the agreeing prefix")


def test_serve_table():
    def serve(engine, variant, c, result):
        return {"stage": "serve", "model": "m", "format": "bf16", "engine_key": engine, "variant": variant, "threads": 2,
                "concurrency": c, "round": 1, "result": result}

    def level(tok_s):
        return {"output_tok_s": tok_s, "failed": 0, "ttft_ms_median": 200.0, "tpot_ms_median": 10.0}

    slo = "ttft_p95_ms=2000,tpot_p95_ms=100"
    records = [serve("inferlab", "bf16", 1, level(80.0)), serve("inferlab", "bf16", 8, level(200.0)),
               serve("inferlab", "bf16", "capacity", {"slo": slo, "capacity": 9.0, "outcome": "found", "output_tok_s": 170.4}),
               serve("llama.cpp", "BF16", 1, level(40.0)), serve("llama.cpp", "BF16", 8, {"error": "2 request(s) failed"}),
               serve("llama.cpp", "BF16", "capacity", {"slo": slo, "capacity": None, "outcome": "below range"}),
               serve("vllm", "bf16", 1, level(20.0)), serve("vllm", "bf16", 8, level(100.0)),
               serve("vllm", "bf16", "capacity", {"error": "bench capacity exit 2: --slo: bad objective"})]
    out = table_of(records, "2")
    check(f"the highest concurrency meeting {slo}" in out, "the serving table names the SLO of its capacity column")
    check(re.search(r"^\| 2 \| bf16 \| inferlab \| bf16 \| 80\.00 \(200 / 10\.0\) \| 200\.0 \(200 / 10\.0\) \| c=9 \(170\.4 tok/s\) \| - \|", out, re.M),
          "our row: each level, then the capacity with its throughput")
    check(re.search(r"^\| 2 \| bf16 \| vllm \| bf16 \| .* \| - \| 4\.00x, 2\.00x \| capacity: bench capacity exit 2", out, re.M),
          "a failed search keeps its row, the error in the note, and the levels' ratios")
    check(re.search(r"^\| 2 \| bf16 \| llama\.cpp \| BF16 \| 40\.00 .*\| - \| none \(not even c=1 met it\) \| 2\.00x \| c=8: 2 request\(s\) failed", out, re.M),
          "no level meeting the SLO says so; a failed level is '-' with its error")


if __name__ == "__main__":
    test_help()
    test_bad_arguments()
    test_driver_variants()
    test_table()
    test_serve_table()
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
