#!/usr/bin/env bash
# Speed of inferlab on a Qwen2.5-0.5B-shaped model against the machine's limits and, when given,
# llama.cpp's llama-bench, all measured in this one run on this machine.
#
#   bench/speed.sh [--build-dir build] [--model DIR] [--threads 1,2] [--weights bf16,int8,q4]
#                  [-p 512] [-n 128] [-r 5] [--quick] [--out DIR]
#                  [--llama-bench PATH --gguf FILE [--gguf FILE ...]]
#
# Builds nothing and downloads nothing: it needs a built `inferlab` (scripts/setup) and writes the
# random-weight bf16 model with `inferlab make-model` when it is not there yet. The peer is run
# only when its binary and a GGUF of the same shape are given; the script never fetches either.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=build MODEL=models/qwen2.5-0.5b-bf16 THREADS=1,2 WEIGHTS=bf16,int8,q4
PROMPT=512 GEN=128 REPS=5 QUICK=0 OUT_DIR=out/speed LLAMA_BENCH="" GGUFS=()
while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --threads|-t) THREADS=$2; shift 2 ;;
    --weights) WEIGHTS=$2; shift 2 ;;
    -p) PROMPT=$2; shift 2 ;;
    -n) GEN=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --out) OUT_DIR=$2; shift 2 ;;
    --llama-bench) LLAMA_BENCH=$2; shift 2 ;;
    --gguf) GGUFS+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "speed.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

INFERLAB="$BUILD_DIR/bin/inferlab"
if [ ! -x "$INFERLAB" ]; then
  echo "speed.sh: $INFERLAB not found: build first (scripts/setup, or BUILD_DIR=... / --build-dir)" >&2
  exit 1
fi
PYTHON=/usr/bin/python3
mkdir -p "$OUT_DIR"

if [ ! -f "$MODEL/config.json" ]; then
  echo "== writing a Qwen2.5-0.5B-shaped random bf16 model to $MODEL"
  "$INFERLAB" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$MODEL"
fi

