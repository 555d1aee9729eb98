#!/usr/bin/env bash
# Quality of each weight format, ours beside llama.cpp's, on the same weights, text and machine, in
# one run: PPL (llama-perplexity's method), ΔPPL, mean / p99 KL divergence and top-1 agreement
# against each tool's own bf16 run, and tokens/s of the perplexity loop. Writes OUT/table.md.
#
#   bench/quality.sh [--model assets/demo-model] [--text assets/brown-heldout.txt] [--ctx 256]
#                    [--chunks 16] [--threads 2] [--llama-perplexity build-llama-perplexity/llama-perplexity]
#                    [--out out/quality] [--reference bf16|f32]
#
# Ours: inferlab perplexity --weights bf16 (reference, --kl-divergence-base), int8, q4 (--kl-divergence).
# llama.cpp: the model converted by bench/hf_to_gguf.py to GGUF BF16 (reference), Q8_0, Q4_0, run by
# llama-perplexity built from node-llama-cpp's bundled source (bench/build_llama_perplexity.sh). Nothing
# is downloaded or built here. The reference files are large (ours: float32 log-probs, chunks x ctx/2 x
# vocab x 4 bytes; llama.cpp's: uint16), kept in OUT.
# --reference f32: both tools' reference is the same weights computed in f32 (inferlab --weights f32,
# llama.cpp an F32 GGUF), not bf16: a bf16 run rounds its activations to bf16 too, so its logits carry
# a rounding of their own that each tool's bf16 kernels make differently.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=assets/demo-model TEXT=assets/brown-heldout.txt CTX=256 CHUNKS=16 THREADS=2
LLAMA=build-llama-perplexity/llama-perplexity OUT=out/quality BUILD_DIR=${BUILD_DIR:-build} REF=bf16
while (($#)); do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --text) TEXT=$2; shift 2 ;;
    --ctx) CTX=$2; shift 2 ;;
    --chunks) CHUNKS=$2; shift 2 ;;
    --threads|-t) THREADS=$2; shift 2 ;;
    --llama-perplexity) LLAMA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --reference) REF=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "quality.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
INFERLAB=$BUILD_DIR/bin/inferlab
[ -x "$INFERLAB" ] || { echo "quality.sh: $INFERLAB not found: build first (scripts/setup)" >&2; exit 1; }
[ -x "$LLAMA" ] || { echo "quality.sh: $LLAMA not found: bench/build_llama_perplexity.sh builds it" >&2; exit 1; }
case "$REF" in bf16|f32) ;; *) echo "quality.sh: --reference must be bf16 or f32, got '$REF'" >&2; exit 2 ;; esac
mkdir -p "$OUT"

echo "== GGUF conversions of $MODEL"
for t in $(printf '%s\n' bf16 "$REF" q8_0 q4_0 | awk '!seen[$0]++'); do
  /usr/bin/python3 bench/hf_to_gguf.py "$MODEL" --type "$t" --out "$OUT/model-$t.gguf" | tail -1
done
# Q4_0 as llama-quantize writes it keeps the output matrix (the tied embedding) at Q8_0; --pure makes
# it Q4_0 too, the bytes our q4 reads.
/usr/bin/python3 bench/hf_to_gguf.py "$MODEL" --type q4_0 --pure --out "$OUT/model-q4_0-pure.gguf" | tail -1

common=(--ctx "$CTX" --chunks "$CHUNKS" --threads "$THREADS" --json -q)
echo "== inferlab $REF (reference)"
"$INFERLAB" perplexity "$MODEL" --file "$TEXT" --weights "$REF" "${common[@]}" --kl-divergence-base "$OUT/ours-$REF.kld" \
  >"$OUT/ours-$REF.json"
for w in $([ "$REF" = bf16 ] || echo bf16) int8 q4; do
  echo "== inferlab $w"
  "$INFERLAB" perplexity "$MODEL" --file "$TEXT" --weights "$w" "${common[@]}" --kl-divergence "$OUT/ours-$REF.kld" \
    >"$OUT/ours-$w.json"
done
lcommon=(-f "$TEXT" -c "$CTX" -b "$CTX" --chunks "$CHUNKS" -t "$THREADS")
echo "== llama.cpp $REF (reference)"
"$LLAMA" -m "$OUT/model-$REF.gguf" "${lcommon[@]}" --kl-divergence-base "$OUT/llama-$REF.kld" >"$OUT/llama-$REF.log" 2>&1
for t in $([ "$REF" = bf16 ] || echo bf16) q8_0 q4_0 q4_0-pure; do
  echo "== llama.cpp $t"
  "$LLAMA" -m "$OUT/model-$t.gguf" "${lcommon[@]}" --kl-divergence-base "$OUT/llama-$REF.kld" --kl-divergence \
    >"$OUT/llama-$t.log" 2>&1
done

/usr/bin/python3 - "$OUT" "$CTX" "$CHUNKS" "$THREADS" "$MODEL" "$TEXT" "$REF" <<'PY'
import json, re, sys
out, ctx, chunks, threads, model, text, ref = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]

