#!/usr/bin/env bash
# Aggregate streaming throughput of `inferlab serve` at several concurrencies, for comparing two
# builds (e.g. the HTTP transport before and after): each concurrency C sends C streaming
# requests of OUTPUT_LEN tokens with `inferlab bench serve` and prints output tokens/s.
#   bench/serve_scale.sh [CLI] [MODEL]        CONCURRENCY="8 64 512" OUTPUT_LEN=16 MAX_BATCH=64
#   EXTRA_SERVE_ARGS="--http-threads 600"     (a thread-per-connection build needs a worker per stream)
set -euo pipefail
cd "$(dirname "$0")/.."
CLI=${1:-build/bin/inferlab}
MODEL=${2:-models/demo}
BENCH_CLI=${BENCH_CLI:-build/bin/inferlab}
PORT=${PORT:-31977}
OUT=$(mktemp -d)
"$CLI" serve "$MODEL" --port "$PORT" --threads 2 --max-batch "${MAX_BATCH:-64}" --max-queue 100000 \
  ${EXTRA_SERVE_ARGS:-} >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$OUT"' EXIT
for _ in $(seq 600); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for c in ${CONCURRENCY:-8 64 512}; do
  "$BENCH_CLI" bench serve --base-url "http://127.0.0.1:$PORT" --num-requests "$c" --concurrency "$c" \
    --input-len 16 --output-len "${OUTPUT_LEN:-16}" --ignore-eos --seed 1 --no-progress --endpoint completions \
    --output "" --summary "$OUT/s$c.json" >"$OUT/b$c.log" 2>&1 || { cat "$OUT/b$c.log"; exit 1; }
  python3 - "$OUT/s$c.json" "$c" "$SERVER" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
status = open(f"/proc/{sys.argv[3]}/status").read()
threads = status.split("Threads:")[1].split()[0]
def find(d, *names):
    for n in names:
        if n in d: return d[n]
    for v in d.values():
        if isinstance(v, dict):
            r = find(v, *names)
            if r is not None: return r
    return None
tput = find(s, "output_throughput_token_per_s")
ok = find(s, "successful")
print(f"concurrency {sys.argv[2]}: output {tput} tok/s, completed {ok}, server threads {threads}")
PY
done