if [ -n "$LLAMA_BENCH" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "speed.sh: --llama-bench $LLAMA_BENCH is not an executable file" >&2
  exit 1
fi
if [ -n "$LLAMA_BENCH" ] && [ ${#GGUFS[@]} -eq 0 ]; then
  echo "speed.sh: --llama-bench needs --gguf FILE (a GGUF of the same shape)" >&2
  exit 1
fi
for g in "${GGUFS[@]}"; do [ -f "$g" ] || { echo "speed.sh: --gguf $g: no such file" >&2; exit 1; }; done

quick=()
((QUICK)) && quick=(--quick)
IFS=, read -ra thread_list <<<"$THREADS"
IFS=, read -ra weight_list <<<"$WEIGHTS"

for t in "${thread_list[@]}"; do
  echo "== probes, $t thread(s)"
  "$INFERLAB" bench probes -t "$t" "${quick[@]}" --json >"$OUT_DIR/probes-t$t.json"
  for w in "${weight_list[@]}"; do
    echo "== bench engine --weights $w -t $t -p $PROMPT -n $GEN -r $REPS"
    "$INFERLAB" bench engine "$MODEL" --weights "$w" -t "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" --json \
      >"$OUT_DIR/engine-$w-t$t.json"
  done
  if [ -n "$LLAMA_BENCH" ]; then
    for g in "${GGUFS[@]}"; do
      echo "== llama-bench $(basename "$g") -t $t"
      "$LLAMA_BENCH" -m "$g" -p "$PROMPT" -n "$GEN" -t "$t" -r "$REPS" -o json >"$OUT_DIR/llama-$(basename "$g")-t$t.json"
    done
  fi
done

"$PYTHON" - "$OUT_DIR" "$THREADS" "$WEIGHTS" "$PROMPT" "$GEN" "${LLAMA_BENCH:-}" <<'PY'
import glob, json, os, sys

out_dir, threads, weights, prompt, gen, peer_binary = sys.argv[1:7]
threads = [int(t) for t in threads.split(",")]
weights = weights.split(",")
BYTES = {"f32": 4.0, "bf16": 2.0, "int8": 34 / 32, "q4": 18 / 32}
PEER_TYPE = {"bf16": ("BF16",), "int8": ("Q8_0",), "q4": ("Q4_0",)}
# llama.cpp's llama-bench on one of these 2-core machines, Qwen2.5-0.5B shape (from the issue).
REFERENCE = {("bf16", 2): ("530-550 (pp128)", "37 (tg64)"), ("int8", 2): ("260-300 (pp128)", "53-57 (tg64)"),
             ("q4", 2): ("450-470 (pp128)", "79-83 (tg64)"), ("bf16", 1): ("265-281 (pp128)", "25-26 (tg64)")}

def load(path):
    with open(path) as f:
        return json.load(f)

def peer_results(t):
    found = {}
    for path in glob.glob(os.path.join(out_dir, f"llama-*-t{t}.json")):
        for row in load(path):
            test = "pp" if row.get("n_gen", 0) == 0 else "tg"
            for ours, names in PEER_TYPE.items():
                if any(n in str(row.get("model_type", "")).upper() for n in names):
                    found.setdefault(ours, {})[test] = row["avg_ts"]
    return found

print()
print("# inferlab speed, measured in this run")
for t in threads:
    probes = load(os.path.join(out_dir, f"probes-t{t}.json"))
    bw = probes["bandwidth"]["read_gbs"]
    bf16_peak = probes["peaks"]["bf16_gflops"]
    sgemm = max(g["gflops"] for g in probes["sgemm"])
    print(f"\n## {t} thread(s): read bandwidth {bw:.1f} GB/s (triad {probes['bandwidth']['triad_gbs']:.1f}), "
          f"OpenBLAS sgemm best {sgemm:.0f} GFLOP/s on the prefill shapes (core {probes['openblas']['core']}), "
          f"bf16 dot peak {bf16_peak:.0f} GFLOP/s")
    peers = peer_results(t)
    print()
    print("| weights | pp t/s | tg t/s | GB read/token | decode GB/s | of bandwidth | prefill GFLOP/s | of sgemm | of bf16 peak | peak RSS MiB | RSS / (weights+KV) | pp ours/peer | tg ours/peer |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in weights:
        path = os.path.join(out_dir, f"engine-{w}-t{t}.json")
        if not os.path.exists(path):
            continue
        e = load(path)
        res = {r["test"][:2]: r for r in e["results"]}
        params = e["matmul_params"]
        gb_token = params * BYTES.get(w, 2.0) / 1e9
        pp = res.get("pp", {}).get("avg_ts", float("nan"))
        tg = res.get("tg", {}).get("avg_ts", float("nan"))
        pp_sd = res.get("pp", {}).get("stddev_ts", 0)
        tg_sd = res.get("tg", {}).get("stddev_ts", 0)
        decode_gbs = gb_token * tg
        prefill_gflops = pp * 2 * (params - e["lm_head_params"]) / 1e9
        weights_bytes = params * BYTES.get(w, 2.0)
        rss = e["peak_rss_bytes"]
        rss_ratio = rss / (weights_bytes + e["kv_cache_bytes"])
        peer = peers.get(w, {})
        pp_ratio = f"{pp / peer['pp']:.2f}x" if "pp" in peer else "-"
        tg_ratio = f"{tg / peer['tg']:.2f}x" if "tg" in peer else "-"
        print(f"| {w} | {pp:.1f} ± {pp_sd:.1f} | {tg:.2f} ± {tg_sd:.2f} | {gb_token:.3f} | {decode_gbs:.1f} | "
              f"{100 * decode_gbs / bw:.0f}% | {prefill_gflops:.0f} | {100 * prefill_gflops / sgemm:.0f}% | "
              f"{100 * prefill_gflops / bf16_peak:.0f}% | {rss / 1048576:.0f} | {rss_ratio:.2f} | {pp_ratio} | {tg_ratio} |")
    if peers:
        print("\nllama-bench (measured in this run):")
        for w, r in sorted(peers.items()):
            print(f"  {w}: " + ", ".join(f"{k} {v:.2f} t/s" for k, v in sorted(r.items())))
print()
if not peer_binary:
    print("llama.cpp peer: not run (give --llama-bench PATH --gguf FILE to measure it side by side; this script "
          "never downloads or builds it).")
print("Reference figures from the issue (llama.cpp llama-bench on one of these 2-core machines, NOT measured in this run):")
for (w, t), (pp, tg) in REFERENCE.items():
    print(f"  {w:5s} {t} thread(s): pp {pp} t/s, tg {tg} t/s")
print(f"\nRaw JSON: {out_dir}/")
PY
