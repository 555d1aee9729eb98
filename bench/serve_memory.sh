#!/usr/bin/env bash
# Peak memory of serving: `inferlab serve` on a Qwen2.5-0.5B-shaped bf16 model (as the real
# checkpoint is stored), loaded with concurrent long requests until its KV cache is in use, then
# its peak RSS (VmHWM) against the weights' bytes + the KV cache budget it reports in /metrics.
# The issue's bound: peak RSS <= (weights + KV budget) x 1.15.
# Usage: bench/serve_memory.sh [MODEL] (default: models/bench-qwen2.5-0.5b-bf16, made once)
# Env: BUILD_DIR (build), WEIGHTS (auto), KV_TOKENS (16384), CONCURRENCY (8), REQUESTS (16),
#      INPUT_LEN (1024), OUTPUT_LEN (32), THREADS (0 = all cores), PORT (any free)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin/inferlab
MODEL=${1:-models/bench-qwen2.5-0.5b-bf16}
source bench/inferlab_server.sh
bench_model "$MODEL"
[ -f "$MODEL/config.json" ] || { echo "error: $MODEL has no config.json" >&2; exit 1; }
LOG=$(mktemp)
WORK=$(mktemp -d)
"$BIN" serve "$MODEL" --host 127.0.0.1 --port "${PORT:-0}" --threads "${THREADS:-0}" --weights "${WEIGHTS:-auto}" \
  --max-batch "${CONCURRENCY:-8}" --kv-tokens "${KV_TOKENS:-16384}" > "$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true; rm -rf "$LOG" "$WORK"' EXIT
wait_for_server $SERVER "$LOG"
rss_after_load=$(awk '/VmRSS/ {print $2 * 1024}' /proc/$SERVER/status)
"$BIN" bench serve --base-url "$URL" --tokenizer "$MODEL" --num-requests "${REQUESTS:-16}" \
  --concurrency "${CONCURRENCY:-8}" --input-len "${INPUT_LEN:-1024}" --output-len "${OUTPUT_LEN:-32}" --ignore-eos \
  --output "$WORK/requests.csv" --summary "$WORK/summary.json" --no-progress > "$WORK/bench.txt"
curl -sf "$URL/metrics" > "$WORK/metrics.txt"
peak=$(awk '/VmHWM/ {print $2 * 1024}' /proc/$SERVER/status)
/usr/bin/python3 - "$MODEL" "$WORK/metrics.txt" "$WORK/summary.json" "$peak" "$rss_after_load" <<'EOF'
import glob, json, os, sys
model, metrics_path, summary_path, peak, after_load = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
config = json.load(open(os.path.join(model, "config.json")))
metrics = {}
for line in open(metrics_path):
    if line and not line.startswith("#"):
        name, _, value = line.rpartition(" ")
        metrics[name] = float(value)
weights = sum(os.path.getsize(f) for f in glob.glob(os.path.join(model, "*.safetensors")))
heads = config["num_attention_heads"]
kv_heads = config.get("num_key_value_heads", heads)
head_dim = config.get("head_dim", config["hidden_size"] // heads)
# The engine's cache holds fp32 K and V for every layer and position of the pool.
kv_budget = int(metrics["inferlab_kv_cache_blocks_total"] * metrics["inferlab_kv_cache_block_size"]) * \
    config["num_hidden_layers"] * 2 * kv_heads * head_dim * 4
summary = json.load(open(summary_path))
bound = (weights + kv_budget) * 1.15
mib = 1 / 1048576
print(f"model {model}: weights {weights * mib:.0f} MiB (safetensors), KV budget {kv_budget * mib:.0f} MiB")
print(f"load: {summary['successful']}/{summary['requests']} requests of {summary['input_tokens'] // max(1, summary['requests'])}"
      f" prompt tokens, {summary['output_throughput_token_per_s']:.1f} output tokens/s")
if summary["successful"] != summary["requests"]:
    sys.exit("error: some requests failed; the peak would not be the serving peak")
print(f"RSS after load {after_load * mib:.0f} MiB; peak RSS (VmHWM) under load {peak * mib:.0f} MiB")
ratio = peak / (weights + kv_budget)
print(f"peak RSS / (weights + KV budget) = {ratio:.3f} (bound 1.15: {'yes' if ratio <= 1.15 else 'NO'})")
EOF
