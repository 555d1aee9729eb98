"""What every driver in bench/cpu_engines/ shares: its command line, the timing, the one JSON line.

A driver names its ENGINE, the VARIANTS it runs for each format class (bf16 / int8 / q4) and the
reason for a class it does not offer, and defines:
  version() -> str                       the engine's version, as its package reports it
  prepare(hf_dir, variant, cache) -> str the model in the engine's own format, converted once into
                                         `cache` by the engine's own converter (reused when there)
  and either
  load(path, variant, threads) -> generate(prompt_ids, k) -> [ids]
                                         greedy, exactly k new tokens, EOS ignored: timed here
  or (engines timed by their own C++ harness: inferlab, llama.cpp)
  measure(path, variant, threads, prompt, gen, reps) -> {"pp_ts": t/s, "tg_ts": t/s, ...}
  greedy(path, variant, threads, prompt_ids, k) -> [ids]

Commands (bench/cpu_engines.sh runs them, each in the engine's own virtual environment):
  ENGINE_engine.py variants                      {"bf16": [...], "int8": [...], "q4": [...], "not_offered": {...}}
  ENGINE_engine.py prepare --hf DIR --variant V --cache DIR
  ENGINE_engine.py run --hf DIR --variant V --cache DIR --threads T -p P -n N -r R --prompt-ids FILE
                [--smoke-ids FILE --smoke-n K]
Each prints one JSON line on stdout (what the engine itself prints goes to stderr); a failure prints
{"error": "..."} and exits 1.

The timing of `load` engines, the same for each: one warm-up of each call, then R times, alternated,
a generate of 1 token (prefill: the time to the first token of a P-token prompt) and a generate of
1 + N tokens on the same prompt; prefill t/s = P / median(first), decode t/s = N / (median(whole) -
median(first)). Prefix caching is off in every engine that has it, so each call prefills anew.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
import traceback


def _parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("variants")
    for name in ("prepare", "run"):
        s = sub.add_parser(name)
        s.add_argument("--hf", required=True, help="the model's HF folder (safetensors, config.json, tokenizer)")
        s.add_argument("--variant", required=True)
        s.add_argument("--cache", required=True, help="folder for this engine's conversions of the model")
        if name == "run":
            s.add_argument("--threads", type=int, required=True)
            s.add_argument("-p", type=int, required=True, dest="prompt")
            s.add_argument("-n", type=int, required=True, dest="gen")
            s.add_argument("-r", type=int, default=1, dest="reps")
            s.add_argument("--prompt-ids", required=True, help="JSON list of the timed prompt's token ids")
            s.add_argument("--smoke-ids", help="JSON list of token ids: also print the first --smoke-n greedy tokens")
            s.add_argument("--smoke-n", type=int, default=8)
    return p


_json_out = None  # the process's stdout, kept for the JSON line alone


def _emit(record, code=0):
    out = _json_out or sys.stdout
    out.write(json.dumps(record) + "\n")
    out.flush()
    sys.exit(code)


def _error_text(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [line for line in text.splitlines() if line.strip()]
    # The last lines say what failed; a multi-page message (a compiler log, a pip trace) stays in the log.
    return " / ".join(lines[-3:])[:600] if lines else type(exc).__name__


def _time(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _load_and_time(d, path, variant, threads, prompt, gen, reps):
    start = time.perf_counter()
    generate = d["load"](path, variant, threads)
    load_s = time.perf_counter() - start
    # Warm-up: each call once (the first call of most engines compiles or allocates).
    generate(prompt, 1)
    generate(prompt, gen + 1)
    first, whole = [], []
    for _ in range(reps):
        seconds, out = _time(lambda: generate(prompt, 1))
        if len(out) != 1:
            raise RuntimeError(f"asked for 1 token, got {len(out)}")
        first.append(seconds)
        seconds, out = _time(lambda: generate(prompt, gen + 1))
        if len(out) != gen + 1:
            raise RuntimeError(f"asked for {gen + 1} tokens with EOS ignored, got {len(out)}")
        whole.append(seconds)
    decode_s = statistics.median(whole) - statistics.median(first)
    if decode_s <= 0:
        raise RuntimeError(f"decode time not positive: 1 token {statistics.median(first):.4f} s, "
                           f"{gen + 1} tokens {statistics.median(whole):.4f} s")
    timing = {"pp_ts": len(prompt) / statistics.median(first), "tg_ts": gen / decode_s,
              "first_token_s": first, "whole_s": whole, "load_s": load_s,
              "method": "generate() wall time: prefill = time to the first token, decode = (1+N tokens) - (1 token)"}
    return generate, timing


def main(d):
    """d: the driver module's globals()."""
    global _json_out
    args = _parser().parse_args()
    # Engines log to stdout (vLLM, from Python and from C++): file descriptor 1 becomes stderr for
    # them, and the JSON line goes to the original stdout.
    sys.stdout.flush()
    _json_out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    engine = d["ENGINE"]
    if args.command == "variants":
        _emit({"engine": engine, **d["VARIANTS"], "not_offered": d.get("NOT_OFFERED", {})})
    record = {"engine": engine, "variant": args.variant}
    try:
        record["version"] = d["version"]()
        path = d["prepare"](args.hf, args.variant, args.cache)
        if args.command == "prepare":
            _emit({**record, "path": path})
        record.update(threads=args.threads, p=args.prompt, n=args.gen)
        with open(args.prompt_ids) as f:
            prompt = json.load(f)[: args.prompt]
        if len(prompt) != args.prompt:
            raise ValueError(f"{args.prompt_ids} holds {len(prompt)} ids, fewer than -p {args.prompt}")
        smoke = None
        if args.smoke_ids:
            with open(args.smoke_ids) as f:
                smoke = json.load(f)
        if "measure" in d:
            record.update(d["measure"](path, args.variant, args.threads, args.prompt, args.gen, args.reps))
            if smoke is not None:
                record["smoke_tokens"] = list(d["greedy"](path, args.variant, args.threads, smoke, args.smoke_n))
        else:
            generate, timing = _load_and_time(d, path, args.variant, args.threads, prompt, args.gen, args.reps)
            record.update(timing)
            if smoke is not None:
                record["smoke_tokens"] = list(generate(smoke, args.smoke_n))
        record["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        if "extra" in d:
            record.update(d["extra"]())
        _emit(record)
    except Exception as exc:  # noqa: BLE001 - every failure becomes the row's reason
        traceback.print_exc(file=sys.stderr)
        _emit({**record, "error": _error_text(exc)}, 1)


def env_threads(threads):
    """The thread-count variables every OpenMP / MKL / OpenBLAS runtime reads (the shell sets them too)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(threads)


def run_json(cmd, **kw):
    """A subprocess that prints one JSON document; its stderr's tail in the error when it fails."""
    import subprocess
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        tail = " / ".join([line for line in r.stderr.splitlines() if line.strip()][-3:])
        raise RuntimeError(f"{os.path.basename(cmd[0])} exit {r.returncode}: {tail}")
    return json.loads(r.stdout)
