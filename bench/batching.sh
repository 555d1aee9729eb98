#!/usr/bin/env bash
# Decode throughput with 8 concurrent streams vs 1 through `inferlab serve` (continuous batching:
# one forward per step for the whole batch, weights read once), for each weight format asked, with
# the host's read bandwidth measured before and after each.
# Usage: bench/batching.sh [MODEL] (default: a random Qwen2.5-0.5B-shaped bf16 model, as the real
# checkpoint is stored, made once under models/)
# Env: BUILD_DIR (build), WEIGHTS (auto; a comma list such as bf16,int8,q4 runs one server per
# format), CONCURRENCY (8), TOKENS (64), THREADS (0 = all cores), PORT (any free)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin/inferlab
MODEL=${1:-models/bench-qwen2.5-0.5b-bf16}
source bench/inferlab_server.sh
bench_model "$MODEL"
LOG=$(mktemp)
SERVER=""
trap '[ -n "$SERVER" ] && kill $SERVER 2>/dev/null; wait 2>/dev/null || true; rm -f "$LOG"' EXIT

# The host's read bandwidth (the read probe of `bench probes`), taken before and after each format's
# run: one stream's decode is bound by it and eight streams' by the arithmetic, so the ratio moves
# with it (on a shared host it can change between runs; docs/speed.md).
read_bandwidth() {
  "$BIN" bench probes -t "${THREADS:-0}" | sed -n 's/^memory read bandwidth.*: \([0-9.]* GB\/s\);.*/\1/p'
}

run_format() {
  local weights=$1 before
  before=$(read_bandwidth)
  "$BIN" serve "$MODEL" --host 127.0.0.1 --port "${PORT:-0}" --threads "${THREADS:-0}" --weights "$weights" \
    --max-batch "${CONCURRENCY:-8}" --kv-tokens 16384 > "$LOG" 2>&1 &
  SERVER=$!
  wait_for_server $SERVER "$LOG"
  echo "== model: $MODEL, weights $weights (server $URL)"
  node bench/batching.mjs "$URL" --concurrency "${CONCURRENCY:-8}" --tokens "${TOKENS:-64}"
  kill $SERVER
  wait $SERVER 2>/dev/null || true
  SERVER=""
  echo "read bandwidth (bench probes) before / after: $before / $(read_bandwidth)"
}

IFS=, read -ra formats <<< "${WEIGHTS:-auto}"
for weights in "${formats[@]}"; do run_format "$weights"; done