def llama(name):
    log = open(f"{out}/llama-{name}.log", encoding="utf-8", errors="replace").read()
    # llama-perplexity times its first pass (one chunk of ctx with -b ctx): forward only, like ours.
    sp = re.search(r"([\d.]+) seconds per pass", log)
    r = {"tps": ctx / float(sp.group(1)) if sp else float("nan")}
    m = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", log)
    if m:
        r["ppl"], r["ppl_err"] = float(m.group(1)), float(m.group(2))
    g = lambda pat: re.search(pat, log)
    if g(r"Mean PPL\(Q\)\s*:\s*([\d.]+) ±\s*([\d.]+)"):
        r["ppl"], r["ppl_err"] = map(float, g(r"Mean PPL\(Q\)\s*:\s*([\d.]+) ±\s*([\d.]+)").groups())
        r["dppl"], r["dppl_err"] = map(float, g(r"Mean PPL\(Q\)-PPL\(base\)\s*:\s*([-\d.]+) ±\s*([\d.]+)").groups())
        r["kld"], r["kld_err"] = map(float, g(r"Mean    KLD:\s*([-\d.]+) ±\s*([\d.]+)").groups())
        r["p99"] = float(g(r"99\.0%   KLD:\s*([-\d.]+)").group(1))
        r["median"] = float(g(r"Median  KLD:\s*([-\d.]+)").group(1))
        r["top"], r["top_err"] = map(float, g(r"Same top p:\s*([\d.]+) ±\s*([\d.]+) %").groups())
    return r

def ours(name):
    j = json.load(open(f"{out}/ours-{name}.json"))
    r = {"ppl": j["ppl"], "ppl_err": j["ppl_err"], "tps": j["tokens_per_second"], "scored": j["scored"]}
    if "kl_divergence" in j:
        k = j["kl_divergence"]
        r.update(dppl=k["delta_ppl"], dppl_err=k["delta_ppl_err"], kld=k["mean"], kld_err=k["mean_err"], p99=k["p99"],
                 median=k["median"], top=100 * k["same_top"], top_err=100 * k["same_top_err"])
    return r

rows = ([("inferlab", "f32", ours("f32")), ("llama.cpp", "F32", llama("f32"))] if ref == "f32" else []) + [
        ("inferlab", "bf16", ours("bf16")), ("llama.cpp", "BF16", llama("bf16")),
        ("inferlab", "int8", ours("int8")), ("llama.cpp", "Q8_0", llama("q8_0")),
        ("inferlab", "q4", ours("q4")), ("llama.cpp", "Q4_0", llama("q4_0")),
        ("llama.cpp", "Q4_0 --pure", llama("q4_0-pure"))]
fmt = lambda r, k, d="{:.6f}": d.format(r[k]) if k in r else "(reference)"
lines = [f"{model} on {text}: ctx {ctx}, {chunks} chunks ({rows[0][2]['scored']} positions scored), {threads} threads; "
         f"ΔPPL, KLD and top-1 against each tool's own {ref} run; forward tok/s: chunk tokens per second of "
         "forward passes (ours: all chunks; llama.cpp: its timed first pass).", "",
         "| tool | format | PPL | ΔPPL | mean KLD | median KLD | 99% KLD | same top token | forward tok/s |",
         "|---|---|---|---|---|---|---|---|---|"]
for tool, f, r in rows:
    dppl = f"{r['dppl']:+.4f} ± {r['dppl_err']:.4f}" if "dppl" in r else "(reference)"
    kld = f"{r['kld']:.6f} ± {r['kld_err']:.6f}" if "kld" in r else "(reference)"
    top = f"{r['top']:.2f} ± {r['top_err']:.2f} %" if "top" in r else "(reference)"
    lines.append(f"| {tool} | {f} | {r['ppl']:.4f} ± {r['ppl_err']:.4f} | {dppl} | {kld} | {fmt(r, 'median')} | "
                 f"{fmt(r, 'p99')} | {top} | {r['tps']:.0f} |")
base = 2 if ref == "f32" else 0  # the bf16 rows
ob, lb = rows[base][2]["ppl"], rows[base + 1][2]["ppl"]
lines += ["", f"bf16 PPL, inferlab vs llama.cpp: {ob:.4f} vs {lb:.4f}, relative difference {abs(ob - lb) / lb:.2e} "
          f"(target <= 1e-3: {'met' if abs(ob - lb) / lb <= 1e-3 else 'NOT met'})"]
for (_, a, ra), (_, b, rb) in ((rows[base + 2], rows[base + 3]), (rows[base + 4], rows[base + 5]), (rows[base + 4], rows[base + 6])):
    ok = ra["kld"] <= rb["kld"]
    lines.append(f"mean KLD {a} {ra['kld']:.6f} vs llama.cpp {b} {rb['kld']:.6f} (target: ours <= theirs: {'met' if ok else 'NOT met'})")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
