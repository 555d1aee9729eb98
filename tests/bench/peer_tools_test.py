#!/usr/bin/env python3
"""bench/peer_tools.sh: its command line (always), and a one-round smoke through every peer tool
against `inferlab serve` on the default model (only where the peers' venvs exist; never installs).

  peer_tools_test.py cli   ROOT
  peer_tools_test.py smoke ROOT INFERLAB_CLI     exit 77 (skip) without the venvs or the model
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SKIP = 77


def run(root, *args):
    return subprocess.run([str(root / "bench/peer_tools.sh"), *args], capture_output=True, text=True, timeout=600)


def expect(r, code, pattern):
    out = r.stdout + r.stderr
    if r.returncode != code or not re.search(pattern, out):
        sys.exit(f"expected exit {code} and /{pattern}/, got exit {r.returncode}:\n{out[-3000:]}")


def cli(root):
    r = run(root, "--help")
    expect(r, 0, r"--rounds")
    for flag in ("--setup-only", "--no-setup", "--tools", "--servers", "--concurrency", "--output-len", "--seed"):
        if flag not in r.stdout:
            sys.exit(f"--help does not mention {flag}")
    # Bad arguments are refused by name before anything is installed or started.
    expect(run(root, "--rounds", "0"), 2, r"--rounds must be at least 1, got 0")
    expect(run(root, "--tools", "inferlab,vlm"), 2, r"unknown tool 'vlm' \(known: inferlab, vllm, sglang, aiperf, guidellm\)")
    expect(run(root, "--servers", "sglang"), 2, r"unknown server 'sglang'")
    expect(run(root, "--output-len", "3"), 2, r"--output-len must be at least 4 \(SGLang's ShareGPT loader refuses shorter\), got 3")
    expect(run(root, "--setup-only", "--no-setup"), 2, r"contradict")
    expect(run(root, "--require-all"), 2, r"--require-all goes with --no-setup")
    expect(run(root, "--concurrency", "two"), 2, r"invalid int value: 'two'")
    expect(run(root, "--frobnicate"), 2, r"unrecognized arguments: --frobnicate")
    print("peer_tools.sh: --help and 8 argument errors as expected")


def smoke(root, cli_path):
    model = root / "models/SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.exists():
        print(f"SKIP: {model} is missing (scripts/setup fetches it)")
        return SKIP
    with tempfile.TemporaryDirectory() as out:
        r = run(root, "--no-setup", "--require-all", "--servers", "inferlab", "--rounds", "1", "--num-requests", "4",
                "--concurrency", "2", "--output-len", "4", "--prompt-words", "8", "--inferlab", cli_path,
                "--out", out)
        if r.returncode == SKIP:
            print(r.stdout.strip())
            return SKIP
        if r.returncode != 0:
            sys.exit(f"the smoke run failed (exit {r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        table = r.stdout
        for tool in ("vllm bench serve", "sglang.bench_serving", "aiperf profile", "guidellm benchmark"):
            if tool not in table:
                sys.exit(f"the table has no column for {tool}:\n{table}")
        # Every peer reported TTFT, and ours was recomputed beside it: "theirs / ours′ (Δ)" cells.
        ttft = next(l for l in table.splitlines() if l.startswith("| TTFT mean"))
        cells = [c.strip() for c in ttft.strip("|").split("|")[1:]]
        if len(cells) != 5 or not re.fullmatch(r"[\d.]+", cells[0]) or \
                not all(re.fullmatch(r"[\d.]+ / [\d.]+ \([-+][\d.]+ %\)( ✗)?", c) for c in cells[1:]):
            sys.exit(f"unexpected TTFT row: {ttft}")
        print(table)
    return 0


if __name__ == "__main__":
    mode, root = sys.argv[1], Path(sys.argv[2])
    if mode == "cli":
        cli(root)
        sys.exit(0)
    sys.exit(smoke(root, sys.argv[3]))
