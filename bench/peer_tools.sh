#!/usr/bin/env bash
# inferlab's `bench serve` checked against the peers' own benchmark clients: `vllm bench serve`,
# SGLang's `python -m sglang.bench_serving`, NVIDIA's `aiperf profile` and `guidellm benchmark`,
# each in a virtual environment of its own under out/peer-venvs/ (pinned in bench/peer_tools/,
# never .venv), against `inferlab serve` and llama.cpp's llama-server on the same GGUF, with the
# same prompts, output lengths, concurrency and seed, interleaved round by round. Prints one table
# per server: each metric as each tool reports it, beside ours recomputed under that tool's
# definition from our per-request CSV (bench/peer_tools.py; docs/measurement.md, "Checked against
# the peers' tools", says what each definition is).
#
#   bench/peer_tools.sh --setup-only            make the four venvs (GBs: vLLM, SGLang and GuideLLM import torch)
#   bench/peer_tools.sh [--rounds 3 --num-requests 32 --concurrency 4 --output-len 32 ...]
#   bench/peer_tools.sh --help                  every option
#
# Nothing is fetched while measuring: the venvs are made first (or, with --no-setup, a missing one
# is reported as "not installed"); the tokenizer the peers load is written from the GGUF itself.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec python3 "$root/bench/peer_tools.py" "$@"
