#!/usr/bin/env python3
"""bench/cpu_engines.sh --serve: the engines that serve an OpenAI-compatible API, loaded by
`inferlab bench serve` at each concurrency, one server at a time on the same cores.

  serve.py --results FILE --model NAME --models-dir DIR --engines inferlab,llama.cpp,vllm
           --formats bf16,int8,q4 --threads 1,2 --concurrency 1,8,32 --input-len P --output-len N
           --inferlab BIN [--llama-server PATH] [--vllm-python PATH] [--no-pin] [--round R]

The servers, each on the model's weights in the format the pp/tg rows use:
  inferlab:  `inferlab serve HF --weights W --threads T --max-batch C_max --no-prefix-caching`
  llama.cpp: llama-server (bench/build_llama_server.sh builds it from node-llama-cpp's source) on the
             same GGUF, -t T -tb T, -np C_max slots of P + N + 16 positions each, --no-cache-prompt
  vLLM CPU:  its OpenAI server (python -m vllm.entrypoints.openai.api_server) in out/engine-venvs/vllm,
             bfloat16, --max-num-seqs C_max, prefix caching off, VLLM_CPU_OMP_THREADS_BIND 0..T-1
Each concurrency C: 2C requests (at least 4) of a random P-token prompt (the model's tokenizer) and
N output tokens with EOS ignored, streamed to /v1/completions, after min(C, 4) warm-up requests;
the figure is `bench serve`'s output tokens/s, with its median TTFT and TPOT. Then, with --slo,
`inferlab bench capacity --concurrency-levels 1:C_max` on the same requests: the highest concurrency
whose P95s meet the SLO, and the output tokens/s there (each point run once, --capacity-requests
requests: a coarse search that fits beside the levels). A server that does not start, or a level
whose requests fail, keeps its row with the error.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VARIANT = {"inferlab": {"bf16": "bf16", "int8": "int8", "q4": "q4"},
           "llama.cpp": {"bf16": "BF16", "int8": "Q8_0", "q4": "Q4_0"},
           "vllm": {"bf16": "bf16"}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(a, engine, variant, threads, port, hf, cmax):
    ctx = a.input_len + a.output_len + 16
    if engine == "inferlab":
        return [a.inferlab, "serve", hf, "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads), "--weights", variant,
                "--max-batch", str(cmax), "--no-prefix-caching"], {}
    if engine == "llama.cpp":
        gguf = os.path.join(a.models_dir, a.model, "llama.cpp", f"{variant.lower()}.gguf")
        if not os.path.exists(gguf):
            raise RuntimeError(f"{gguf} is missing (the pp/tg run's conversion writes it)")
        return [a.llama_server, "-m", gguf, "--host", "127.0.0.1", "--port", str(port), "-t", str(threads), "-tb", str(threads),
                "-np", str(cmax), "-c", str(cmax * ctx), "--no-cache-prompt"], {}
    if engine == "vllm":
        env = {"VLLM_CPU_OMP_THREADS_BIND": "0" if threads == 1 else f"0-{threads - 1}", "VLLM_CPU_KVCACHE_SPACE": "4",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        return [a.vllm_python, "-m", "vllm.entrypoints.openai.api_server", "--model", hf, "--host", "127.0.0.1", "--port", str(port),
                "--dtype", "bfloat16", "--max-model-len", str(ctx), "--max-num-seqs", str(cmax), "--no-enable-prefix-caching"], env
    raise ValueError(engine)


def wait_ready(proc, url, log, timeout_s):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            tail = [line for line in open(log, errors="replace").read().splitlines() if line.strip()][-3:]
            raise RuntimeError(f"the server exited ({proc.returncode}) before answering: {' / '.join(tail)}")
        try:
            with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"no answer on {url}/v1/models within {timeout_s} s")


def stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def load_level(a, url, hf, c, tmp):
    summary = os.path.join(tmp, f"summary-c{c}.json")
    cmd = [a.inferlab, "bench", "serve", "--base-url", url, "--num-requests", str(max(2 * c, 4)), "--concurrency", str(c),
           "--input-len", str(a.input_len), "--output-len", str(a.output_len), "--ignore-eos", "--seed", "1", "--no-progress",
           "--endpoint", "completions", "--output", "", "--summary", summary, "--tokenizer", hf, "--warmup", str(min(c, 4))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if r.returncode != 0 or not os.path.exists(summary):
        tail = [line for line in (r.stderr + r.stdout).splitlines() if line.strip()][-2:]
        raise RuntimeError(f"bench serve exit {r.returncode}: {' / '.join(tail)}")
    s = json.load(open(summary))
    result = {"output_tok_s": s["output_throughput_token_per_s"], "failed": s.get("failed", 0),
              "ttft_ms_median": s.get("ttft_ms", {}).get("median"), "tpot_ms_median": s.get("tpot_ms", {}).get("median")}
    if result["failed"]:
        result["error"] = f"{result['failed']} request(s) failed"
    return result


def capacity(a, url, hf, cmax, tmp):
    """The highest concurrency in 1..cmax meeting --slo, and the output tokens/s measured there."""
    cmd = [a.inferlab, "bench", "capacity", "--base-url", url, "--slo", a.slo, "--concurrency-levels", f"1:{cmax}",
           "--num-requests", str(a.capacity_requests), "--repeat", "1", "--input-len", str(a.input_len),
           "--output-len", str(a.output_len), "--ignore-eos", "--seed", "1", "--endpoint", "completions",
           "--tokenizer", hf, "--json", "--output-dir", os.path.join(tmp, "capacity")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if r.returncode != 0:
        tail = [line for line in (r.stderr + r.stdout).splitlines() if line.strip()][-2:]
        raise RuntimeError(f"bench capacity exit {r.returncode}: {' / '.join(tail)}")
    j = json.loads(r.stdout)
    result = {"slo": a.slo, "capacity": j.get("capacity"), "outcome": j.get("outcome")}
    for point in j.get("points", []):
        if point.get("load") == j.get("capacity"):
            result["output_tok_s"] = point.get("metrics", {}).get("output_throughput", {}).get("median")
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--engines", required=True)
    p.add_argument("--formats", required=True)
    p.add_argument("--threads", required=True)
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--input-len", type=int, required=True)
    p.add_argument("--output-len", type=int, required=True)
    p.add_argument("--inferlab", required=True)
    p.add_argument("--llama-server", default=os.path.join(ROOT, "build-llama-server", "llama-server"))
    p.add_argument("--vllm-python", default=os.path.join(ROOT, "out", "engine-venvs", "vllm", "bin", "python"))
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--round", type=int, default=1)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--slo", default="", help="bench capacity's objectives, e.g. ttft_p95_ms=2000,tpot_p95_ms=100 (none: no search)")
    p.add_argument("--capacity-requests", type=int, default=16, help="requests per capacity point")
    a = p.parse_args()
    levels = [int(c) for c in a.concurrency.split(",")]
    hf = os.path.join(a.models_dir, a.model, "hf")
    logs = os.path.join(os.path.dirname(os.path.abspath(a.results)), "logs")
    os.makedirs(logs, exist_ok=True)
    out = open(a.results, "a")

    def emit(engine, fmt, variant, threads, c, result):
        out.write(json.dumps({"stage": "serve", "model": a.model, "format": fmt, "engine_key": engine, "variant": variant,
                              "threads": threads, "concurrency": c, "round": a.round, "result": result}) + "\n")
        out.flush()

    for threads in [int(t) for t in a.threads.split(",")]:
        for fmt in a.formats.split(","):
            for engine in a.engines.split(","):
                if engine not in VARIANT:
                    continue  # engines without an OpenAI server here: pp/tg rows only
                variant = VARIANT[engine].get(fmt)
                if variant is None:
                    emit(engine, fmt, "", threads, None, {"not_offered": f"{engine} serves {fmt} only from pre-quantized checkpoints"})
                    continue
                missing = {"llama.cpp": (a.llama_server, "no llama-server (bench/build_llama_server.sh builds one, about 6 minutes)"),
                           "vllm": (a.vllm_python, "no vLLM environment (bench/cpu_engines.sh --setup-only --engines vllm)")}.get(engine)
                if missing and not os.access(missing[0], os.X_OK):
                    emit(engine, fmt, variant, threads, None, {"error": f"{missing[0]}: {missing[1]}"})
                    continue
                port = free_port()
                url = f"http://127.0.0.1:{port}"
                log = os.path.join(logs, f"serve-{a.model}-{engine}-{variant}-t{threads}-r{a.round}.log")
                print(f"== serve {a.model} {fmt} {engine} {variant} -t {threads}: {url}", flush=True)
                try:
                    cmd, env = server_command(a, engine, variant, threads, port, hf, max(levels))
                except RuntimeError as exc:
                    emit(engine, fmt, variant, threads, None, {"error": str(exc)})
                    continue
                pin = [] if a.no_pin else ["taskset", "-c", "0" if threads == 1 else f"0-{threads - 1}"]
                threads_env = {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
                proc = subprocess.Popen(pin + cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**os.environ, **threads_env, **env})
                try:
                    wait_ready(proc, url, log, 900)
                    with tempfile.TemporaryDirectory() as tmp:
                        for c in levels:
                            try:
                                emit(engine, fmt, variant, threads, c, load_level(a, url, hf, c, tmp))
                            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                                emit(engine, fmt, variant, threads, c, {"error": str(exc)})
                        if a.slo:
                            try:
                                emit(engine, fmt, variant, threads, "capacity", capacity(a, url, hf, max(levels), tmp))
                            except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
                                emit(engine, fmt, variant, threads, "capacity", {"error": str(exc)})
                except RuntimeError as exc:
                    emit(engine, fmt, variant, threads, None, {"error": str(exc)})
                finally:
                    stop(proc)


if __name__ == "__main__":
    main()
